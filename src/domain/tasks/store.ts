import { createInsertBatcher, type BatchedInsert } from "../../db/insert-batcher.js";
import {
  collectionOf,
  type Models,
  type PlanStep,
  type RevisionRecord,
  type TaskPhase,
  type TaskRecord,
  type TaskStatus,
} from "../../db/models.js";
import { TERMINAL_STATUSES } from "../../db/task-states.js";
import { errors } from "../../errors.js";
import { afterFilter, type SortKey } from "../../util/paging.js";

/*
 * The task store: the one module that reads and writes task documents. Everything else asks
 * it by name (a task by id, the tasks of a thread, the stranded ones) and writes through the
 * typed updates below, so a field's name and type are checked where it is written.
 *
 * Storage (db/models.ts, storage notes): there are no transactions, and FerretDB applies an
 * update as read, change, write back, so a conditional update here is not atomic there. Every
 * "exactly once" decision about a task is a marker (durable/markers.ts); the conditional
 * updates below only keep a later write from being undone by an earlier one.
 */

/** The tasks collection, typed by its records (new tasks by what they hold): this module's alone. */
const tasksOf = (models: Models) => collectionOf<TaskRecord>(models.Task);
const newTasksOf = (models: Models) => collectionOf<NewTask>(models.Task);

/** A new task as inserted: the repository snapshot and the pipeline's fields come later. */
export type NewTask = Pick<
  TaskRecord,
  "_id" | "account_id" | "workspace_id" | "repo_id" | "description" | "status" | "phase"
> &
  Partial<TaskRecord>;

/** A task's own fields as written: all but its id and creation time. */
type TaskFields = Omit<TaskRecord, "_id" | "created_at">;

/** One field of the task's repository snapshot, written alone (`repo.<field>`; see repoField). */
type RepoFieldUpdate = {
  [K in keyof TaskRecord["repo"] & string as `repo.${K}`]?: TaskRecord["repo"][K];
};

/** What one update sets on a task (its `$set`): fields of TaskRecord, each with its type. */
export type TaskUpdate = { [K in keyof TaskFields]?: TaskFields[K] } & RepoFieldUpdate;

/** An update of one field of the repository snapshot, leaving the snapshot's other fields. */
export function repoField<K extends keyof TaskRecord["repo"] & string>(
  field: K,
  value: TaskRecord["repo"][K],
): TaskUpdate {
  return { [`repo.${field}`]: value } as TaskUpdate;
}

/** `task` as `update` leaves it (a new object; `task` is not changed). */
export function applyUpdate(task: TaskRecord, update: TaskUpdate): TaskRecord {
  const next: Record<string, unknown> = { ...task };
  for (const [key, value] of Object.entries(update)) {
    if (key.startsWith("repo.")) next.repo = { ...(next.repo as object), [key.slice(5)]: value };
    else next[key] = value;
  }
  return next as TaskRecord;
}

// ---- Writes ----

/** Inserts tasks one batch at a time (db/insert-batcher.ts): TaskDeps.insertTask. */
export function taskInserter(models: Models): BatchedInsert<NewTask> {
  return createInsertBatcher(newTasksOf(models));
}

/** Inserts tasks in order, stopping at the first refused (createTasks). */
export async function insertTasks(models: Models, docs: NewTask[]): Promise<void> {
  await newTasksOf(models).insertMany(docs, { ordered: true });
}

/** Removes tasks by id (a batch whose insert failed part-way). */
export async function deleteTasks(models: Models, ids: string[]): Promise<void> {
  await tasksOf(models).deleteMany({ _id: { $in: ids } });
}

/** Sets fields of one task, exactly those given. */
export async function updateTask(
  models: Models,
  taskId: string,
  update: TaskUpdate,
): Promise<void> {
  await tasksOf(models).updateOne({ _id: taskId }, { $set: update });
}

/** Adds a finished command's wall time to the task's `command_ms`. */
export async function addCommandMs(models: Models, taskId: string, ms: number): Promise<void> {
  await tasksOf(models).updateOne({ _id: taskId }, { $inc: { command_ms: ms } });
}

