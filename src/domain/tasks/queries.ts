import { afterFilter, type SortKey } from "../../util/paging.js";
import { type Models, type TaskPhase, type TaskRecord, type TaskStatus } from "../../db/models.js";
import { errors } from "../../errors.js";
import { tasksOf } from "./model.js";

/** One task of the account; an unknown id or another account's task is `not_found`. */
/** A task by id whatever its account (for notices, which know only the id), or null. */
export function taskById(models: Models, taskId: string): Promise<TaskRecord | null> {
  return tasksOf(models).findOne({ _id: taskId });
}

/** One task of the account, or null for an unknown id or another account's task. */
export async function findTask(
  models: Models,
  accountId: string,
  taskId: string,
): Promise<TaskRecord | null> {
  const task = await tasksOf(models).findOne({ _id: taskId });
  return task && task.account_id === accountId ? task : null;
}

export async function getTask(
  models: Models,
  accountId: string,
  taskId: string,
): Promise<TaskRecord> {
  const task = await tasksOf(models).findOne({ _id: taskId });
  if (!task || task.account_id !== accountId) throw errors.notFound("task");
  return task;
}

export interface TaskFilter {
  limit: number;
  before?: string | undefined;
  /** A cursor key `[created_at, id]` (util/paging.ts): the page continues after it. */
  after?: SortKey | undefined;
  workspace_id?: string | undefined;
  repo_id?: string | undefined;
  status?: TaskStatus | undefined;
  phase?: TaskPhase | undefined;
}

/** The account's tasks, newest first, paged with `before` (a task id). */
export async function listTasks(
  models: Models,
  accountId: string,
  filter: TaskFilter,
): Promise<TaskRecord[]> {
  const query: Record<string, unknown> = { account_id: accountId };
  if (filter.workspace_id) query.workspace_id = filter.workspace_id;
  if (filter.repo_id) query.repo_id = filter.repo_id;
  if (filter.status) query.status = filter.status;
  if (filter.phase) query.phase = filter.phase;
  if (filter.after) {
    Object.assign(query, afterFilter(filter.after));
  } else if (filter.before) {
    const cursor = await tasksOf(models).findOne(
      { _id: filter.before },
      { projection: { account_id: 1, created_at: 1 } },
    );
    if (!cursor || cursor.account_id !== accountId)
      throw errors.validation([{ path: "before", message: "No such task on this account." }]);
    query.$or = [
      { created_at: { $lt: cursor.created_at } },
      { created_at: cursor.created_at, _id: { $lt: filter.before } },
    ];
  }
  const docs = await tasksOf(models)
    .find(query)
    .sort({ created_at: -1, _id: -1 })
    .limit(filter.limit)
    .toArray();
  return docs;
}
