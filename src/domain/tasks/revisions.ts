import {
  type InstructionRecord,
  type Models,
  type PlanStep,
  type RevisionRecord,
  type TaskPhase,
  type TaskRecord,
} from "../../db/models.js";
import { errors } from "../../errors.js";
import { sanitizeUntrusted } from "../../text/sanitize.js";
import { redactText } from "../../util/redact.js";
import { claimMarker, dropMarkers, markerExists, markerKind } from "../../durable/markers.js";
import { taskEndMarker } from "./endings.js";
import { gateMarker } from "./gates.js";
import { stageDoneMarker } from "./model.js";
import { rememberFeedback } from "../agents/memory.js";
import { getWorkspace } from "../workspaces/workspaces.js";
import { createTask, type CreateTaskInput } from "./create.js";
import { getTask, pushRevision, setRevisionResult, updateTask } from "./store.js";
import { moveTo } from "./gates.js";
import { type StageName, type TaskDeps } from "./model.js";

/** A failed task's retry, once per round it failed in. */
export const taskRetryMarker = markerKind(
  "task-retry",
  "task-retry",
  (taskId: string, round: number) => [taskId, round],
);

/*
 * Working with people (docs/api.md, "Revisions, follow-ups and retries"): feedback
 * at a gate (reviseTask), a failed task restarted where it failed (retryTask), and a new task
 * on a finished task's branch (followUpTask). Every door (REST, GitHub, chat, trackers) calls
 * these functions.
 *
 * A revision, a retry and a self-review round each start a new pipeline *round* (`round` on
 * the task): its stages run under stage markers, leases and jobs of their own (stageKey), so
 * a stage that finished in an earlier round runs again, and its gate is decided anew.
 */

/** Longest feedback (and reason) quoted in a log event. */
const LOGGED_FEEDBACK_CHARS = 300;

/**
 * The name a stage's markers, leases and jobs carry in a round: the stage's own name in the
 * first round (as stored before rounds existed), `<stage>@<round>` after.
 */
export function stageKey(stage: StageName, round: number | null | undefined): string {
  return round ? `${stage}@${round}` : stage;
}

/** Person-written text as it is stored and shown to a model: visible text only, redacted. */
function cleanFeedback(text: string): string {
  return redactText(sanitizeUntrusted(text));
}

function quoted(text: string): string {
  const line = text.replace(/\s+/g, " ").trim();
  return line.length <= LOGGED_FEEDBACK_CHARS
    ? `"${line}"`
    : `"${line.slice(0, LOGGED_FEEDBACK_CHARS - 1)}…"`;
}

/**
 * Sends a task waiting at a gate back for another round with a person's feedback: at the
 * plan gate PLANNING runs again, at the diff gate a round of changes on the current diff.
 */
