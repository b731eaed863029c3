import picomatch from "picomatch";
import { z } from "zod";
import {
  fireCiFailureAutomations,
  hasCiFailureAutomation,
} from "../domain/automations/automations.js";
import { claimMarker, markerExists, markerKind } from "../durable/markers.js";
import { createTask } from "../domain/tasks/create.js";
import { isAppError } from "../errors.js";
import type { JobKind } from "../queue/scheduler.js";
import { configNames } from "../verify/checks.js";
import { redactText } from "../util/redact.js";
import type { InstallationOctokit } from "../github-api/client.js";
import type { WorkspaceRecord } from "../domain/workspaces/workspaces.js";
import type { Logger } from "../util/logger.js";
import { queueForDelivery } from "./delivery.js";
import type { GithubHandlerDeps, HandlerGroup } from "./deps.js";
import { sanitizeUntrusted } from "../text/sanitize.js";
import {
  ownerAndRepo,
  reply,
  usableWorkspace,
  workspaceOfInstallation,
  type Thread,
} from "./threads.js";
import { parseRepositoryYaml } from "../util/repo-parse.js";

/** A CI failure of one head commit, fixed once. */
export const ciFixMarker = markerKind("ci-fix", "github-ci", (repoId: string, headSha: string) => [
  repoId,
  headSha,
]);

/** A CI fix of one branch at a time. */
export const ciFixBranchMarker = markerKind(
  "ci-fix-branch",
  "github-ci",
  (repoId: string, branch: string) => [repoId, branch],
);

/*
 * CI failures (issue #5; docs/api.md, "CI failures" under "The GitHub App" and under
 * "Automations"): a failed check run, check suite or workflow run starts a fix task for the
 * failing branch when the repository asks for it (`ci_failure:` in its config file on the
 * default branch) or a `ci_failure` automation matches. Guards: one fix task per head commit;
 * the service's own fix branches get one fix attempt at most; nothing when the default branch
 * fails the same check (the thread is told instead).
 */

const FAILING = new Set(["failure", "timed_out", "startup_failure"]);
const FIX_BRANCH_PREFIX = "foreman/";
const LOG_EXCERPT_CHARS = 6000;

const ciJobSchema = z.strictObject({
  key: z.string(),
  installation_id: z.number().int(),
  repo_id: z.string(),
  repo_full_name: z.string(),
  default_branch: z.string(),
  source: z.enum(["check_run", "check_suite", "workflow_run"]),
  check: z.strictObject({
    name: z.string(),
    conclusion: z.string(),
    head_branch: z.string(),
    head_sha: z.string(),
    details_url: z.string(),
    summary: z.string(),
    workflow: z.string().nullable(),
  }),
  check_run_id: z.number().int().nullable(),
  check_suite_id: z.number().int().nullable(),
  workflow_run_id: z.number().int().nullable(),
  workflow_id: z.number().int().nullable(),
  actions: z.boolean(),
  pr_number: z.number().int().nullable(),
});
export type CiJob = z.infer<typeof ciJobSchema>;
export const CI_JOB = { name: "github.ci-failure", schema: ciJobSchema };

type Enqueue = (job: CiJob) => Promise<void>;

