import { recordModelCall } from "../domain/tasks/trajectories.js";
import type { ModelCallRecord } from "../llm/types.js";
import type { StageContext } from "./stage.js";

/**
 * The tool loop's `onCall` for a stage: appends each model call to the task's trajectory
 * (domain/tasks/trajectories.ts). A failed write is logged, never the task's failure.
 */
export function trajectoryRecorder(
  ctx: Pick<StageContext, "models" | "task" | "logger">,
  stage: string,
): (call: ModelCallRecord) => Promise<void> {
  return async (call) => {
    try {
      await recordModelCall(ctx.models, ctx.task, stage, call);
    } catch (error) {
      ctx.logger.warn({ err: error, stage }, "could not record a model call in the trajectory");
    }
  };
}
