import { collectionOf, type Models, type TaskRecord } from "../db/models.js";
import type { TaskDeps } from "./tasks.js";

/*
 * The tasks of one pull request a task opened: the task that opened it and the follow-ups
 * that push to its branch (docs/github.md, "Follow-ups on a task's pull request"). Doors ask
 * which of them feedback on the pull request is for.
 */

const tasksOf = (models: Models) => collectionOf<TaskRecord>(models.Task);

/**
 * The account's tasks of a repository's pull request, newest first: the one that opened it
 * (`pr_number`) and its follow-ups (`follow_up.pr_number`, also before they publish).
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

/**
 * Points a task's notices (plan, diff, ending) at a GitHub thread: a follow-up asked for on
 * a pull request answers there, not where its parent was asked for.
 */
export async function setTaskThread(
  deps: Pick<TaskDeps, "models">,
  taskId: string,
  thread: {
    installation_id: number;
    repo_full_name: string;
    number: number;
    is_pull_request: boolean;
  },
): Promise<void> {
  await tasksOf(deps.models).updateOne({ _id: taskId }, { $set: { thread } });
}
