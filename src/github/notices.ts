import { z } from "zod";
import type { PlanStep, TaskRecord } from "../db/models.js";
import type { JobKind, Scheduler } from "../queue/scheduler.js";
import type { Models } from "../db/models.js";
import type { ReviewResult } from "../tools/review-tool.js";
import { claimMarker, markerKind } from "../durable/markers.js";
import { planMarkdown } from "../domain/pull-requests/plan-text.js";
import { taskById } from "../domain/tasks/store.js";
import type { GithubHandlerDeps } from "./deps.js";
import type { InstallationOctokit } from "../github-api/client.js";
import type { Logger } from "../util/logger.js";
import { redactText } from "../util/redact.js";
import { APP_MARKER, ownerAndRepo, reply } from "./threads.js";

/** A notice posted in a task's GitHub thread. */
export const githubNoticeMarker = markerKind(
  "gh-notice",
  "github-notice",
  (taskId: string, notice: string) => [taskId, notice],
);

/*
 * What a task tells its GitHub thread: the plan when it waits for approval, a summary of
 * the change when it waits for the diff approval, and how it ended (the pull request link,
 * or why it failed). Each notice is a job, queued once per task and kind.
 */

export const NOTICE_KINDS = ["plan", "diff", "end"] as const;
export type NoticeKind = (typeof NOTICE_KINDS)[number];

const noticeJobSchema = z.strictObject({
  task_id: z.string().min(1),
  kind: z.enum(NOTICE_KINDS),
  /** The task's pipeline round: a revised plan or diff, or a retried ending, is news again. */
  round: z.number().int().min(1).optional(),
});
export const NOTICE_JOB = { name: "github.notice", schema: noticeJobSchema };

/** Queues a notice for a task's thread; tasks without a thread are skipped by one lookup. */
export function createThreadNotifier(models: Models, scheduler: Scheduler) {
  return async (taskId: string, kind: NoticeKind): Promise<void> => {
    const task = await taskById(models, taskId);
    if (!task?.thread) return;
    const round = task.round ?? 0;
    await scheduler.enqueue(
      NOTICE_JOB,
      { task_id: taskId, kind, ...(round > 0 ? { round } : {}) },
      {
        unique: {
          "data.task_id": taskId,
          "data.kind": kind,
          ...(round > 0 ? { "data.round": round } : {}),
        },
      },
    );
  };
}

/** Files changed in a unified diff, with lines added and removed. */
export function diffStat(diff: string): Array<{ path: string; added: number; removed: number }> {
  const files: Array<{ path: string; added: number; removed: number }> = [];
  let current: { path: string; added: number; removed: number } | undefined;
  for (const line of diff.split("\n")) {
    const header = /^diff --git a\/(.+?) b\/(.+)$/.exec(line);
    if (header) {
      current = { path: header[2]!, added: 0, removed: 0 };
      files.push(current);
    } else if (current && line.startsWith("+") && !line.startsWith("+++")) current.added += 1;
    else if (current && line.startsWith("-") && !line.startsWith("---")) current.removed += 1;
  }
  return files;
}

/** The plan gate's comment: the plan, the tests it will make pass, how to answer. */
export function planText(task: TaskRecord): string {
  const steps = planMarkdown(task.plan as PlanStep[] | null, "inline");
  return [
    `**Plan for task \`${task._id}\`**`,
    task.plan_summary ?? "",
    steps || "(the plan has no steps)",
    task.plan_targets?.length
      ? `Tests it will make pass: ${task.plan_targets.map((t) => `\`${t}\``).join(", ")}`
      : "",
    "Reply `/approve` to implement it, or `/reject` to cancel the task.",
  ]
    .filter(Boolean)
    .join("\n\n");
}

function diffText(task: TaskRecord): string {
  const stat = diffStat(task.diff ?? "");
  const review = task.review as ReviewResult | null;
  const checks = task.checks?.results ?? [];
  return [
    `**Change ready for task \`${task._id}\`**`,
    task.implement_summary ?? "",
    stat.length
      ? `| file | + | − |\n|---|---:|---:|\n${stat.map((f) => `| \`${f.path}\` | ${f.added} | ${f.removed} |`).join("\n")}`
      : "",
    checks.length
      ? `Checks: ${checks.map((c) => `${c.ok ? "✅" : "❌"} ${c.name}`).join(", ")}`
      : "",
    review ? `Review: **${review.verdict.replace("_", " ")}**. ${review.summary}` : "",
    "Reply `/approve-diff` to push the branch and open the pull request, or `/reject-diff` to drop the change.",
  ]
    .filter(Boolean)
    .join("\n\n");
}

function endText(task: TaskRecord): string {
  if (task.status === "completed") {
    if (task.pr_url) return `Task \`${task._id}\` is done: ${task.pr_url}`;
    if (task.branch) return `Task \`${task._id}\` is done: pushed branch \`${task.branch}\`.`;
    return `Task \`${task._id}\` is done: no change was needed.`;
  }
  if (task.status === "cancelled")
    return `Task \`${task._id}\` was cancelled. ${task.error ?? ""}`.trim();
  return `Task \`${task._id}\` failed: ${task.error ?? "no reason was recorded"}`;
}

