import { z } from "zod";
import type { TaskRecord } from "../db/models.js";
import { claimMarker, markerKind } from "../durable/markers.js";
import { pullRequestTasks } from "../domain/tasks/store.js";
import { respondToConversation } from "../domain/tasks/conversations.js";
import { isAppError } from "../errors.js";
import type { JobKind } from "../queue/scheduler.js";
import { sanitizeUntrusted } from "../text/sanitize.js";
import type { InstallationOctokit } from "../github-api/client.js";
import { queueForDelivery } from "./delivery.js";
import type { GithubHandlerDeps, HandlerGroup } from "./deps.js";
import {
  APP_MARKER,
  hasWriteAccess,
  ownerAndRepo,
  reply,
  usableWorkspace,
  workspaceOfInstallation,
  writtenByApp,
  type Thread,
} from "./threads.js";

/** Feedback on a task's pull request (a review, a comment), acted on once. */
export const githubFollowUpMarker = markerKind(
  "gh-follow-up",
  "github-follow-up",
  (key: string) => [key],
);

/*
 * Feedback on a pull request a task opened (docs/api.md, "Follow-ups on a task's pull
 * request"): a review that requests changes or comments, an inline comment, a
 * comment that mentions the App. From a user with write access it becomes a follow-up task
 * on the pull request's branch (followUpTask) or, while the pull request's newest task waits
 * at a gate, a revision of it (reviseTask). The handlers only queue a job; the job reads the
 * review through the API and calls the domain.
 *
 * One follow-up per review: `pull_request_review.submitted` and the
 * `pull_request_review_comment.created` of each of its comments queue the same job (unique
 * by review id), and the job claims `gh-follow-up:review:<id>` before acting.
 */

const MAX_BODY = 65_536;
/** Lines of an inline comment's diff hunk quoted for the agent (the end of the hunk). */
const HUNK_LINES = 20;
/** Inline comments of one review read (and answered). */
const MAX_COMMENTS = 100;

/** Branches the service pushes (pipeline/stages/publish.ts `branchName`). */
const SERVICE_BRANCH = /^foreman\//;

const followUpJobSchema = z.strictObject({
  installation_id: z.number().int(),
  repo_id: z.string(),
  repo_full_name: z.string(),
  pr_number: z.number().int(),
  /** A whole review (read through the API), a lone inline comment, or a mention. */
  source: z.enum(["review", "inline", "mention"]),
  review_id: z.number().int().optional(),
  comment_id: z.number().int().optional(),
  comment_url: z.string().optional(),
  author: z.string(),
  body: z.string().max(MAX_BODY).optional(),
  path: z.string().optional(),
  line: z.number().int().nullable().optional(),
  diff_hunk: z.string().max(MAX_BODY).optional(),
});
type FollowUpJob = z.infer<typeof followUpJobSchema>;
export const FOLLOW_UP_JOB = { name: "github.follow-up", schema: followUpJobSchema };

/** An inline comment as the follow-up's description and its replies need it. */
export interface InlineComment {
  id: number;
  path: string;
  line: number | null;
  diff_hunk: string;
  body: string;
}

type User = { login?: string; type?: string } | null | undefined;

/** The pull request of a review event, when a task may have opened it. */
function taskPullRequest(
  pr: { head: { ref: string; repo?: { full_name: string } | null } },
  repository: { full_name: string },
): boolean {
  return SERVICE_BRANCH.test(pr.head.ref) && pr.head.repo?.full_name === repository.full_name;
}

export const followUpHandlers: HandlerGroup = (probot, deps) => {
  const slug = deps.github.slug;
  probot.on("pull_request_review.submitted", async ({ payload }) => {
    const { review, pull_request: pr, repository, installation, sender } = payload;
    if (!installation || !taskPullRequest(pr, repository)) return;
    if (writtenByApp(review.user as User, review.body, slug) || writtenByApp(sender, null, slug))
      return;
    const state = review.state.toLowerCase();
    // An approval asks for nothing; a bare "commented" review may still carry inline comments.
    if (state !== "changes_requested" && state !== "commented") return;
    await queueForDelivery(
      deps.scheduler,
      FOLLOW_UP_JOB,
      {
        installation_id: installation.id,
        repo_id: String(repository.id),
        repo_full_name: repository.full_name,
        pr_number: pr.number,
        source: "review",
        review_id: review.id,
        author: review.user!.login,
      },
      { "data.review_id": review.id },
    );
  });

  probot.on("pull_request_review_comment.created", async ({ payload }) => {
    const { comment, pull_request: pr, repository, installation, sender } = payload;
    if (!installation || !taskPullRequest(pr, repository)) return;
    if (writtenByApp(comment.user as User, comment.body, slug) || writtenByApp(sender, null, slug))
      return;
    const common = {
      installation_id: installation.id,
      repo_id: String(repository.id),
      repo_full_name: repository.full_name,
      pr_number: pr.number,
      author: comment.user!.login,
    };
    // Every inline comment belongs to a review: the review is handled as a whole, once.
    if (comment.pull_request_review_id) {
      await queueForDelivery(
        deps.scheduler,
        FOLLOW_UP_JOB,
        { ...common, source: "review", review_id: comment.pull_request_review_id },
        { "data.review_id": comment.pull_request_review_id },
      );
      return;
    }
    await queueForDelivery(
      deps.scheduler,
      FOLLOW_UP_JOB,
      {
        ...common,
        source: "inline",
        comment_id: comment.id,
        comment_url: comment.html_url,
        body: (comment.body ?? "").slice(0, MAX_BODY),
        path: comment.path,
        line: comment.line ?? null,
        diff_hunk: (comment.diff_hunk ?? "").slice(0, MAX_BODY),
      },
      { "data.source": "inline", "data.comment_id": comment.id },
    );
  });
};