/** The three failure events; each queues a job with what the fix task will need. */
export const ciHandlers: HandlerGroup = (probot, deps) => {
  const enqueue: Enqueue = (job) =>
    queueForDelivery(deps.scheduler, CI_JOB, job, { "data.key": job.key });

  probot.on("check_run.completed", async ({ payload }) => {
    const run = payload.check_run;
    const branch = run.check_suite?.head_branch;
    if (!payload.installation || !FAILING.has(run.conclusion ?? "") || !branch) return;
    await enqueue({
      key: `check_run:${run.id}`,
      installation_id: payload.installation.id,
      repo_id: String(payload.repository.id),
      repo_full_name: payload.repository.full_name,
      default_branch: payload.repository.default_branch,
      source: "check_run",
      check: {
        name: run.name,
        conclusion: run.conclusion ?? "failure",
        head_branch: branch,
        head_sha: run.head_sha,
        details_url: run.details_url ?? run.html_url ?? "",
        summary: clip(
          [run.output?.title, run.output?.summary, run.output?.text].filter(Boolean).join("\n\n"),
        ),
        workflow: null,
      },
      check_run_id: run.id,
      check_suite_id: run.check_suite?.id ?? null,
      workflow_run_id: null,
      workflow_id: null,
      actions: run.app?.slug === "github-actions",
      pr_number: run.pull_requests?.[0]?.number ?? null,
    });
  });

  probot.on("check_suite.completed", async ({ payload }) => {
    const suite = payload.check_suite;
    if (!payload.installation || !FAILING.has(suite.conclusion ?? "") || !suite.head_branch) return;
    await enqueue({
      key: `check_suite:${suite.id}`,
      installation_id: payload.installation.id,
      repo_id: String(payload.repository.id),
      repo_full_name: payload.repository.full_name,
      default_branch: payload.repository.default_branch,
      source: "check_suite",
      check: {
        name: suite.app?.name ?? "check suite",
        conclusion: suite.conclusion ?? "failure",
        head_branch: suite.head_branch,
        head_sha: suite.head_sha,
        details_url: suite.url ?? "",
        summary: "",
        workflow: null,
      },
      check_run_id: null,
      check_suite_id: suite.id,
      workflow_run_id: null,
      workflow_id: null,
      actions: suite.app?.slug === "github-actions",
      pr_number: suite.pull_requests?.[0]?.number ?? null,
    });
  });

  probot.on("workflow_run.completed", async ({ payload }) => {
    const run = payload.workflow_run;
    if (!payload.installation || !FAILING.has(run.conclusion ?? "") || !run.head_branch) return;
    // A run of a fork's branch: the branch is not in this repository, there is nothing to fix here.
    if (run.head_repository && run.head_repository.full_name !== payload.repository.full_name)
      return;
    await enqueue({
      key: `workflow_run:${run.id}:${run.run_attempt ?? 1}`,
      installation_id: payload.installation.id,
      repo_id: String(payload.repository.id),
      repo_full_name: payload.repository.full_name,
      default_branch: payload.repository.default_branch,
      source: "workflow_run",
      check: {
        name: run.name ?? payload.workflow?.name ?? "workflow",
        conclusion: run.conclusion ?? "failure",
        head_branch: run.head_branch,
        head_sha: run.head_sha,
        details_url: run.html_url,
        summary: clip(run.display_title ?? ""),
        workflow: payload.workflow?.name ?? run.name ?? null,
      },
      check_run_id: null,
      check_suite_id: run.check_suite_id ?? null,
      workflow_run_id: run.id,
      workflow_id: run.workflow_id,
      actions: true,
      pr_number: run.pull_requests?.[0]?.number ?? null,
    });
  });
};

function clip(text: string, max = 4000): string {
  return text.length <= max ? text : `${text.slice(0, max)}…`;
}

/** The repository's `ci_failure:` setting, read from its config file on the default branch. */
export interface RepoCiConfig {
  workflow?: string | undefined;
  branch?: string | undefined;
  auto_approve: boolean;
}

const repoCiSchema = z.union([
  z.boolean(),
  z.object({
    enabled: z.boolean().default(true),
    workflow: z.string().max(200).optional(),
    branch: z.string().max(200).optional(),
    auto_approve: z.boolean().default(false),
  }),
]);

/** Reads `ci_failure` from `.github/<slug>.yml` (or the default names); null when absent or off. */
async function repoCiConfig(
  deps: GithubHandlerDeps,
  octokit: InstallationOctokit,
  job: CiJob,
): Promise<RepoCiConfig | null> {
  for (const path of configNames(deps.github.slug)) {
    let text: string;
    try {
      const { data } = await octokit.rest.repos.getContent({
        ...ownerAndRepo(job.repo_full_name),
        path,
        ref: job.default_branch,
      });
      if (Array.isArray(data) || data.type !== "file" || !("content" in data)) continue;
      text = Buffer.from(data.content, "base64").toString("utf8");
    } catch (error) {
      if ((error as { status?: number }).status === 404) continue;
      throw error;
    }
    let doc: unknown;
    try {
      doc = await parseRepositoryYaml(text);
    } catch {
      return null;
    }
    const parsed = repoCiSchema.safeParse((doc as { ci_failure?: unknown } | null)?.ci_failure);
    if (!parsed.success || parsed.data === false) return null;
    if (parsed.data === true) return { auto_approve: false };
    if (!parsed.data.enabled) return null;
    return {
      workflow: parsed.data.workflow,
      branch: parsed.data.branch,
      auto_approve: parsed.data.auto_approve,
    };
  }
  return null;
}

function globMatches(glob: string | undefined, value: string): boolean {
  return !glob || picomatch.isMatch(value, glob, { dot: true });
}