export async function reviseTask(
  deps: TaskDeps,
  accountId: string,
  taskId: string,
  input: { feedback: string; by: string },
): Promise<TaskRecord> {
  const task = await getTask(deps.models, accountId, taskId);
  const gate =
    task.status === "awaiting_approval"
      ? "plan"
      : task.status === "awaiting_diff_approval"
        ? "diff"
        : null;
  if (!gate)
    throw errors.invalidState(
      `Only a plan or a diff awaiting approval can be revised (status ${task.status}, phase ${task.phase}).`,
    );
  const used = task.revisions?.length ?? 0;
  const max = deps.maxRevisions;
  if (used >= max)
    throw errors.invalidState(
      `The task has had ${used} revision${used === 1 ? "" : "s"}, the most MAX_REVISIONS allows (${max}); approve or reject it.`,
    );
  const feedback = cleanFeedback(input.feedback);
  if (!feedback)
    throw errors.validation([{ path: "feedback", message: "The feedback has no visible text." }]);
  const round = task.round ?? 0;
  const now = new Date();
  // The gate's decision marker of this round: a revision racing an approval, a rejection or
  // another revision is one of them, the others get 409.
  const decided = await claimMarker(deps.models, gateMarker(taskId, gate, round), {
    expires_at: null,
    created_at: now,
    updated_at: now,
  });
  if (!decided) throw errors.invalidState(`The ${gate} of this task has already been decided.`);
  const next = round + 1;
  const revision: RevisionRecord = { gate, feedback, by: input.by, at: now, round: next };
  const instruction: InstructionRecord = {
    round: next,
    kind: "feedback",
    text: feedback,
    by: input.by,
  };
  await pushRevision(deps.models, taskId, revision, {
    round: next,
    instruction,
    fix_attempts: 0,
    updated_at: now,
  });
  await deps.events.append(taskId, {
    event_type: "log",
    message: `Revision ${used + 1} of ${max} of the ${gate}, asked by ${input.by}: ${quoted(feedback)}`,
  });
  const phase: TaskPhase = gate === "plan" ? "PLANNING" : "FIXING";
  if (await moveTo(deps, taskId, phase, "running"))
    await deps.enqueueStage(taskId, gate === "plan" ? "plan" : "rework", next);
  await rememberFeedback(deps.models, task, { kind: "feedback", what: gate, text: feedback }).catch(
    () => undefined,
  );
  return getTask(deps.models, accountId, taskId);
}

/**
 * Stores what the rounds after the last revision produced at its gate (the plan or the diff)
 * on that revision. Called by PLANNING and REVIEWING when they reach the gate again.
 */
export async function recordRevisionResult(
  models: Models,
  task: Pick<TaskRecord, "_id" | "revisions">,
  result: { plan: PlanStep[] } | { diff: string },
): Promise<void> {
  const revisions = task.revisions ?? [];
  const index = revisions.length - 1;
  const gate = "plan" in result ? "plan" : "diff";
  if (index < 0 || revisions[index]!.gate !== gate) return;
  await setRevisionResult(models, task._id, index, result);
}

/** Where a failed task stopped: the stage to run again, from its phase events and markers. */
async function failedStage(deps: TaskDeps, task: TaskRecord): Promise<StageName | null> {
  let phase: TaskPhase | undefined;
  for (let after = 0; ;) {
    const batch = await deps.events.readNext(task._id, after);
    if (batch.length === 0) break;
    for (const event of batch)
      if (event.event_type === "phase" && event.phase !== "FAILED" && event.phase !== "DONE")
        phase = event.phase;
    after = batch.at(-1)!.seq;
  }
  const round = task.round ?? 0;
  const finished = (stage: StageName) =>
    markerExists(deps.models, stageDoneMarker(task._id, stageKey(stage, round)));
  switch (phase) {
    case "CLONING":
      return "clone";
    case "INDEXING":
      return "index";
    case "PLANNING":
      return "plan";
    case "IMPLEMENTING":
      return "implement";
    case "VERIFYING":
      return "verify";
    case "FIXING":
      // A revision's round of changes, or a fix round of VERIFYING.
      return task.instruction?.round === round &&
        task.instruction.kind !== "retry" &&
        !(await finished("rework"))
        ? "rework"
        : "verify";
    case "REVIEWING":
      return (await markerExists(deps.models, gateMarker(task._id, "diff", round)))
        ? "publish"
        : "review";
    case "CLEANUP":
      return "cleanup";
    default:
      return null;
  }
}

const STAGE_PHASES: Record<StageName, TaskPhase> = {
  clone: "CLONING",
  index: "INDEXING",
  plan: "PLANNING",
  implement: "IMPLEMENTING",
  rework: "FIXING",
  verify: "VERIFYING",
  review: "REVIEWING",
  publish: "REVIEWING",
  cleanup: "CLEANUP",
};

/**
 * Restarts a failed task at the stage that failed, keeping its approved plan and its work
 * (the working copy, or its stored diff on the same base commit). Part of its task: no quota.
 */
