import { z } from "zod";
import type { Models, TaskRecord } from "../db/models.js";
import {
  claimCheckRun,
  progressKey,
  progressTask,
  recordCheckRun,
  recordProgressUnavailable,
  recordReported,
  releaseProgressLock,
  reportsProgress,
  takeProgressLock,
} from "../domain/tasks/progress.js";
import type { JobKind, Scheduler } from "../queue/scheduler.js";
import type { InstallationOctokit } from "../github-api/client.js";
import type { Logger } from "../util/logger.js";
import { redactText } from "../util/redact.js";
import type { GithubHandlerDeps } from "./deps.js";
import { ownerAndRepo } from "./threads.js";

/*
 * Live progress of a GitHub task (docs/api.md, "Progress on GitHub"): one check run named
 * `foreman` on the commit the task started from (its `base_sha`: the base branch's head, or
 * the pull request's head for a task asked for in a pull request), `in_progress` with the
 * current phase while the task runs, completed with its outcome when it ends, and linking
 * to the task's dashboard page when PUBLIC_URL is set.
 *
 * Every phase change queues a `github.progress` job (fire and forget: the phase change never
 * waits for GitHub, and GitHub's failures never reach the task). The job reads the task's
 * current state when it runs, reports it, then reads it again and reports again until what
 * it last sent is still current: jobs running late or side by side end on the newest phase.
 */

export const CHECK_RUN_NAME = "foreman";
/** How long a check run's creation by another job may stay unfinished before it is redone. */
const CREATION_STALE_MS = 60_000;
/** Reports of one job at most (each round is one PATCH of a newer state). */
const MAX_ROUNDS = 5;
/** How long one job may hold a task's report lock (a job that died lets go after this). */
const LOCK_MS = 60_000;

const progressJobSchema = z.strictObject({
  task_id: z.string().min(1),
  /** The phase event's sequence number, or `end`: one job per phase change. */
  at: z.union([z.number().int().min(1), z.literal("end")]),
});
export const PROGRESS_JOB = { name: "github.progress", schema: progressJobSchema };

/**
 * The hook the domain calls on every phase change (TaskDeps.reportProgress): queues the
 * job for tasks on a GitHub repository, in the background.
 */
export function createProgressReporter(models: Models, scheduler: Scheduler, logger: Logger) {
  return (taskId: string, at: number | "end"): void => {
    void (async () => {
      if (!(await reportsProgress(models, taskId))) return;
      await scheduler.enqueue(
        PROGRESS_JOB,
        { task_id: taskId, at },
        { unique: { "data.task_id": taskId, "data.at": at } },
      );
    })().catch((error: unknown) =>
      logger.warn({ err: error, task: taskId }, "queueing the GitHub progress report failed"),
    );
  };
}

type ProgressTask = NonNullable<Awaited<ReturnType<typeof progressTask>>>;
type Conclusion = "success" | "failure" | "cancelled" | "neutral";

/** What the check run shows for the task's current state. */
export function checkRunState(
  task: TaskRecord,
  dashboardUrl: string | undefined,
): {
  status: "in_progress" | "completed";
  conclusion?: Conclusion;
  title: string;
  summary: string;
} {
  const asked = task.description.trim().split("\n")[0]!.slice(0, 200);
  const link = dashboardUrl ? `\n\n[Follow the task on the dashboard](${dashboardUrl})` : "";
  const head = `Task \`${task._id}\`: ${asked}`;
  const say = (title: string, text: string, conclusion?: Conclusion) => ({
    status: conclusion ? ("completed" as const) : ("in_progress" as const),
    ...(conclusion ? { conclusion } : {}),
    title,
    summary: redactText(`${head}\n\n${text}${link}`).slice(0, 60_000),
  });
  const where = task.thread ? "in this thread" : "through the API or the dashboard";
  switch (task.status) {
    case "completed":
      if (task.pr_url) return say("Done: pull request opened", `Done: ${task.pr_url}`, "success");
      if (task.branch)
        return say("Done: branch pushed", `Done: pushed branch \`${task.branch}\`.`, "success");
      return say("Done: no change needed", "Done: no change was needed.", "neutral");
    case "failed":
      return say("Failed", `Failed: ${task.error ?? "no reason was recorded"}`, "failure");
    case "cancelled":
      return say("Cancelled", task.error ?? "The task was cancelled.", "cancelled");
    case "awaiting_approval":
      return say(
        "Waiting for plan approval",
        `Phase AWAITING_APPROVAL: the plan waits for approval ${where} (\`/approve\` or \`/reject\`).`,
      );
    case "awaiting_diff_approval":
      return say(
        "Waiting for diff approval",
        `Phase AWAITING_DIFF_APPROVAL: the change waits for approval ${where} (\`/approve-diff\` or \`/reject-diff\`).`,
      );
    default:
      break;
  }
  const phases: Record<string, string> = {
    QUEUED: "Queued",
    CLONING: "Cloning the repository",
    INDEXING: "Indexing the repository",
    PLANNING: "Planning",
    IMPLEMENTING: "Implementing the plan",
    VERIFYING: "Running the repository's checks",
    FIXING: "Fixing what the checks found",
    REVIEWING: task.review ? "Publishing the change" : "Reviewing the change",
    CLEANUP: "Cleaning up",
  };
  const title = phases[task.phase] ?? task.phase;
  return say(title, `Phase ${task.phase}: ${title.toLowerCase()}.`);
}