/** The latest completed conclusion of the same check on the default branch, if any. */
async function baseConclusion(octokit: InstallationOctokit, job: CiJob): Promise<string | null> {
  const repo = ownerAndRepo(job.repo_full_name);
  if (job.workflow_id !== null) {
    const { data } = await octokit.rest.actions.listWorkflowRuns({
      ...repo,
      workflow_id: job.workflow_id,
      branch: job.default_branch,
      status: "completed",
      per_page: 1,
    });
    return data.workflow_runs[0]?.conclusion ?? null;
  }
  if (job.source === "check_run") {
    const { data } = await octokit.rest.checks.listForRef({
      ...repo,
      ref: job.default_branch,
      check_name: job.check.name,
      status: "completed",
      per_page: 1,
    });
    return data.check_runs[0]?.conclusion ?? null;
  }
  const { data } = await octokit.rest.checks.listSuitesForRef({
    ...repo,
    ref: job.default_branch,
    per_page: 20,
  });
  const same = data.check_suites.find(
    (s) => s.app?.name === job.check.name && s.status === "completed",
  );
  return same?.conclusion ?? null;
}

/** The end of the failing job's log (GitHub Actions only), trimmed and redacted. */
async function logExcerpt(octokit: InstallationOctokit, job: CiJob): Promise<string | null> {
  if (!job.actions) return null;
  const repo = ownerAndRepo(job.repo_full_name);
  let jobId = job.check_run_id;
  if (jobId === null && job.workflow_run_id !== null) {
    const { data } = await octokit.rest.actions.listJobsForWorkflowRun({
      ...repo,
      run_id: job.workflow_run_id,
      filter: "latest",
      per_page: 50,
    });
    jobId = data.jobs.find((j) => FAILING.has(j.conclusion ?? ""))?.id ?? null;
  }
  if (jobId === null) return null;
  const response = await octokit.rest.actions.downloadJobLogsForWorkflowRun({
    ...repo,
    job_id: jobId,
  });
  const text = typeof response.data === "string" ? response.data : String(response.data ?? "");
  return excerpt(text);
}

/** The last lines of a log, timestamps removed, within LOG_EXCERPT_CHARS. */
export function excerpt(log: string): string {
  const lines = log
    .replace(/\r\n?/g, "\n")
    .split("\n")
    .map((l) => l.replace(/^\d{4}-\d\d-\d\dT[\d:.]+Z\s?/, ""))
    .filter((l) => l.trim() !== "");
  const kept: string[] = [];
  let size = 0;
  for (let i = lines.length - 1; i >= 0 && kept.length < 120; i -= 1) {
    size += lines[i]!.length + 1;
    if (size > LOG_EXCERPT_CHARS) break;
    kept.unshift(lines[i]!);
  }
  return redactText(kept.join("\n"));
}

function fixDescription(job: CiJob, log: string | null): string {
  const { check } = job;
  return [
    `The CI check "${check.name}" failed (${check.conclusion}) on branch ${check.head_branch} at commit ${check.head_sha.slice(0, 12)}. Find the cause and fix the code so the check passes. Do not disable, skip or weaken the check or its tests.`,
    check.details_url ? `Details: ${check.details_url}` : "",
    check.summary ? `Summary reported by the check:\n${sanitizeUntrusted(check.summary)}` : "",
    log
      ? `End of the failing job's log:\n\`\`\`\n${log}\n\`\`\``
      : "The job's log was not available.",
  ]
    .filter(Boolean)
    .join("\n\n")
    .slice(0, 20_000);
}

/** The pull request a failure is reported on, when it has one. */
function threadOf(job: CiJob): Thread | undefined {
  return job.pr_number !== null
    ? {
        installation_id: job.installation_id,
        repo_full_name: job.repo_full_name,
        number: job.pr_number,
        is_pull_request: true,
      }
    : undefined;
}

/**
 * Whether the default branch fails the same check (then this branch did not cause it: the
 * thread is told, no fix task starts). Never on the default branch itself.
 */
async function failsOnDefaultBranch(
  octokit: InstallationOctokit,
  job: CiJob,
  thread: Thread | undefined,
  log: Logger,
): Promise<boolean> {
  if (job.check.head_branch === job.default_branch) return false;
  const base = await baseConclusion(octokit, job).catch(() => null);
  if (!base || !FAILING.has(base)) return false;
  log.info("CI failure ignored: the default branch fails the same check");
  if (thread)
    await reply(
      octokit,
      thread,
      `The check "${job.check.name}" failed here, but it fails on \`${job.default_branch}\` too, so this branch did not cause it. No fix task was started; fix \`${job.default_branch}\` first.`,
    );
  return true;
}

