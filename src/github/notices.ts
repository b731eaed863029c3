import { z } from "zod";
import type { PlanStep, TaskRecord } from "../db/models.js";
import type { JobKind, Scheduler } from "../queue/scheduler.js";
import type { Models } from "../db/models.js";
import type { ReviewResult } from "../tools/review-tool.js";
import { claimMarker, markers } from "../domain/markers.js";
import { planMarkdown } from "../domain/plan-text.js";
import { taskById, taskConversations } from "../domain/tasks.js";
import type { GithubHandlerDeps } from "./deps.js";
import { reply } from "./threads.js";

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
});
export const NOTICE_JOB = { name: "github.notice", schema: noticeJobSchema };

/** Queues a notice for a task's thread; tasks without a thread are skipped by one lookup. */
export function createThreadNotifier(models: Models, scheduler: Scheduler) {
  return async (taskId: string, kind: NoticeKind): Promise<void> => {
    const task = await taskConversations(models, taskId);
    if (!task?.thread) return;
    await scheduler.enqueue(
      NOTICE_JOB,
      { task_id: taskId, kind },
      { unique: { "data.task_id": taskId, "data.kind": kind } },
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

function planText(task: TaskRecord): string {
  const steps = planMarkdown(task.plan as PlanStep[] | null, "inline");
  return [
    `**Plan for task \`${task._id}\`**`,
    task.plan_summary ?? "",
    steps || "(the plan has no steps)",
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
    async run({ task_id, kind }) {
      if (!(await claimMarker(deps.models, markers.githubNotice(task_id, kind)))) return;
      const task = await taskById(deps.models, task_id);
      if (!task?.thread) return;
      const body =
        kind === "plan" ? planText(task) : kind === "diff" ? diffText(task) : endText(task);
      const octokit = await deps.client.octokit(task.thread.installation_id);
      await reply(octokit, task.thread, body);
      logger.info({ task: task_id, kind }, "notice posted");
    },
  };
}
