import { collectionOf, type Models, type TaskRecord } from "../../db/models.js";

/*
 * The tasks of one pull request a task opened: the task that opened it and the follow-ups
 * that push to its branch (docs/api.md, "Follow-ups on a task's pull request"). Doors ask
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