/**
 * The fix tasks of a failure: one from the repository's CI config (`config`), else those the
 * account's ci_failure automations start. Their ids.
 */
async function startFixTasks(
  deps: GithubHandlerDeps,
  workspace: WorkspaceRecord & { account_id: string },
  job: CiJob,
  config: RepoCiConfig | null,
  thread: Thread | undefined,
  logText: string | null,
): Promise<string[]> {
  const origin = { kind: "ci_failure", source: job.source, check: job.check };
  if (config) {
    const task = await createTask(deps.tasks, workspace.account_id, {
      workspace_id: workspace._id,
      repo_id: job.repo_id,
      description: fixDescription(job, logText),
      auto_approve: config.auto_approve,
      base_branch: job.check.head_branch,
      source: "ci_failure",
      origin,
      ...(thread ? { thread } : {}),
    });
    return [task._id];
  }
  const fired = await fireCiFailureAutomations(
    deps.tasks,
    {
      account_id: workspace.account_id,
      workspace_id: workspace._id,
      repo_id: job.repo_id,
      check: {
        ...job.check,
        summary: sanitizeUntrusted(
          `${job.check.summary}${logText ? `\n\nEnd of the failing job's log:\n${logText}` : ""}`,
        ),
      },
    },
    { base_branch: job.check.head_branch, ...(thread ? { thread } : {}) },
  );
  return fired.tasks_created;
}

/** The job that decides whether a failure gets a fix task, and creates it. */
export function ciJob(deps: GithubHandlerDeps): JobKind<CiJob> {
  const logger = deps.logger.child({ component: "github-ci" });
  return {
    ...CI_JOB,
    async run(job) {
      const log = logger.child({
        repo: job.repo_full_name,
        sha: job.check.head_sha.slice(0, 12),
        check: job.check.name,
      });
      const workspace = await workspaceOfInstallation(deps.models, job.installation_id);
      if (!usableWorkspace(workspace)) {
        log.info("CI failure ignored: the installation is not linked to an account");
        return;
      }
      if (!workspace.repos.some((r) => r.repo_id === job.repo_id)) {
        log.info("CI failure ignored: the repository is not part of the workspace");
        return;
      }
      // Several events report one failure (check run, suite, workflow run): after the first
      // started a fix, the others stop here without asking GitHub anything.
      const headMarker = ciFixMarker(job.repo_id, job.check.head_sha);
      if (await markerExists(deps.models, headMarker)) return;
      const octokit = await deps.client.octokit(job.installation_id);
      const config = await repoCiConfig(deps, octokit, job);
      const byConfig =
        config !== null &&
        globMatches(config.workflow, job.check.workflow ?? job.check.name) &&
        globMatches(config.branch, job.check.head_branch);
      const hasAutomations =
        !byConfig && (await hasCiFailureAutomation(deps.models, workspace.account_id, job.repo_id));
      if (!byConfig && !hasAutomations) {
        log.debug("CI failure ignored: the repository does not ask for fix tasks");
        return;
      }
      // One fix task per head commit, whichever of the failure events arrives first.
      if (!(await claimMarker(deps.models, headMarker))) return;
      // The service's own fix branch gets one fix attempt, not a loop of them.
      if (
        job.check.head_branch.startsWith(FIX_BRANCH_PREFIX) &&
        !(await claimMarker(deps.models, ciFixBranchMarker(job.repo_id, job.check.head_branch)))
      ) {
        log.info("CI failure ignored: this fix branch already had its fix attempt");
        return;
      }
      const thread = threadOf(job);
      if (await failsOnDefaultBranch(octokit, job, thread, log)) return;
      const logText = await logExcerpt(octokit, job).catch((error: unknown) => {
        log.warn({ err: error }, "could not read the failing job's log");
        return null;
      });
      let created: string[];
      try {
        created = await startFixTasks(
          deps,
          workspace,
          job,
          byConfig ? config : null,
          thread,
          logText,
        );
      } catch (error) {
        if (!isAppError(error) || error.status >= 500) throw error;
        log.info({ reason: error.message }, "CI fix task refused");
        if (thread)
          await reply(
            octokit,
            thread,
            `The check "${job.check.name}" failed, but no fix task could be started: ${error.message}`,
          );
        return;
      }
      if (created.length === 0) return;
      log.info({ tasks: created }, "CI fix task created");
      if (thread)
        await reply(
          octokit,
          thread,
          `The check "${job.check.name}" failed on \`${job.check.head_branch}\`; started fix task ${created.map((id) => `\`${id}\``).join(", ")}. The plan will be posted here.`,
        );
    },
  };
}