/** The dashboard's page of a task, when the service's public address is known. */
export function dashboardTaskUrl(
  publicUrl: string | undefined,
  taskId: string,
): string | undefined {
  if (!publicUrl) return undefined;
  return new URL(
    `dashboard/tasks/${encodeURIComponent(taskId)}`,
    publicUrl.endsWith("/") ? publicUrl : `${publicUrl}/`,
  ).toString();
}

function statusOf(error: unknown): number | undefined {
  const status = (error as { status?: unknown }).status;
  return typeof status === "number" ? status : undefined;
}

/** The job that brings a task's check run up to the task's current state. */
export function progressJob(deps: GithubHandlerDeps): JobKind<z.infer<typeof progressJobSchema>> {
  const logger = deps.logger.child({ component: "github-progress" });
  const publicUrl = deps.config.manifest.publicUrl;

  /** The check run's id: stored, created here, or created by a job running beside this one. */
  async function checkRunId(
    octokit: InstallationOctokit,
    task: ProgressTask,
    headSha: string,
  ): Promise<{ id: number; created?: boolean } | undefined> {
    if (task.github_check?.id) return { id: task.github_check.id };
    const repo = ownerAndRepo(task.repo.full_name);
    for (let waited = 0; ; waited += 250) {
      const claim = await claimCheckRun(deps.models, task._id);
      if ("id" in claim) return { id: claim.id };
      if ("pending" in claim) {
        if (Date.now() - claim.pending.getTime() < CREATION_STALE_MS) {
          // Another job is creating it: wait for its id a little, else leave it to that job.
          if (waited >= 5000) return undefined;
          await new Promise((resolve) => setTimeout(resolve, 250));
          continue;
        }
        // The job creating it stopped half-way: find the run it may have created.
        const found = await octokit.rest.checks.listForRef({
          ...repo,
          ref: headSha,
          check_name: CHECK_RUN_NAME,
          filter: "all",
          per_page: 100,
        });
        const run = found.data.check_runs.find((r) => r.external_id === task._id);
        if (run) {
          await recordCheckRun(deps.models, task._id, run.id, headSha);
          return { id: run.id };
        }
      }
      const url = dashboardTaskUrl(publicUrl, task._id);
      const state = checkRunState(task, url);
      const created = await octokit.rest.checks.create({
        ...repo,
        name: CHECK_RUN_NAME,
        head_sha: headSha,
        external_id: task._id,
        status: "in_progress",
        started_at: new Date().toISOString(),
        ...(url ? { details_url: url } : {}),
        output: { title: state.title, summary: state.summary },
      });
      await recordCheckRun(deps.models, task._id, created.data.id, headSha);
      logger.info({ task: task._id, check_run: created.data.id }, "check run created");
      return { id: created.data.id, created: true };
    }
  }

  async function report(taskId: string): Promise<void> {
    let sent: string | undefined;
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const task = await progressTask(deps.models, taskId);
      if (!task || task.github_check?.unavailable) return;
      const key = progressKey(task);
      // Current already: shown by an earlier job, or by this one's last round.
      if (key === (sent ?? task.github_check?.reported)) return;
      // No commit to show it on before CLONING has recorded the one the task started from.
      const headSha = task.github_check?.head_sha ?? task.base_sha;
      if (!headSha) return;
      const octokit = await deps.client.octokit(task.repo.installation_id!);
      const run = await checkRunId(octokit, task, headSha);
      if (run === undefined) return;
      const state = checkRunState(task, dashboardTaskUrl(publicUrl, task._id));
      // A run just created in progress shows this state already.
      if (!(run.created && state.status === "in_progress"))
        await octokit.rest.checks.update({
          ...ownerAndRepo(task.repo.full_name),
          check_run_id: run.id,
          status: state.status,
          ...(state.conclusion
            ? { conclusion: state.conclusion, completed_at: new Date().toISOString() }
            : {}),
          output: { title: state.title, summary: state.summary },
        });
      sent = key;
      await recordReported(deps.models, taskId, key);
    }
  }

  return {
    ...PROGRESS_JOB,
    async run({ task_id }) {
      try {
        for (let round = 0; round < MAX_ROUNDS; round++) {
          // One job at a time per task; a job finding the lock taken leaves the report to
          // its holder, which looks at the task again after letting go.
          const token = await takeProgressLock(deps.models, task_id, LOCK_MS);
          if (!token) return;
          try {
            await report(task_id);
          } finally {
            await releaseProgressLock(deps.models, task_id, token);
          }
          const task = await progressTask(deps.models, task_id);
          if (!task || task.github_check?.unavailable) return;
          if (progressKey(task) === task.github_check?.reported || !task.base_sha) return;
        }
      } catch (error) {
        const status = statusOf(error);
        const message = redactText((error as Error).message ?? String(error)).slice(0, 300);
        if (status === 403 || status === 404 || status === 422) {
          // Refused for good (no `checks: write`, repository gone): stop trying for this task.
          await recordProgressUnavailable(
            deps.models,
            task_id,
            `GitHub answered ${status}: ${message}`,
          );
          logger.warn({ task: task_id, status }, "GitHub refused the progress check run");
          return;
        }
        // Anything else (5xx, network): the task's next phase change tries again.
        logger.warn({ task: task_id, err: error }, "reporting progress to GitHub failed");
      }
    },
  };
}