/**
 * Queues a comment on a pull request that mentions the App without a command (commands.ts
 * sends commands their own way): the job checks whether a task opened the pull request.
 */
export async function queueMention(
  deps: GithubHandlerDeps,
  data: Omit<FollowUpJob, "source" | "review_id" | "path" | "line" | "diff_hunk"> & {
    comment_id: number;
  },
): Promise<void> {
  await queueForDelivery(
    deps.scheduler,
    FOLLOW_UP_JOB,
    { ...data, source: "mention" },
    { "data.source": "mention", "data.comment_id": data.comment_id },
  );
}

/** True when `body` mentions the App (`@<slug>` or `@<slug>[bot]`). */
export function mentionsApp(body: string, slug: string | undefined): boolean {
  if (!slug) return false;
  const escaped = slug.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  return new RegExp(`(^|[^\\w/-])@${escaped}(\\[bot\\])?(?![\\w-])`, "i").test(body);
}

/** The end of a diff hunk, where the comment's line is, sanitized. */
function hunkTail(hunk: string): string {
  return sanitizeUntrusted(hunk).split("\n").slice(-HUNK_LINES).join("\n").replace(/```/g, "ʼʼʼ");
}

/** A review's or comment's words and inline comments as the follow-up's description. */
export function feedbackText(input: {
  what: string;
  author: string;
  repo_full_name: string;
  pr_number: number;
  body: string;
  comments: InlineComment[];
}): string {
  const parts = [
    `Address the ${input.what} by @${input.author} on pull request #${input.pr_number} of ${input.repo_full_name}.`,
  ];
  const body = sanitizeUntrusted(input.body);
  if (body) parts.push(body);
  if (input.comments.length > 0) {
    parts.push("Inline comments:");
    input.comments.forEach((c, i) => {
      parts.push(
        [
          `${i + 1}. \`${c.path}\`${c.line ? ` line ${c.line}` : ""}:`,
          "```diff",
          hunkTail(c.diff_hunk),
          "```",
          sanitizeUntrusted(c.body),
        ].join("\n"),
      );
    });
  }
  return parts.join("\n\n");
}

/** What the door did with feedback on a pull request, and the reply to post. */
export interface FeedbackOutcome {
  reply: string;
  task_id?: string;
}

/**
 * Acts on feedback for a pull request of `tasks` (newest first) through the one domain
 * function every door uses (respondToConversation): a revision at a gate, a follow-up on the
 * branch, or the reason for neither. Answers what to reply.
 */
export async function actOnFeedback(
  deps: GithubHandlerDeps,
  input: {
    accountId: string;
    tasks: TaskRecord[];
    thread: Thread;
    author: string;
    /** The follow-up's description (sanitized). */
    description: string;
    /** What the follow-up answers when it ends: inline comments, who asked, from where. */
    origin: Record<string, unknown>;
  },
): Promise<FeedbackOutcome> {
  const outcome = await respondToConversation(deps.tasks, input.accountId, input.tasks, {
    text: input.description,
    by: `@${input.author} on GitHub`,
    name: `@${input.author}`,
    source: "github",
    origin: input.origin,
    // The follow-up answers on this pull request (its parent may have been asked for elsewhere).
    thread: input.thread,
  });
  return {
    reply: outcome.reply,
    ...(outcome.action === "revised" || outcome.action === "followed_up"
      ? { task_id: outcome.task_id! }
      : {}),
  };
}