/** Moves the task to `round`, unless it is there or further already. */
export async function raiseRound(models: Models, taskId: string, round: number): Promise<void> {
  await tasksOf(models).updateOne(
    { _id: taskId, $or: [{ round: { $lt: round } }, { round: { $exists: false } }] },
    { $set: { round } },
  );
}

/** Adds a revision to the task's `revisions` and sets `update` with it. */
export async function pushRevision(
  models: Models,
  taskId: string,
  revision: RevisionRecord,
  update: TaskUpdate,
): Promise<void> {
  await tasksOf(models).updateOne(
    { _id: taskId },
    { $push: { revisions: revision }, $set: update },
  );
}

/** Stores what a revision's rounds produced at its gate on the revision at `index`. */
export async function setRevisionResult(
  models: Models,
  taskId: string,
  index: number,
  result: { plan: PlanStep[] } | { diff: string },
): Promise<void> {
  const gate = "plan" in result ? "plan" : "diff";
  await tasksOf(models).updateOne(
    { _id: taskId },
    { $set: { [`revisions.${index}.${gate}`]: "plan" in result ? result.plan : result.diff } },
  );
}

/** Records the chat thread a task's reports go to, unless one was recorded first. */
export async function setReportThread(
  models: Models,
  taskId: string,
  threadTs: string,
): Promise<void> {
  await tasksOf(models).updateOne(
    { _id: taskId, "report_to.ref.thread_ts": { $exists: false } },
    { $set: { "report_to.ref.thread_ts": threadTs } },
  );
}

/** The tasks that opened a pull request: their ids and what they know of its state. */
export function pullRequestOpeners(
  models: Models,
  prUrl: string,
): Promise<Array<Pick<TaskRecord, "_id" | "pr_state">>> {
  return tasksOf(models)
    .find({ pr_url: prUrl }, { projection: { _id: 1, pr_state: 1 } })
    .toArray();
}

/** Sets `update` on every task that opened the pull request; answers how many changed. */
export async function updatePullRequestOpeners(
  models: Models,
  prUrl: string,
  update: TaskUpdate,
): Promise<number> {
  const result = await tasksOf(models).updateMany({ pr_url: prUrl }, { $set: update });
  return result.modifiedCount;
}

// ---- One task ----

/** A task by id whatever its account (for notices, which know only the id), or null. */
export function taskById(models: Models, taskId: string): Promise<TaskRecord | null> {
  return tasksOf(models).findOne({ _id: taskId });
}

/** Some fields of a task by id (only those are read), or null. */
export function taskFields<K extends keyof TaskRecord>(
  models: Models,
  taskId: string,
  fields: readonly K[],
): Promise<Pick<TaskRecord, "_id" | K> | null> {
  const projection = Object.fromEntries(fields.map((field) => [field, 1]));
  return tasksOf(models).findOne({ _id: taskId }, { projection });
}

