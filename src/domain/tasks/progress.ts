import { randomUUID } from "node:crypto";
import { type Models, type OnceRecord, type TaskRecord } from "../../db/models.js";
import { taskById, taskRepoKind } from "./store.js";
import {
  claimMarker,
  dropMarker,
  markerFields,
  markerKind,
  setMarkerFields,
  upsertMarker,
} from "../../durable/markers.js";

/** A task's progress check run, created once; it holds the run's id. */
export const githubProgressMarker = markerKind(
  "gh-progress",
  "github-progress",
  (taskId: string) => [taskId],
);

/** The report lock of a task's progress check run, held while a job talks to GitHub. */
export const githubProgressLockMarker = markerKind(
  "gh-progress-lock",
  "github-progress-lock",
  (taskId: string) => [taskId],
);

/*
 * A task's live progress on GitHub (docs/api.md, "Progress on GitHub"): one check run per
 * task on the commit it started from, brought up to the task's current phase by a job
 * (github/progress.ts) after every phase change. What is stored for it, and where:
 *
 * - the once-marker `gh-progress:<task>` decides which run creates the check run (one per
 *   task, also across processes and restarts) and keeps the run's id and commit, the state
 *   last reported (`<status>:<phase>`) and why reporting stopped, if GitHub refused it;
 * - the once-marker `gh-progress-lock:<task>` is the report lock: one job at a time talks to
 *   GitHub about a task, so an older phase is never sent after a newer one.
 *
 * Nothing of it is written on the task: FerretDB rewrites a whole document on update, so a
 * progress write racing the pipeline's own could undo a phase change. The lock is a unique
 * insert, the one write FerretDB makes atomic (db/models.ts, storage notes).
 *
 * The job never reports what it was queued for: it reads the task's current state when it
 * runs and reports that, so a late job can never put an older phase back.
 */

/** What is kept of a task's check run (on its `gh-progress` marker). */
export interface GithubCheckRecord {
  id?: number;
  head_sha?: string;
  /** The `<status>:<phase>` last shown on the check run. */
  reported?: string;
  /** Set when GitHub refused the check run (e.g. no `checks: write`): nothing more is tried. */
  unavailable?: string;
}

function checkRecord(doc: OnceRecord | null): GithubCheckRecord | null {
  if (!doc) return null;
  const record: GithubCheckRecord = {};
  if (typeof doc.check_run_id === "number") record.id = doc.check_run_id;
  if (typeof doc.head_sha === "string") record.head_sha = doc.head_sha;
  if (typeof doc.reported === "string") record.reported = doc.reported;
  if (typeof doc.unavailable === "string") record.unavailable = doc.unavailable;
  return record;
}

/** What the progress job has stored for a task's check run, or null before anything. */
export async function checkRunRecord(
  models: Models,
  taskId: string,
): Promise<GithubCheckRecord | null> {
  return checkRecord(await markerFields(models, githubProgressMarker(taskId)));
}

/** The state a check run shows, as one comparable key. */
export function progressKey(task: Pick<TaskRecord, "status" | "phase">): string {
  return `${task.status}:${task.phase}`;
}

/** The task as the progress job needs it, or null when it has no GitHub repository. */
export async function progressTask(
  models: Models,
  taskId: string,
): Promise<(TaskRecord & { github_check: GithubCheckRecord | null }) | null> {
  const [task, check] = await Promise.all([
    taskById(models, taskId),
    checkRunRecord(models, taskId),
  ]);
  if (!task || task.repo?.kind !== "github" || task.repo.installation_id == null) return null;
  return { ...task, github_check: check };
}

/**
 * True when the task may show on a check run (one `_id` lookup): its repository is on
 * GitHub. Before work starts the task has no repository snapshot and no commit to show.
 */
export async function reportsProgress(models: Models, taskId: string): Promise<boolean> {
  return (await taskRepoKind(models, taskId)) === "github";
}

/**
 * Who creates the task's check run: `{ create: true }` for the one caller that claimed it,
 * `{ id }` once it exists, `{ pending: since }` while another caller is creating it.
 */
export async function claimCheckRun(
  models: Models,
  taskId: string,
): Promise<{ create: true } | { id: number } | { pending: Date }> {
  const marker = githubProgressMarker(taskId);
  if (await claimMarker(models, marker)) return { create: true };
  const found = await markerFields(models, marker);
  if (typeof found?.check_run_id === "number") return { id: found.check_run_id };
  return { pending: found?.created_at ?? new Date() };
}

/** Records the check run of a task and its commit, on its marker. */
export async function recordCheckRun(
  models: Models,
  taskId: string,
  id: number,
  headSha: string,
): Promise<void> {
  await setMarkerFields(models, githubProgressMarker(taskId), {
    check_run_id: id,
    head_sha: headSha,
  });
}

/** Records the state the check run shows now. */
export async function recordReported(models: Models, taskId: string, key: string): Promise<void> {
  await setMarkerFields(models, githubProgressMarker(taskId), { reported: key });
}

/** Records that GitHub refused the check run, so later phases do not try again. */
export async function recordProgressUnavailable(
  models: Models,
  taskId: string,
  reason: string,
): Promise<void> {
  const marker = githubProgressMarker(taskId);
  await upsertMarker(
    models,
    marker,
    { unavailable: reason.slice(0, 500) },
    { scope: marker.scope, created_at: new Date() },
  );
}

/**
 * Takes the task's report lock for `ms`: one job at a time talks to GitHub about a task, so
 * an older phase is never sent after a newer one. Answers the lock's token, or null while
 * another job holds it (that job reports the newest state before it lets go). A lock past
 * its time (its job died) is dropped and taken again.
 */
export async function takeProgressLock(
  models: Models,
  taskId: string,
  ms: number,
): Promise<string | null> {
  const marker = githubProgressLockMarker(taskId);
  const token = randomUUID();
  for (let attempt = 0; attempt < 2; attempt++) {
    const until = new Date(Date.now() + ms);
    if (await claimMarker(models, marker, { token, expires_at: until })) return token;
    const held = await markerFields(models, marker);
    if (!held) continue; // let go meanwhile
    if (held.expires_at && held.expires_at.getTime() > Date.now()) return null;
    await dropMarker(models, marker, { token: held.token as string });
  }
  return null;
}

/** Lets go of the report lock, if this token still holds it. */
export async function releaseProgressLock(
  models: Models,
  taskId: string,
  token: string,
): Promise<void> {
  await dropMarker(models, githubProgressLockMarker(taskId), { token });
}