/** The inline comments of a review (one page of up to 100). */
async function reviewComments(
  octokit: InstallationOctokit,
  job: FollowUpJob,
  reviewId: number,
): Promise<InlineComment[]> {
  const { data } = await octokit.rest.pulls.listCommentsForReview({
    ...ownerAndRepo(job.repo_full_name),
    pull_number: job.pr_number,
    review_id: reviewId,
    per_page: MAX_COMMENTS,
  });
  return data.map((c) => ({
    id: c.id,
    path: c.path,
    line: (c as { line?: number | null }).line ?? c.position ?? null,
    diff_hunk: c.diff_hunk,
    body: c.body,
  }));
}

/** What the job read of the feedback: its words and inline comments; null to ignore it. */
async function readFeedback(
  deps: GithubHandlerDeps,
  octokit: InstallationOctokit,
  job: FollowUpJob,
): Promise<{ what: string; body: string; comments: InlineComment[] } | null> {
  const slug = deps.github.slug;
  if (job.source === "review") {
    const { data: review } = await octokit.rest.pulls.getReview({
      ...ownerAndRepo(job.repo_full_name),
      pull_number: job.pr_number,
      review_id: job.review_id!,
    });
    if (writtenByApp(review.user as User, review.body, slug)) return null;
    const state = review.state.toUpperCase();
    if (state !== "CHANGES_REQUESTED" && state !== "COMMENTED") return null;
    const comments = (await reviewComments(octokit, job, review.id)).filter(
      (c) => !c.body.includes(APP_MARKER),
    );
    if (!review.body?.trim() && comments.length === 0) return null;
    return {
      what: state === "CHANGES_REQUESTED" ? "review requesting changes" : "review",
      body: review.body ?? "",
      comments,
    };
  }
  if (job.source === "inline")
    return {
      what: "inline comment",
      body: "",
      comments: [
        {
          id: job.comment_id!,
          path: job.path ?? "",
          line: job.line ?? null,
          diff_hunk: job.diff_hunk ?? "",
          body: job.body ?? "",
        },
      ],
    };
  return { what: "comment", body: job.body ?? "", comments: [] };
}

/** The job that turns feedback on a task's pull request into a follow-up or a revision. */
export function followUpJob(deps: GithubHandlerDeps): JobKind<FollowUpJob> {
  const logger = deps.logger.child({ component: "github-follow-ups" });
  return {
    ...FOLLOW_UP_JOB,
    async run(job) {
      const key =
        job.source === "review" ? `review:${job.review_id}` : `${job.source}:${job.comment_id}`;
      // Agenda's lock is not atomic on every backend: the feedback is acted on once.
      if (!(await claimMarker(deps.models, githubFollowUpMarker(key)))) return;
      const log = logger.child({ repo: job.repo_full_name, pr: job.pr_number, feedback: key });
      const workspace = await workspaceOfInstallation(deps.models, job.installation_id);
      if (!usableWorkspace(workspace)) return;
      const tasks = await pullRequestTasks(
        deps.models,
        workspace.account_id,
        job.repo_id,
        job.pr_number,
      );
      if (tasks.length === 0) return;
      const octokit = await deps.client.octokit(job.installation_id);
      if (!(await hasWriteAccess(octokit, job.repo_full_name, job.author))) {
        log.info({ author: job.author }, "feedback ignored: the author has no write access");
        return;
      }
      if (job.source === "mention" && job.comment_id)
        await octokit.rest.reactions
          .createForIssueComment({
            ...ownerAndRepo(job.repo_full_name),
            comment_id: job.comment_id,
            content: "eyes",
          })
          .catch((error: unknown) => log.warn({ err: error }, "could not react to the comment"));
      const feedback = await readFeedback(deps, octokit, job);
      if (!feedback) {
        log.info("feedback ignored: nothing to act on");
        return;
      }
      const thread: Thread = {
        installation_id: job.installation_id,
        repo_full_name: job.repo_full_name,
        number: job.pr_number,
        is_pull_request: true,
      };
      let outcome: FeedbackOutcome;
      try {
        outcome = await actOnFeedback(deps, {
          accountId: workspace.account_id,
          tasks,
          thread,
          author: job.author,
          description: feedbackText({ ...feedback, ...job }),
          origin: {
            kind: job.source === "mention" ? "comment" : job.source,
            author: job.author,
            pr_number: job.pr_number,
            ...(job.review_id ? { review_id: job.review_id } : {}),
            ...(job.comment_url ? { comment_url: job.comment_url } : {}),
            comments: feedback.comments.map((c) => ({ id: c.id, path: c.path, line: c.line })),
          },
        });
      } catch (error) {
        if (!(isAppError(error) && error.status < 500)) throw error;
        outcome = { reply: `Could not act on the feedback: ${error.message}` };
      }
      await reply(octokit, thread, `${outcome.reply}\n\n${APP_MARKER}`);
      log.info({ task: outcome.task_id }, "feedback on a task's pull request handled");
    },
  };
}
