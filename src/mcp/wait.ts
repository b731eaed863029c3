import { z } from "zod";
import type { TaskStatus } from "../db/models.js";
import { subscribeOrdered } from "../domain/task-event-hub.js";
import { isTerminalEvent } from "../domain/task-events.js";
import { isTerminal } from "../domain/tasks/model.js";
import { getTask } from "../domain/tasks/queries.js";
import { toTaskView } from "../domain/tasks/views.js";
import { task, taskParams } from "../http/routes/tasks/schema.js";
import type { ToolCall } from "./types.js";

/*
 * wait_for_task: the task's event log (domain/task-events.ts) through the process's event hub,
 * the same feed as /tasks/{id}/ws. Each phase event is an MCP progress notification; the call
 * answers at the next gate or the end, or when its bound runs out. A client's request timeout
 * (60 s in the SDK's) is reset by each notification when it asks so (resetTimeoutOnProgress).
 */

export const DEFAULT_WAIT_S = 50;
export const MAX_WAIT_S = 600;

export const waitInput = taskParams.extend({
  until: z
    .enum(["gate", "end"])
    .default("gate")
    .describe("gate: the next plan or diff gate, or the end; end: only the end"),
  timeout_s: z
    .number()
    .int()
    .min(1)
    .max(MAX_WAIT_S)
    .default(DEFAULT_WAIT_S)
    .describe(`at most this long, in seconds (default ${DEFAULT_WAIT_S})`),
});

export const waitOutput = z.object({
  reached: z
    .enum(["gate", "end", "timeout"])
    .describe(
      "gate: waiting for approval; end: completed, failed or cancelled; timeout: neither yet",
    ),
  task,
});

const GATES: readonly TaskStatus[] = ["awaiting_approval", "awaiting_diff_approval"];

function reachedBy(status: TaskStatus, until: "gate" | "end"): "gate" | "end" | undefined {
  if (isTerminal(status)) return "end";
  if (until === "gate" && GATES.includes(status)) return "gate";
  return undefined;
}

/** Waits for the task's next gate or its end (see above). */
export async function waitForTask(
  input: z.output<typeof waitInput>,
  call: ToolCall,
): Promise<z.output<typeof waitOutput>> {
  const { deps, principal } = call;
  const accountId = principal.accountId;
  // Ownership first (404 for a foreign task), then the log's top, then the task again: a
  // change after that top arrives as an event, one before it shows in the second read.
  await getTask(deps.models, accountId, input.id);
  const since = await deps.events.lastSeq(input.id);
  const record = await getTask(deps.models, accountId, input.id);
  const now = reachedBy(record.status, input.until);
  if (now) return { reached: now, task: toTaskView(record) };

  let progress = 0;
  const reached = await new Promise<"gate" | "end" | "timeout">((resolve, reject) => {
    let settled = false;
    let unsubscribe: (() => void) | undefined;
    const finish = (why: "gate" | "end" | "timeout") => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      call.signal.removeEventListener("abort", onAbort);
      unsubscribe?.();
      resolve(why);
    };
    const onAbort = () => finish("timeout");
    const timer = setTimeout(() => finish("timeout"), input.timeout_s * 1000);
    timer.unref();
    call.signal.addEventListener("abort", onAbort);
    subscribeOrdered(deps.hub, deps.events, record, since, (event) => {
      if (settled) return;
      if (event.event_type === "phase") {
        progress += 1;
        void call.progress(progress, `${event.phase} (${event.status})`).catch(() => undefined);
        const why = reachedBy(event.status, input.until);
        if (why) finish(why);
      } else if (isTerminalEvent(event)) finish("end");
    }).then(
      (stop) => {
        if (settled) stop();
        else unsubscribe = stop;
      },
      (error: unknown) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        call.signal.removeEventListener("abort", onAbort);
        reject(error instanceof Error ? error : new Error(String(error)));
      },
    );
  });
  return { reached, task: toTaskView(await getTask(deps.models, accountId, input.id)) };
}
