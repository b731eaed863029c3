import { randomUUID } from "node:crypto";
import { collectionOf, type Models, type OnceRecord, type TaskRecord } from "../db/models.js";
import { claimMarker, markers } from "./markers.js";

/*
 * A task's live progress on GitHub (docs/api.md, "Progress on GitHub"): one check run per
 * task on the commit it started from, brought up to the task's current phase by a job
 * (github/progress.ts) after every phase change. What is stored for it, and where:
 *
 * - the once-marker `gh-progress:<task>` decides which run creates the check run (one per
 *   task, also across processes and restarts) and holds its id once it exists;
 * - the task's `github_check` holds the check run id, its commit, the state last reported
 *   (`<status>:<phase>`) and why reporting stopped, if it did (GitHub refused it).
 *
 * The job never reports what it was queued for: it reads the task's current state when it
 * runs and reports that, so a late job can never put an older phase back.
 */

const tasksOf = (models: Models) => collectionOf<TaskRecord>(models.Task);
const markersOf = (models: Models) => collectionOf<OnceRecord>(models.Once);

/** What the task document keeps of its check run. */
export interface GithubCheckRecord {
  id?: number;
  head_sha?: string;
  /** The `<status>:<phase>` last shown on the check run. */
  reported?: string;
  /** Set when GitHub refused the check run (e.g. no `checks: write`): nothing more is tried. */
  unavailable?: string;
  /** The report lock: one job at a time talks to GitHub about the task. */
  lock?: string | null;
  lock_until?: Date | null;
}

/** The state a check run shows, as one comparable key. */
export function progressKey(task: Pick<TaskRecord, "status" | "phase">): string {
  return `${task.status}:${task.phase}`;
}

/** The task as the progress job needs it, or null when it has no GitHub repository. */
export async function progressTask(
  models: Models,
  taskId: string,
): Promise<(TaskRecord & { github_check?: GithubCheckRecord | null }) | null> {
  const task = (await tasksOf(models).findOne({ _id: taskId })) as
    (TaskRecord & { github_check?: GithubCheckRecord | null }) | null;
  if (!task || task.repo?.kind !== "github" || task.repo.installation_id == null) return null;
  return task;
}

/**
 * True when the task may show on a check run (one `_id` lookup): its repository is on
 * GitHub. Before work starts the task has no repository snapshot and no commit to show.
 */
export async function reportsProgress(models: Models, taskId: string): Promise<boolean> {
  const task = await tasksOf(models).findOne({ _id: taskId }, { projection: { "repo.kind": 1 } });
  return task?.repo?.kind === "github";
}

/**
 * Who creates the task's check run: `{ create: true }` for the one caller that claimed it,
 * `{ id }` once it exists, `{ pending: since }` while another caller is creating it.
 */
export async function claimCheckRun(
  models: Models,
  taskId: string,
): Promise<{ create: true } | { id: number } | { pending: Date }> {
  const marker = markers.githubProgress(taskId);
  if (await claimMarker(models, marker)) return { create: true };
  const found = await markersOf(models).findOne({ _id: marker.id });
  if (typeof found?.check_run_id === "number") return { id: found.check_run_id };
  return { pending: found?.created_at ?? new Date() };
}

/** Records the check run of a task: on its marker (the creation's result) and on the task. */
export async function recordCheckRun(
  models: Models,
  taskId: string,
  id: number,
  headSha: string,
): Promise<void> {
  await markersOf(models).updateOne(
    { _id: markers.githubProgress(taskId).id },
    { $set: { check_run_id: id } },
  );
  await tasksOf(models).updateOne(
    { _id: taskId },
    { $set: { "github_check.id": id, "github_check.head_sha": headSha } },
  );
}

/** Records the state the check run shows now. */
export async function recordReported(models: Models, taskId: string, key: string): Promise<void> {
  await tasksOf(models).updateOne({ _id: taskId }, { $set: { "github_check.reported": key } });
}

/** Records that GitHub refused the check run, so later phases do not try again. */
export async function recordProgressUnavailable(
  models: Models,
  taskId: string,
  reason: string,
): Promise<void> {
  await tasksOf(models).updateOne(
    { _id: taskId },
    { $set: { "github_check.unavailable": reason.slice(0, 500) } },
  );
}

/**
 * Takes the task's report lock for `ms`: one job at a time talks to GitHub about a task, so
 * an older phase is never sent after a newer one. Answers the lock's token, or null while
 * another job holds it (that job reports the newest state before it lets go).
 */
export async function takeProgressLock(
  models: Models,
  taskId: string,
  ms: number,
): Promise<string | null> {
  const now = new Date();
  const token = randomUUID();
  const taken = await tasksOf(models).updateOne(
    {
      _id: taskId,
      $or: [
        { "github_check.lock_until": { $exists: false } },
        { "github_check.lock_until": null },
        { "github_check.lock_until": { $lt: now } },
      ],
    },
    {
      $set: {
        "github_check.lock": token,
        "github_check.lock_until": new Date(now.getTime() + ms),
      },
    },
  );
  return taken.modifiedCount === 1 ? token : null;
}

/** Lets go of the report lock, if this token still holds it. */
export async function releaseProgressLock(
  models: Models,
  taskId: string,
  token: string,
): Promise<void> {
  await tasksOf(models).updateOne(
    { _id: taskId, "github_check.lock": token },
    { $set: { "github_check.lock": null, "github_check.lock_until": null } },
  );
}