export async function retryTask(
  deps: TaskDeps,
  accountId: string,
  taskId: string,
  input: { feedback?: string | undefined; by: string },
): Promise<TaskRecord> {
  const task = await getTask(deps.models, accountId, taskId);
  if (task.status !== "failed")
    throw errors.invalidState(
      `Only a failed task can be retried (status ${task.status}, phase ${task.phase}).`,
    );
  // A deleted workspace (DELETE /workspaces/{id}) runs nothing again: 404.
  await getWorkspace(deps.models, accountId, task.workspace_id);
  const stage = await failedStage(deps, task);
  if (!stage)
    throw errors.invalidState(
      "The task failed before its work started (e.g. a task it depends on failed); create it again instead.",
    );
  const feedback = input.feedback ? cleanFeedback(input.feedback) : "";
  const round = task.round ?? 0;
  if (!(await claimMarker(deps.models, taskRetryMarker(taskId, round))))
    throw errors.invalidState("The task is being retried already.");
  const next = round + 1;
  // The round's instruction goes on (a revision's feedback the failed round worked on), with
  // the retry's feedback added.
  const earlier = task.instruction?.round === round ? task.instruction : null;
  let instruction: InstructionRecord | null = earlier ? { ...earlier, round: next } : null;
  if (feedback)
    instruction = {
      round: next,
      kind: earlier?.kind ?? "retry",
      text: earlier ? `${earlier.text}\n\nWhen retrying: ${feedback}` : feedback,
      by: input.by,
    };
  const now = new Date();
  await updateTask(deps.models, taskId, {
    round: next,
    instruction,
    error: null,
    finished_at: null,
    updated_at: now,
    ...(stage === "verify" || stage === "rework" ? { fix_attempts: 0 } : {}),
  });
  // The ending is undone: the task runs again and will end again.
  await dropMarkers(deps.models, [taskEndMarker(taskId)]);
  deps.events.forget(taskId);
  await deps.events.append(taskId, {
    event_type: "log",
    message: `Retry asked by ${input.by}: restarting at ${STAGE_PHASES[stage]}${feedback ? ` with the feedback ${quoted(feedback)}` : ""}.`,
  });
  if (await moveTo(deps, taskId, STAGE_PHASES[stage], "running"))
    await deps.enqueueStage(taskId, stage, next);
  return getTask(deps.models, accountId, taskId);
}

/**
 * Creates a new task that continues a finished one: it starts from the head of the
 * finished task's branch, pushes to that branch and updates its pull request. Counts once
 * against the monthly quota like any task.
 */
export async function followUpTask(
  deps: TaskDeps,
  accountId: string,
  parentId: string,
  input: {
    description: string;
    auto_approve?: boolean | undefined;
    source?: string | undefined;
    origin?: Record<string, unknown> | undefined;
    /** Where the follow-up answers, when not where its parent was asked for (a PR review). */
    thread?: NonNullable<TaskRecord["thread"]> | undefined;
  },
): Promise<TaskRecord> {
  const parent = await getTask(deps.models, accountId, parentId);
  if (parent.status !== "completed" || !parent.branch)
    throw errors.invalidState(
      `Only a task that ended DONE with a branch can be followed up (status ${parent.status}, branch ${parent.branch ?? "none"}).`,
    );
  return createTask(deps, accountId, {
    workspace_id: parent.workspace_id,
    repo_id: parent.repo_id,
    description: input.description,
    auto_approve: input.auto_approve ?? false,
    skill_name: parent.skill_name ?? null,
    source: input.source,
    origin: input.origin,
    base_branch: parent.branch,
    parent_task_id: parent._id,
    follow_up: {
      branch: parent.branch,
      pr_url: parent.pr_url ?? null,
      pr_number: parent.pr_number ?? null,
    },
    ...(input.thread ? { thread: input.thread } : parent.thread ? { thread: parent.thread } : {}),
    ...(parent.report_to ? { report_to: parent.report_to as CreateTaskInput["report_to"] } : {}),
  });
}
