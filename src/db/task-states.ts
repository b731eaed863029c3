/** A task's `status` values (docs/api.md "Tasks"), in the order a task moves through them. */
export const TASK_STATUSES = [
  "queued",
  "running",
  "awaiting_approval",
  "awaiting_diff_approval",
  "completed",
  "failed",
  "cancelled",
] as const;
export type TaskStatus = (typeof TASK_STATUSES)[number];

/** The statuses of a task that has ended. */
export const TERMINAL_STATUSES: readonly TaskStatus[] = ["completed", "failed", "cancelled"];

export const TASK_PHASES = [
  "QUEUED",
  "CLONING",
  "INDEXING",
  "PLANNING",
  "AWAITING_APPROVAL",
  "IMPLEMENTING",
  "VERIFYING",
  "FIXING",
  "REVIEWING",
  "CLEANUP",
  "DONE",
  "FAILED",
] as const;
export type TaskPhase = (typeof TASK_PHASES)[number];
