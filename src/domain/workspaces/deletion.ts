/*
 * Deleting a workspace (DELETE /workspaces/{id}; docs/api.md, "Workspaces").
 *
 * What goes and what stays, as an account that deletes a workspace expects:
 * - refused (409 `invalid_state`, naming them) while any of its tasks has not ended or any
 *   of its health scans is pending or running: a delete never cuts work off half-way; the
 *   caller cancels the tasks (POST /tasks/{id}/cancel) or waits, then deletes again;
 * - a plain-git workspace's row (its repositories) is removed; a GitHub App installation's
 *   workspace is unlinked from the account, the App stays installed on GitHub and the
 *   installation can be linked again (domain/workspaces/linking.ts, unlinkInstallation);
 * - its automations (and their cron jobs) and what the service learned of its repositories
 *   (repository memory) are removed: nothing fires into, or reads from, a workspace that is gone;
 * - kept working copies of its tasks on this process's DATA_DIR are removed; on a worker with
 *   a DATA_DIR of its own they go at the end of FOLLOW_UP_KEEP_MIN (a follow-up of a task of
 *   a deleted workspace is refused with 404 before it could take one);
 * - its ended tasks, their events and trajectories, and its finished health reports stay:
 *   they are the account's history (usage, analytics) and are read by their own ids.
 */
import path from "node:path";
import { collectionOf, type Models } from "../../db/models.js";
import { bumpMarker } from "../../durable/marker-cache.js";
import { errors } from "../../errors.js";
import type { Logger } from "../../util/logger.js";
import { keptWorkdirs, removeKept } from "../../workcopy/volume.js";
import type { CronJobs } from "../automations/automations.js";
import { unlinkInstallation } from "./linking.js";
import { endTask } from "../tasks/endings.js";
import { type TaskDeps } from "../tasks/model.js";
import { unfinishedWorkspaceTasks, workspaceTasksAmong } from "../tasks/store.js";
import { getWorkspace, WORKSPACES_MARKER, type WorkspaceRecord } from "./workspaces.js";

/** What deleting a workspace needs of the service. */
export interface WorkspaceDeletionDeps {
  readonly tasks: TaskDeps;
  readonly cron: CronJobs | undefined;
  readonly logger: Logger;
  /** Where this process's working copies live (DATA_DIR/work, pipeline/runner.ts). */
  readonly workRoot: string;
}

/** At most this many unfinished tasks or scans are named in a refusal. */
const NAMED_MAX = 5;

interface IdRow {
  _id: string;
}

/** The workspace's tasks that have not ended and its scans still to finish, by id. */
async function unfinishedWork(
  models: Models,
  accountId: string,
  workspaceId: string,
): Promise<{ tasks: string[]; scans: string[] }> {
  const scope = { account_id: accountId, workspace_id: workspaceId };
  const [tasks, scans] = await Promise.all([
    unfinishedWorkspaceTasks(models, accountId, workspaceId, NAMED_MAX + 1),
    collectionOf<IdRow>(models.HealthReport)
      .find({ ...scope, status: { $in: ["pending", "running"] } }, { projection: { _id: 1 } })
      .limit(NAMED_MAX + 1)
      .toArray(),
  ]);
  return { tasks, scans: scans.map((s) => s._id) };
}

function named(ids: string[]): string {
  const shown = ids.slice(0, NAMED_MAX).join(", ");
  return ids.length > NAMED_MAX ? `${shown} and more` : shown;
}

/** 409 `invalid_state` naming the work that has not finished, or nothing when all has. */
function refuseUnfinished(work: { tasks: string[]; scans: string[] }): void {
  const parts: string[] = [];
  if (work.tasks.length)
    parts.push(
      `tasks that have not ended (${named(work.tasks)}): cancel them (POST /tasks/{id}/cancel) or wait until they end`,
    );
  if (work.scans.length)
    parts.push(`health scans still running (${named(work.scans)}): wait until they finish`);
  if (parts.length)
    throw errors.invalidState(`The workspace has ${parts.join("; and ")}, then delete it again.`);
}

/** Removes a plain-git row or unlinks an installation's; false when someone was first. */
async function removeRow(models: Models, ws: WorkspaceRecord, accountId: string): Promise<boolean> {
  if (ws.kind === "github") return unlinkInstallation(models, ws._id, accountId);
  const result = await collectionOf<WorkspaceRecord>(models.Workspace).deleteOne({
    _id: ws._id,
    account_id: accountId,
  });
  if (result.deletedCount === 0) return false;
  await bumpMarker(models, WORKSPACES_MARKER);
  return true;
}

/**
 * Tasks created against the workspace while it was being deleted (the check above found none,
 * a creation that had already read the workspace inserted one since): they end cancelled
 * before any stage runs on a workspace that is gone.
 */
async function cancelLateTasks(deps: TaskDeps, accountId: string, workspaceId: string) {
  const late = await unfinishedWorkspaceTasks(deps.models, accountId, workspaceId);
  for (const id of late)
    await endTask(deps, id, {
      status: "cancelled",
      error: "Cancelled: its workspace was deleted while the task was being created.",
    });
}

/** The automations and repository memory of the workspace, and its cron jobs. */
async function removeDependents(deps: WorkspaceDeletionDeps, accountId: string, id: string) {
  const { models } = deps.tasks;
  const scope = { account_id: accountId, workspace_id: id };
  const automations = await collectionOf<IdRow>(models.Automation)
    .find(scope, { projection: { _id: 1 } })
    .toArray();
  await collectionOf<IdRow>(models.Automation).deleteMany(scope);
  for (const { _id } of automations) await deps.cron?.disarm(_id);
  await collectionOf<IdRow>(models.RepoMemory).deleteMany(scope);
}

/** Kept working copies of the workspace's tasks on this process's DATA_DIR. */
async function releaseKeptCopies(
  deps: WorkspaceDeletionDeps,
  accountId: string,
  workspaceId: string,
): Promise<number> {
  const kept = await keptWorkdirs(deps.workRoot);
  if (kept.length === 0) return 0;
  const byTask = new Map(kept.map((k) => [path.basename(k.workdir), k.workdir]));
  const ours = await workspaceTasksAmong(
    deps.tasks.models,
    [...byTask.keys()],
    accountId,
    workspaceId,
  );
  for (const id of ours) await removeKept(byTask.get(id)!);
  return ours.length;
}

/**
 * Deletes one workspace of the account (see the top of this file for what goes and what
 * stays). Another account's or an unknown workspace is 404 `not_found`; one with unfinished
 * work is 409 `invalid_state`.
 */
export async function deleteWorkspace(
  deps: WorkspaceDeletionDeps,
  accountId: string,
  workspaceId: string,
): Promise<void> {
  const { models } = deps.tasks;
  const ws = await getWorkspace(models, accountId, workspaceId);
  refuseUnfinished(await unfinishedWork(models, accountId, ws._id));
  if (!(await removeRow(models, ws, accountId))) throw errors.notFound("workspace");
  await cancelLateTasks(deps.tasks, accountId, ws._id);
  await removeDependents(deps, accountId, ws._id);
  const released = await releaseKeptCopies(deps, accountId, ws._id).catch((error: unknown) => {
    deps.logger.warn({ err: error, workspaceId }, "could not remove the kept working copies");
    return 0;
  });
  deps.logger.info({ accountId, workspaceId, kind: ws.kind, released }, "workspace deleted");
}