/** The job that posts a notice in the task's thread. */
export function noticeJob(deps: GithubHandlerDeps): JobKind<z.infer<typeof noticeJobSchema>> {
  const logger = deps.logger.child({ component: "github-notices" });
  return {
    ...NOTICE_JOB,
    async run({ task_id, kind, round }) {
      const notice = round ? `${kind}@${round}` : kind;
      if (!(await claimMarker(deps.models, githubNoticeMarker(task_id, notice)))) return;
      const task = await taskById(deps.models, task_id);
      if (!task?.thread) return;
      const octokit = await deps.client.octokit(task.thread.installation_id);
      if (kind === "end" && task.follow_up && task.thread.is_pull_request) {
        await answerFollowUp(octokit, task, logger);
        logger.info({ task: task_id, kind }, "follow-up answered");
        return;
      }
      const body =
        kind === "plan" ? planText(task) : kind === "diff" ? diffText(task) : endText(task);
      await reply(octokit, task.thread, body);
      logger.info({ task: task_id, kind }, "notice posted");
    },
  };
}

/** The inline comments a follow-up was asked for in (its `origin`, github/follow-ups.ts). */
function originComments(
  task: TaskRecord,
): Array<{ id: number; path: string; line: number | null }> {
  const comments = (task.origin as { comments?: unknown } | null)?.comments;
  return Array.isArray(comments)
    ? comments.filter(
        (c): c is { id: number; path: string; line: number | null } =>
          typeof c?.id === "number" && typeof c?.path === "string",
      )
    : [];
}

/** The follow-up's commits on its pull request (their messages name the task), or []. */
async function followUpCommits(
  octokit: InstallationOctokit,
  task: TaskRecord,
  thread: NonNullable<TaskRecord["thread"]>,
  logger: Logger,
): Promise<Array<{ sha: string; title: string }>> {
  try {
    const { data } = await octokit.rest.pulls.listCommits({
      ...ownerAndRepo(thread.repo_full_name),
      pull_number: thread.number,
      per_page: 100,
    });
    return data
      .filter((c) => c.commit.message.includes(`Task: ${task._id}`))
      .map((c) => ({ sha: c.sha, title: c.commit.message.split("\n")[0] ?? "" }));
  } catch (error) {
    logger.warn({ err: error, task: task._id }, "could not list the pull request's commits");
    return [];
  }
}

/**
 * How a follow-up asked for on a pull request ended, told on that pull request: the commits
 * it pushed, its summary and the files it changed; and a reply on each inline comment it was
 * asked for whose file it changed.
 */
async function answerFollowUp(
  octokit: InstallationOctokit,
  task: TaskRecord,
  logger: Logger,
): Promise<void> {
  const thread = task.thread!;
  const pushed = task.status === "completed" && Boolean(task.branch) && Boolean(task.diff?.trim());
  if (!pushed) {
    await reply(octokit, thread, `${endText(task)}\n\n${APP_MARKER}`);
    return;
  }
  const commits = await followUpCommits(octokit, task, thread, logger);
  const stat = diffStat(task.diff ?? "");
  const changed = new Set(stat.map((f) => f.path));
  const comments = originComments(task);
  const body = [
    `**Follow-up task \`${task._id}\` is done**: pushed to \`${task.branch}\`${
      commits.length
        ? ` (${commits.map((c) => `${c.sha.slice(0, 7)} ${c.title.replace(/[`*_]/g, "\\$&")}`).join("; ")})`
        : ""
    }.`,
    task.implement_summary ?? task.plan_summary ?? "",
    stat.length
      ? `| file | + | − |\n|---|---:|---:|\n${stat.map((f) => `| \`${f.path}\` | ${f.added} | ${f.removed} |`).join("\n")}`
      : "",
    comments.length
      ? `Inline comments answered: ${comments.filter((c) => changed.has(c.path)).length} of ${comments.length}${
          comments.some((c) => !changed.has(c.path))
            ? ` (not changed: ${[...new Set(comments.filter((c) => !changed.has(c.path)).map((c) => `\`${c.path}\``))].join(", ")})`
            : ""
        }.`
      : "",
    APP_MARKER,
  ]
    .filter(Boolean)
    .join("\n\n");
  await reply(octokit, thread, body);
  const where = commits.length ? ` in ${commits.map((c) => c.sha.slice(0, 7)).join(", ")}` : "";
  for (const comment of comments) {
    const file = stat.find((f) => f.path === comment.path);
    if (!file) continue;
    try {
      await octokit.rest.pulls.createReplyForReviewComment({
        ...ownerAndRepo(thread.repo_full_name),
        pull_number: thread.number,
        comment_id: comment.id,
        body: redactText(
          `Addressed by follow-up task \`${task._id}\`: changed \`${file.path}\` (+${file.added} −${file.removed})${where}.\n\n${APP_MARKER}`,
        ),
      });
    } catch (error) {
      logger.warn(
        { err: error, task: task._id, comment: comment.id },
        "could not reply to a comment",
      );
    }
  }
}
