import { isKept, removeWorkdir } from "../../workcopy/volume.js";
import { type Models, type TaskPhase, type TaskStatus } from "../../db/models.js";
import { isTerminalEvent } from "./events.js";
import { claimMarker, markerFields, markerKind } from "../../durable/markers.js";
import { recordTaskEnded } from "../../metrics/index.js";
import type { TaskDeps } from "./model.js";
import {
  pullRequestOpeners,
  updatePullRequestOpeners,
  updateTask,
  type TaskUpdate,
} from "./store.js";

/** A task's ending, holding the outcome: the first ending wins. */
export const taskEndMarker = markerKind("task-end", "task-end", (taskId: string) => [taskId]);

export interface Ending {
  status: Extract<TaskStatus, "completed" | "failed" | "cancelled">;
  error?: string | null;
  pr_url?: string | null;
}

/**
 * An ended task's working copy goes, unless it ended DONE and CLEANUP kept it for a follow-up
 * (pipeline/kept-workdirs.ts; the task sweep removes it when its time is up).
 */
async function removeEndedWorkdir(deps: TaskDeps, taskId: string, status: string): Promise<void> {
  const workdir = deps.workdirOf(taskId);
  if (status === "completed" && isKept(workdir)) return;
  await removeWorkdir(workdir).catch(() => undefined);
}

/**
 * Ends a task once: the first caller wins a unique marker that records the outcome, then
 * writes it and emits the FAILED/DONE phase and the `error`/`done` event. Returns false when
 * the task had already ended (the caller lost the race).
 */
export async function endTask(deps: TaskDeps, taskId: string, ending: Ending): Promise<boolean> {
  const won = await claimMarker(deps.models, taskEndMarker(taskId), {
    ending: { status: ending.status, error: ending.error ?? null, pr_url: ending.pr_url },
  });
  if (!won) return false;
  recordTaskEnded(ending.status);
  // Removed before the ending is shown: a retry asked for as soon as the `error` event is
  // seen (domain/tasks/revisions.ts) must not find this removal still to come in its working copy.
  await removeEndedWorkdir(deps, taskId, ending.status);
  await applyEnding(deps, taskId, ending);
  deps.reportProgress(taskId, "end");
  await deps.notifyThread(taskId, "end").catch(() => undefined);
  return true;
}

/**
 * Writes an ending to the task and its event log. Safe to repeat: a process that stopped
 * half-way through an ending is completed by whoever looks at the task next.
 */
async function applyEnding(deps: TaskDeps, taskId: string, ending: Ending): Promise<void> {
  const phase: TaskPhase = ending.status === "completed" ? "DONE" : "FAILED";
  const now = new Date();
  const set: TaskUpdate = {
    status: ending.status,
    phase,
    error: ending.error ?? null,
    finished_at: now,
    updated_at: now,
  };
  if (ending.pr_url !== undefined) set.pr_url = ending.pr_url;
  await updateTask(deps.models, taskId, set);
  const lastSeq = await deps.events.lastSeq(taskId);
  const [last] = await deps.events.readNext(taskId, lastSeq - 1, 1);
  if (last && isTerminalEvent(last)) return;
  if (!(last?.event_type === "phase" && last.phase === phase))
    await deps.events.append(taskId, { event_type: "phase", phase, status: ending.status });
  const final =
    ending.status === "completed"
      ? await deps.events.append(taskId, { event_type: "done", pr_url: ending.pr_url ?? null })
      : await deps.events.append(taskId, {
          event_type: "error",
          error: ending.error ?? "The task failed.",
        });
  await updateTask(deps.models, taskId, { event_seq: final.seq });
  deps.events.forget(taskId);
}

/**
 * Completes the ending of a task whose marker exists but whose document or events do not
 * show it yet (the ending process stopped, or a racing write overwrote it), and removes what
 * a stage stopped by the ending left of the working copy.
 */
export async function repairEnding(deps: TaskDeps, taskId: string): Promise<void> {
  const marker = await markerFields(deps.models, taskEndMarker(taskId));
  const ending = marker?.ending as Ending | undefined;
  if (!ending) return;
  // The stage has stopped: whatever it left in the working copy after endTask removed it
  // goes too (a volume mounted while the cancel ran would stay until the task sweep).
  await removeEndedWorkdir(deps, taskId, ending.status);
  await applyEnding(deps, taskId, {
    status: ending.status,
    error: ending.error ?? null,
    ...(ending.pr_url !== undefined && ending.pr_url !== null ? { pr_url: ending.pr_url } : {}),
  });
}

/** True once a task has ended (cancelled, failed or completed), from its unique marker. */
export async function hasEnded(models: Models, taskId: string): Promise<boolean> {
  return Boolean(await markerFields(models, taskEndMarker(taskId), ["_id"]));
}

/** How a pull request a task opened was closed (the GitHub door's pull_request.closed). */
export interface PullRequestOutcome {
  pr_url: string;
  merged: boolean;
  closed_at: Date;
  merged_at: Date | null;
}

/**
 * Records on the tasks that opened a pull request how it was closed (velocity analytics
 * count merges from it) and, for a merge, tells the places those tasks report to, so a
 * tracker issue moves to its done state only when the change is in. Answers the tasks
 * changed.
 */
export async function recordPullRequestOutcome(
  deps: TaskDeps,
  outcome: PullRequestOutcome,
): Promise<number> {
  const tasks = await pullRequestOpeners(deps.models, outcome.pr_url);
  if (tasks.length === 0) return 0;
  const changed = await updatePullRequestOpeners(deps.models, outcome.pr_url, {
    pr_state: outcome.merged ? "merged" : "closed",
    pr_closed_at: outcome.closed_at,
    pr_merged_at: outcome.merged ? (outcome.merged_at ?? outcome.closed_at) : null,
    updated_at: new Date(),
  });
  if (outcome.merged)
    for (const task of tasks)
      if (task.pr_state !== "merged") await deps.notifyThread(task._id, "merged");
  return changed;
}
