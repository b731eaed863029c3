import { randomBytes } from "node:crypto";
import { collectionOf, type Models } from "../../db/models.js";
import { errors } from "../../errors.js";
import type { ModelCallRecord } from "../../llm/types.js";
import { redactDeep } from "../../util/redact.js";
import { taskFields } from "./store.js";

/*
 * A task's trajectory: every model call it made, as the model saw it (docs/api.md,
 * "GET /tasks/{id}/trajectory"). One
 * document per call, appended once (no update, no transaction), read back in `_id` order.
 * Redacted like logs before it is stored, and kept TRAJECTORY_RETENTION_DAYS after the task
 * ended (jobs/housekeeping.ts prunes).
 */

/** One line of GET /tasks/{id}/trajectory. */
export interface TrajectoryLine {
  stage: string;
  step: number;
  at: string;
  model: string;
  messages: unknown[];
  response: ModelCallRecord["response"];
  tool_results: ModelCallRecord["tool_results"];
  usage: {
    input_tokens: number;
    output_tokens: number;
    cache_read_tokens: number;
    cache_write_tokens: number;
  };
  usd: number;
  /** False when no price was known for the model (its `usd` is 0 then, not free). */
  priced: boolean;
  ms: number;
}

interface TrajectoryStepRecord extends Omit<TrajectoryLine, "at"> {
  _id: string;
  task_id: string;
  account_id: string;
  at: Date;
  [field: string]: unknown;
}

const stepsOf = (models: Models) => collectionOf<TrajectoryStepRecord>(models.TrajectoryStep);

/**
 * Appends one model call of a task to its trajectory, redacted. `stage` names the part of
 * the pipeline that called (plan, implement, fix, review, …).
 */
export async function recordModelCall(
  models: Models,
  task: { _id: string; account_id: string },
  stage: string,
  call: ModelCallRecord,
): Promise<void> {
  // Redacted (a deep copy) before anything awaits: the loop's history moves on afterwards.
  const safe = redactDeep({
    messages: call.messages,
    response: call.response,
    tool_results: call.tool_results,
  });
  // Time first so `_id` order is call order; the random tail keeps parallel workers apart.
  const id = `${task._id}:${call.at.getTime().toString().padStart(14, "0")}:${randomBytes(4).toString("hex")}`;
  await stepsOf(models).insertOne({
    _id: id,
    task_id: task._id,
    account_id: task.account_id,
    stage,
    step: call.step,
    at: call.at,
    model: call.model,
    messages: safe.messages,
    response: safe.response,
    tool_results: safe.tool_results,
    usage: {
      input_tokens: call.usage.inputTokens,
      output_tokens: call.usage.outputTokens,
      cache_read_tokens: call.usage.cachedInputTokens ?? 0,
      cache_write_tokens: call.usage.cacheWriteTokens ?? 0,
    },
    usd: call.usage.usd,
    priced: call.usage.priced,
    ms: call.ms,
  });
}

/**
 * The trajectory of one task of the account, in call order. 404 for an unknown or foreign
 * task; 410 when the task ended more than `retentionDays` ago (its calls are pruned).
 */
export async function readTrajectory(
  models: Models,
  accountId: string,
  taskId: string,
  retentionDays: number,
): Promise<TrajectoryLine[]> {
  const task = await taskFields(models, taskId, ["account_id", "finished_at"]);
  if (!task || task.account_id !== accountId) throw errors.notFound("task");
  if (task.finished_at && task.finished_at.getTime() < Date.now() - retentionDays * 86_400_000) {
    throw errors.gone(
      `The trajectory of this task is no longer kept (TRAJECTORY_RETENTION_DAYS is ${retentionDays}).`,
    );
  }
  const prefix = `${taskId}:`;
  const rows = await stepsOf(models)
    .find({ _id: { $gt: prefix, $lt: `${taskId};` } })
    .sort({ _id: 1 })
    .toArray();
  return rows
    .filter((r) => r._id.startsWith(prefix) && r.account_id === accountId)
    .map((r) => ({
      stage: r.stage,
      step: r.step,
      at: new Date(r.at).toISOString(),
      model: r.model,
      messages: r.messages,
      response: r.response,
      tool_results: r.tool_results,
      usage: r.usage,
      usd: r.usd,
      // Calls recorded before `priced` was kept: a cost of 0 for tokens had no price.
      priced:
        typeof r.priced === "boolean"
          ? r.priced
          : r.usd > 0 || r.usage.input_tokens + r.usage.output_tokens === 0,
      ms: r.ms,
    }));
}

/** Drops the model calls recorded before `cutoff` (housekeeping; a call outlives its task's end).
 * */
export async function pruneTrajectories(models: Models, cutoff: Date): Promise<number> {
  const result = await stepsOf(models).deleteMany({ at: { $lt: cutoff } });
  return result.deletedCount;
}