/** The kind of the task's repository (`repo.kind` alone), or undefined before work started. */
export async function taskRepoKind(
  models: Models,
  taskId: string,
): Promise<TaskRecord["repo"]["kind"] | undefined> {
  const task = await tasksOf(models).findOne({ _id: taskId }, { projection: { "repo.kind": 1 } });
  return task?.repo?.kind;
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

/** One task of the account; an unknown id or another account's task is `not_found`. */
export async function getTask(
  models: Models,
  accountId: string,
  taskId: string,
): Promise<TaskRecord> {
  const task = await tasksOf(models).findOne({ _id: taskId });
  if (!task || task.account_id !== accountId) throw errors.notFound("task");
  return task;
}

/** Where a task reports (its GitHub thread, its integration conversation) and its round, or null. */
export function taskConversations(
  models: Models,
  taskId: string,
): Promise<Pick<TaskRecord, "_id" | "thread" | "report_to" | "round"> | null> {
  return taskFields(models, taskId, ["thread", "report_to", "round"]);
}

// ---- Lists ----

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
    const cursor = await taskFields(models, filter.before, ["account_id", "created_at"]);
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

/** The newest tasks of a GitHub thread (issue or pull request) of a repository. */
export function threadTasks(
  models: Models,
  accountId: string,
  repoId: string,
  threadNumber: number,
  limit = 20,
): Promise<TaskRecord[]> {
  return tasksOf(models)
    .find({ account_id: accountId, repo_id: repoId, "thread.number": threadNumber })
    .sort({ created_at: -1 })
    .limit(limit)
    .toArray();
}

/** The id of a task of the thread that has not ended yet, or null. */
export async function openThreadTask(
  models: Models,
  accountId: string,
  repoId: string,
  threadNumber: number,
): Promise<string | null> {
  const running = await tasksOf(models).findOne(
    {
      account_id: accountId,
      repo_id: repoId,
      "thread.number": threadNumber,
      status: { $nin: ["completed", "failed", "cancelled"] },
    },
    { projection: { _id: 1 } },
  );
  return running?._id ?? null;
}

/**
 * The account's tasks of a repository's pull request, newest first: the one that opened it
 * (`pr_number`) and its follow-ups (`follow_up.pr_number`, also before they publish). Doors
 * ask which of them feedback on the pull request is for (docs/api.md, "Follow-ups on a
 * task's pull request").
 */
export function pullRequestTasks(
  models: Models,
  accountId: string,
  repoId: string,
  prNumber: number,
  limit = 20,
): Promise<TaskRecord[]> {
  return tasksOf(models)
    .find({
      account_id: accountId,
      repo_id: repoId,
      $or: [{ pr_number: prNumber }, { "follow_up.pr_number": prNumber }],
    })
    .sort({ created_at: -1 })
    .limit(limit)
    .toArray();
}

/** The newest tasks an integration started (its conversations), newest first. */
export function integrationTasks(
  models: Models,
  accountId: string,
  integrationId: string,
  limit: number,
): Promise<TaskRecord[]> {
  return tasksOf(models)
    .find({ account_id: accountId, "report_to.integration_id": integrationId })
    .sort({ created_at: -1 })
    .limit(limit)
    .toArray();
}

/** The newest task an integration started from one tracker issue, or null. */
export function trackerIssueTask(
  models: Models,
  accountId: string,
  integrationId: string,
  issueId: string,
): Promise<TaskRecord | null> {
  return tasksOf(models).findOne(
    {
      account_id: accountId,
      "report_to.integration_id": integrationId,
      "report_to.ref.issue_id": issueId,
    },
    { sort: { created_at: -1 } },
  );
}

/** The newest tasks of an integration whose `report_to.ref` has every field of `ref`. */
export function conversationTasks(
  models: Models,
  accountId: string,
  integrationId: string,
  ref: Record<string, string>,
  limit: number,
): Promise<TaskRecord[]> {
  const query: Record<string, string> = {
    account_id: accountId,
    "report_to.integration_id": integrationId,
  };
  for (const [field, value] of Object.entries(ref)) query[`report_to.ref.${field}`] = value;
  return tasksOf(models).find(query).sort({ created_at: -1 }).limit(limit).toArray();
}

// ---- The pipeline's scans ----

/** The oldest queued tasks (at most `limit`) with what they wait for. */
export function queuedTasks(
  models: Models,
  limit: number,
): Promise<Array<Pick<TaskRecord, "_id" | "depends_on">>> {
  return tasksOf(models)
    .find({ status: "queued" }, { projection: { _id: 1, depends_on: 1 } })
    .sort({ created_at: 1 })
    .limit(limit)
    .toArray();
}

/** The status and error of each of these tasks that exists. */
export function taskOutcomes(
  models: Models,
  ids: string[],
): Promise<Array<Pick<TaskRecord, "_id" | "status" | "error">>> {
  return tasksOf(models)
    .find({ _id: { $in: ids } }, { projection: { status: 1, error: 1 } })
    .toArray();
}

/** True when one of these tasks has ended. */
export async function anyTaskEnded(models: Models, ids: string[]): Promise<boolean> {
  const ended = await tasksOf(models).findOne(
    { _id: { $in: ids }, status: { $in: [...TERMINAL_STATUSES] } },
    { projection: { _id: 1 } },
  );
  return ended !== null;
}

/** Those of these tasks that have not ended. */
export async function unfinishedTasksAmong(models: Models, ids: string[]): Promise<string[]> {
  const rows = await tasksOf(models)
    .find(
      { _id: { $in: ids }, status: { $nin: ["completed", "failed", "cancelled"] } },
      { projection: { _id: 1 } },
    )
    .toArray();
  return rows.map((task) => String(task._id));
}

/** Those of these tasks that have ended and were not written since `before` (not retried). */
export async function endedTasksAmong(
  models: Models,
  ids: string[],
  before: Date,
): Promise<string[]> {
  const rows = await tasksOf(models)
    .find(
      {
        _id: { $in: ids },
        status: { $in: ["completed", "failed", "cancelled"] },
        updated_at: { $lt: before },
      },
      { projection: { _id: 1 } },
    )
    .toArray();
  return rows.map((task) => task._id);
}

/** Running and queued tasks not written since `before`, least recently written first. */
export function untouchedOpenTasks(
  models: Models,
  before: Date,
  limit: number,
): Promise<Array<Pick<TaskRecord, "_id" | "status" | "phase" | "round" | "instruction">>> {
  return tasksOf(models)
    .find(
      { status: { $in: ["running", "queued"] }, updated_at: { $lt: before } },
      { projection: { _id: 1, status: 1, phase: 1, round: 1, instruction: 1 } },
    )
    .sort({ updated_at: 1 })
    .limit(limit)
    .toArray();
}

// ---- Accounts and workspaces ----

/** How many of the account's tasks of `month` hold no quota slot (unlimited tiers). */
export function unslottedTaskCount(
  models: Models,
  accountId: string,
  month: string,
): Promise<number> {
  return tasksOf(models).countDocuments({
    account_id: accountId,
    "quota.month": month,
    "quota.slot": null,
  });
}

/** The ids of the workspace's tasks that have not ended (at most `limit` when given). */
export async function unfinishedWorkspaceTasks(
  models: Models,
  accountId: string,
  workspaceId: string,
  limit?: number,
): Promise<string[]> {
  const cursor = tasksOf(models).find(
    { account_id: accountId, workspace_id: workspaceId, status: { $nin: [...TERMINAL_STATUSES] } },
    { projection: { _id: 1 } },
  );
  const rows = await (limit === undefined ? cursor : cursor.limit(limit)).toArray();
  return rows.map((task) => task._id);
}

/** Those of these tasks that belong to the account's workspace. */
export async function workspaceTasksAmong(
  models: Models,
  ids: string[],
  accountId: string,
  workspaceId: string,
): Promise<string[]> {
  const rows = await tasksOf(models)
    .find(
      { _id: { $in: ids }, account_id: accountId, workspace_id: workspaceId },
      { projection: { _id: 1 } },
    )
    .toArray();
  return rows.map((task) => task._id);
}

/** What analytics reads of a task (loadTaskFigures). */
export type TaskFigureFields = Pick<
  TaskRecord,
  "status" | "created_at" | "finished_at" | "pr_url" | "pr_state" | "agent_name"
> & { cost?: Partial<TaskRecord["cost"]> };

/** The account's tasks created from `from` to `to`, with only the fields analytics needs. */
export function taskFiguresBetween(
  models: Models,
  accountId: string,
  from: Date,
  to: Date,
): Promise<TaskFigureFields[]> {
  return tasksOf(models)
    .find(
      { account_id: accountId, created_at: { $gte: from, $lte: to } },
      {
        projection: {
          _id: 0,
          status: 1,
          created_at: 1,
          finished_at: 1,
          pr_url: 1,
          pr_state: 1,
          "cost.usd": 1,
          "cost.input_tokens": 1,
          "cost.output_tokens": 1,
          "cost.cached_input_tokens": 1,
          "cost.cache_write_tokens": 1,
          agent_name: 1,
        },
      },
    )
    .toArray();
}
