import { z } from "zod";
import { recordPullRequestOutcome } from "../domain/tasks/endings.js";
import type { JobKind } from "../queue/scheduler.js";
import { queueForDelivery } from "./delivery.js";
import type { GithubHandlerDeps, HandlerGroup } from "./deps.js";

/*
 * `pull_request.closed` on a pull request the service opened records whether it was merged
 * (velocity analytics count merges and the merge rate from it); a merge also moves the
 * tracker issues its tasks report to (domain: recordPullRequestOutcome).
 */

const outcomeJobSchema = z.strictObject({
  pr_url: z.string(),
  merged: z.boolean(),
  closed_at: z.string().nullable(),
  merged_at: z.string().nullable(),
});
type OutcomeJob = z.infer<typeof outcomeJobSchema>;
export const OUTCOME_JOB = { name: "github.pr-outcome", schema: outcomeJobSchema };

/** Branches the service pushes (pipeline/stages/publish.ts `branchName`). */
const SERVICE_BRANCH = /^foreman\//;

export const outcomeHandlers: HandlerGroup = (probot, deps) => {
  probot.on("pull_request.closed", async ({ payload }) => {
    const pr = payload.pull_request;
    if (!SERVICE_BRANCH.test(pr.head.ref)) return;
    await queueForDelivery(
      deps.scheduler,
      OUTCOME_JOB,
      {
        pr_url: pr.html_url,
        merged: Boolean(pr.merged),
        closed_at: pr.closed_at ?? null,
        merged_at: pr.merged_at ?? null,
      },
      { "data.pr_url": pr.html_url, "data.closed_at": pr.closed_at },
    );
  });
};

/** Records the outcome on the task that opened the pull request. */
export function outcomeJob(deps: GithubHandlerDeps): JobKind<OutcomeJob> {
  return {
    ...OUTCOME_JOB,
    async run(job) {
      const closedAt = job.closed_at ? new Date(job.closed_at) : new Date();
      const changed = await recordPullRequestOutcome(deps.tasks, {
        pr_url: job.pr_url,
        merged: job.merged,
        closed_at: closedAt,
        merged_at: job.merged_at ? new Date(job.merged_at) : null,
      });
      deps.logger.info(
        { pr: job.pr_url, merged: job.merged, tasks: changed },
        "pull request outcome recorded",
      );
    },
  };
}
