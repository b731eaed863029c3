import { z } from "zod";
import { claimMarker, dropMarkers, markerKind } from "../durable/markers.js";
import { autoReviewPullRequest } from "../domain/pull-requests/help.js";
import { isAppError } from "../errors.js";
import type { JobKind } from "../queue/scheduler.js";
import { queueForDelivery } from "./delivery.js";
import type { GithubHandlerDeps, HandlerGroup } from "./deps.js";
import { readRepoConfig } from "./repo-config.js";
import { usableWorkspace, workspaceOfInstallation } from "./threads.js";

/** The automatic review of one head commit of a pull request. */
export const githubAutoReviewMarker = markerKind(
  "gh-auto-review",
  "github-auto-review",
  (repoId: string, number: number, headSha: string) => [repoId, number, headSha],
);

/*
 * Automatic review (docs/api.md, "Automatic review"): `pull_request.opened` and
 * `pull_request.ready_for_review` of a pull request that is not a draft and not the App's
 * own get the review of `POST /tasks/review/`, posted, when the repository's config file on
 * its default branch says `review: auto`. One review per head commit, however many events
 * and deliveries name it.
 */

/** Branches the service pushes (pipeline/stages/publish.ts `branchName`). */
const SERVICE_BRANCH = /^foreman\//;

const autoReviewJobSchema = z.strictObject({
  installation_id: z.number().int(),
  repo_id: z.string(),
  repo_full_name: z.string(),
  default_branch: z.string(),
  number: z.number().int(),
  head_sha: z.string(),
});
type AutoReviewJob = z.infer<typeof autoReviewJobSchema>;
export const AUTO_REVIEW_JOB = { name: "github.auto-review", schema: autoReviewJobSchema };

const reviewSetting = z.enum(["auto", "off"]);

export const autoReviewHandlers: HandlerGroup = (probot, deps) => {
  probot.on(["pull_request.opened", "pull_request.ready_for_review"], async ({ payload }) => {
    const pr = payload.pull_request;
    if (!payload.installation || pr.draft || pr.state !== "open") return;
    // The App's own pull requests: its pushed branches, or opened by its bot user.
    const appBot = deps.github.slug ? `${deps.github.slug}[bot]` : undefined;
    if (SERVICE_BRANCH.test(pr.head.ref) || (appBot && pr.user?.login === appBot)) return;
    const repoId = String(payload.repository.id);
    await queueForDelivery(
      deps.scheduler,
      AUTO_REVIEW_JOB,
      {
        installation_id: payload.installation.id,
        repo_id: repoId,
        repo_full_name: payload.repository.full_name,
        default_branch: payload.repository.default_branch,
        number: pr.number,
        head_sha: pr.head.sha,
      },
      { "data.repo_id": repoId, "data.number": pr.number, "data.head_sha": pr.head.sha },
    );
  });
};

/** Reads the repository's `review:` setting and reviews when it is `auto`. */
export function autoReviewJob(deps: GithubHandlerDeps): JobKind<AutoReviewJob> {
  const logger = deps.logger.child({ component: "github-auto-review" });
  return {
    ...AUTO_REVIEW_JOB,
    async run(job) {
      const log = logger.child({ repo: job.repo_full_name, number: job.number });
      const workspace = await workspaceOfInstallation(deps.models, job.installation_id);
      if (!usableWorkspace(workspace)) return;
      if (!workspace.repos.some((r) => r.repo_id === job.repo_id)) return;
      const octokit = await deps.client.octokit(job.installation_id);
      const config = await readRepoConfig(
        octokit,
        job.repo_full_name,
        job.default_branch,
        deps.github.slug,
      );
      const setting = reviewSetting.safeParse(config?.review);
      if (!setting.success || setting.data !== "auto") return;
      const marker = githubAutoReviewMarker(job.repo_id, job.number, job.head_sha);
      if (!(await claimMarker(deps.models, marker))) return;
      const webUrl = deps.client.webUrl.replace(/\/+$/, "");
      try {
        const review = await autoReviewPullRequest(
          {
            config: deps.config,
            models: deps.models,
            logger: deps.logger,
            githubClient: deps.client,
            modelClient: deps.modelClient,
          },
          workspace.account_id,
          { pr_url: `${webUrl}/${job.repo_full_name}/pull/${job.number}` },
        );
        log.info({ verdict: review.verdict, review: review.review_url }, "automatic review posted");
      } catch (error) {
        // Nobody asked in the thread: a refusal (allowance used up, no model or App
        // configured) is logged only. Other failures give the head commit back for a retry.
        if (isAppError(error) && (error.status < 500 || error.status === 503)) {
          log.warn({ reason: error.message }, "automatic review skipped");
          return;
        }
        await dropMarkers(deps.models, [marker]).catch(() => undefined);
        throw error;
      }
    },
  };
}
