import { type Models, type TaskRecord } from "../../db/models.js";
import { tasksOf } from "./model.js";

/** Where a task reports (its GitHub thread, its integration conversation) and its round, or null. */
export function taskConversations(
  models: Models,
  taskId: string,
): Promise<Pick<TaskRecord, "_id" | "thread" | "report_to" | "round"> | null> {
  return tasksOf(models).findOne(
    { _id: taskId },
    { projection: { thread: 1, report_to: 1, round: 1 } },
  );
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
