import { type Models, type TaskStatus, type Tier } from "../../db/models.js";
import { TERMINAL_STATUSES } from "../../db/task-states.js";
import { type NewTask } from "./store.js";
import { type TaskEventLog } from "./events.js";
import { type WorkspaceRecord } from "../workspaces/workspaces.js";
import { markerKind } from "../../durable/markers.js";

/** A stage's stored outcome (pipeline/runner.ts), by task and stage key. */
export const stageDoneMarker = markerKind(
  "stage-done",
  "stage-done",
  (taskId: string, stage: string) => [taskId, stage],
);

/*
 * Tasks (docs/api.md, "Tasks"): creation, reading, the two gates and cancellation. The pipeline
 * moves a task between phases; everything that ends a task goes through `endTask`, whose unique
 * marker makes the first ending win (a cancel racing a failure, two rejects at once).
 */

/**
 * What the task operations need, built once by the service's context (src/context.ts) and
 * frozen. Every member is there: a part that is off is a real implementation (a worker-less
 * process's `kick` has no intake to wake; without GitHub progress, `reportProgress` is
 * `noProgress`).
 */
export interface TaskDeps {
  readonly models: Models;
  readonly events: TaskEventLog;
  /** Starts a pipeline stage for the task (an Agenda job), in `round` (default 0). */
  enqueueStage(taskId: string, stage: StageName, round?: number): Promise<void>;
  /** Revisions one task may take (MAX_REVISIONS; domain/tasks/revisions.ts). */
  readonly maxRevisions: number;
  /** Tells this process's workers a task was queued, so they need not wait for their poll. */
  kick(): void;
  /** Tells the workers of every process that tasks were queued (coalesced). */
  signalQueued(): void;
  /** Inserts a task document, batched with concurrent inserts (db/insert-batcher.ts). */
  insertTask(doc: NewTask): Promise<void>;
  /** Per-process caches of the rarely changing reads of task creation (see marker-cache). */
  readonly cache: {
    tier(accountId: string): Promise<Tier | null>;
    workspace(workspaceId: string): Promise<WorkspaceRecord | null>;
  };
  /** Where a task's working copy lives (removed when the task ends). */
  workdirOf(taskId: string): string;
  /**
   * Throws 503 `insufficient_storage` while DATA_DIR has less free space than
   * DATA_DIR_MIN_FREE_MB (domain/storage.ts): a task is refused rather than started to fail.
   */
  checkStorage(): Promise<void>;
  /**
   * Tells the place a task reports to (its GitHub thread, chat thread or tracker issue) that
   * the plan or the diff waits for approval, that the task ended, or that its pull request
   * was merged (recordPullRequestOutcome).
   */
  notifyThread(taskId: string, kind: ThreadNotice): Promise<void>;
  /**
   * Tells the task's GitHub check run (domain/tasks/progress.ts) that its phase changed; `at` is
   * the phase event's sequence number, or `end`. Returns at once: the report is queued in
   * the background and its failures never reach the task. `noProgress` when the GitHub App
   * is not configured or GITHUB_PROGRESS is off.
   */
  reportProgress(taskId: string, at: number | "end"): void;
}

/** The `reportProgress` of a process that reports no progress to GitHub: nothing to do. */
export function noProgress(): void {}

/** What a task tells the place it reports to. */
export type ThreadNotice = "plan" | "diff" | "end" | "merged";

export const STAGE_NAMES = [
  "clone",
  "index",
  "plan",
  "implement",
  "rework",
  "verify",
  "review",
  "publish",
  "cleanup",
] as const;

export type StageName = (typeof STAGE_NAMES)[number];

export function isTerminal(status: TaskStatus): boolean {
  return TERMINAL_STATUSES.includes(status);
}
