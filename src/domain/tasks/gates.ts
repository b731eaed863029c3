import { type Models, type TaskPhase, type TaskRecord, type TaskStatus } from "../../db/models.js";
import { errors } from "../../errors.js";
import { memoryScopeOf, remember, rememberFeedback } from "../agents/memory.js";
import { sanitizeUntrusted } from "../../text/sanitize.js";
import { type MarkerPart, claimMarker, markerKind } from "../../durable/markers.js";
import { endTask, hasEnded, repairEnding } from "./endings.js";
import type { TaskDeps } from "./model.js";
import { isTerminal } from "./model.js";
import { getTask, updateTask, type TaskUpdate } from "./store.js";

/** The decision at a task's gate, in its round (none in round 0). */
export const gateMarker = markerKind(
  "gate",
  "gate",
  (taskId: string, gate: "plan" | "diff", round: number = 0): MarkerPart[] =>
    round > 0 ? [taskId, gate, round] : [taskId, gate],
);

export type Decision = "approve" | "reject" | "approve-diff" | "reject-diff";

const GATES: Record<Decision, { status: TaskStatus; gate: "plan" | "diff"; label: string }> = {
  approve: { status: "awaiting_approval", gate: "plan", label: "plan approval" },
  reject: { status: "awaiting_approval", gate: "plan", label: "plan approval" },
  "approve-diff": { status: "awaiting_diff_approval", gate: "diff", label: "diff approval" },
  "reject-diff": { status: "awaiting_diff_approval", gate: "diff", label: "diff approval" },
};

/**
 * Applies a caller's decision at a gate. 409 `invalid_state` unless the task waits at that
 * gate; concurrent decisions on one gate are settled by a unique marker (one wins, the rest
 * get 409). Approving the plan moves the task to IMPLEMENTING and starts that stage.
 */
export async function decide(
  deps: TaskDeps,
  accountId: string,
  taskId: string,
  decision: Decision,
  who: string,
  /** A rejection's reason, kept in `error` and in the repository's memory. */
  options: { reason?: string | undefined } = {},
): Promise<TaskRecord> {
  const task = await getTask(deps.models, accountId, taskId);
  const gate = GATES[decision];
  if (task.status !== gate.status) {
    throw errors.invalidState(
      `The task is not awaiting ${gate.label} (status ${task.status}, phase ${task.phase}).`,
    );
  }
  // Stored as mongoose's `Once.create` stored it before: the schema's expires_at and timestamps.
  const now = new Date();
  // Each round has its own gate (a revision decides the earlier round's: revisions.ts).
  const decided = await claimMarker(deps.models, gateMarker(taskId, gate.gate, task.round ?? 0), {
    expires_at: null,
    created_at: now,
    updated_at: now,
  });
  if (!decided)
    throw errors.invalidState(`The ${gate.label} of this task has already been decided.`);
  if (decision === "reject" || decision === "reject-diff") {
    const what = decision === "reject" ? "plan" : "diff";
    const reason = options.reason ? sanitizeUntrusted(options.reason) : "";
    await endTask(deps, taskId, {
      status: "cancelled",
      error: `The ${what} was rejected by ${who}; nothing was pushed.${reason ? ` Reason: ${reason}` : ""}`,
    });
    await (
      reason
        ? rememberFeedback(deps.models, task, { kind: "rejection", what, text: reason })
        : rememberRejection(deps.models, task, what)
    ).catch(() => undefined);
  } else if (decision === "approve") {
    await moveTo(deps, taskId, "IMPLEMENTING", "running");
    await deps.events.append(taskId, { event_type: "log", message: `Plan approved by ${who}.` });
    await deps.enqueueStage(taskId, "implement", task.round ?? 0);
  } else {
    await moveTo(deps, taskId, "REVIEWING", "running");
    await deps.events.append(taskId, { event_type: "log", message: `Diff approved by ${who}.` });
    await deps.enqueueStage(taskId, "publish", task.round ?? 0);
  }
  return getTask(deps.models, accountId, taskId);
}

/** A rejection becomes repository memory, so later plans know what was not wanted. */
async function rememberRejection(
  models: Models,
  task: TaskRecord,
  what: "plan" | "diff",
): Promise<void> {
  const asked = task.description.trim().split("\n")[0]!.slice(0, 200);
  const proposal = (what === "plan" ? task.plan_summary : task.implement_summary) ?? "";
  const text = `A ${what} was rejected for the task "${asked}"${proposal ? `. It proposed: ${proposal.slice(0, 400)}` : ""}`;
  await remember(models, memoryScopeOf(task), task._id, [{ kind: "rejection", text }]);
}

/** Stops a task at any non-terminal point (docs/api.md, "POST /tasks/{id}/cancel (extension)"). */
export async function cancelTask(
  deps: TaskDeps,
  accountId: string,
  taskId: string,
  who: string,
): Promise<TaskRecord> {
  const task = await getTask(deps.models, accountId, taskId);
  if (isTerminal(task.status))
    throw errors.invalidState(`The task has already ended (status ${task.status}).`);
  const ended = await endTask(deps, taskId, {
    status: "cancelled",
    error: `Cancelled by ${who} during ${task.phase}.`,
  });
  if (!ended) throw errors.invalidState("The task ended before it could be cancelled.");
  return getTask(deps.models, accountId, taskId);
}

/**
 * Moves a running task to a phase and emits the phase event. A task that has ended stays
 * as it ended: the check after the write repairs a write that raced the ending.
 */
export async function moveTo(
  deps: TaskDeps,
  taskId: string,
  phase: TaskPhase,
  status: TaskStatus,
  extra: TaskUpdate = {},
  /** The caller looked up `hasEnded` itself just before: skip the first lookup. */
  options: { endChecked?: boolean } = {},
): Promise<boolean> {
  if (!options.endChecked && (await hasEnded(deps.models, taskId))) return false;
  const now = new Date();
  // `event_seq` is where readers in other processes start looking for the task's last event
  // (TaskEventLog.lastSeq walks up from it): the last one this process stored, carried by
  // this write rather than a write of its own after the phase event (one hint behind).
  const seen = deps.events.storedTop(taskId);
  await updateTask(deps.models, taskId, {
    phase,
    status,
    updated_at: now,
    ...(seen === undefined ? {} : { event_seq: seen }),
    ...extra,
  });
  if (await hasEnded(deps.models, taskId)) {
    await repairEnding(deps, taskId);
    return false;
  }
  const event = await deps.events.append(taskId, { event_type: "phase", phase, status });
  deps.reportProgress(taskId, event.seq);
  return true;
}
