import { prepareWorkdir, removeWorkdir } from "../../workcopy/volume.js";
import { StageError } from "../../util/stage-error.js";
import path from "node:path";
import type { Config } from "../../config/env.js";
import type { Models } from "../../db/models.js";
import { AppError } from "../../errors.js";
import type { GithubClient } from "../../github-api/client.js";
import type { CiSource } from "../../health/ci.js";
import { scanRepository } from "../../health/scanner.js";
import { runLeased } from "../../durable/lease.js";
import { GitError, runGit, shallowClone } from "../../util/git.js";
import type { Logger } from "../../util/logger.js";
import { redactText } from "../../util/redact.js";
import { remoteGitArgs, RemoteUrlError } from "../../util/remote-url.js";
import {
  beatReport,
  finishReport,
  openReport,
  recordReportCommit,
  startReport,
  type HealthReportRecord,
} from "./reports.js";
import { recordDefaultBranch } from "../workspaces/linking.js";
import { healthLease } from "../../durable/lease.js";
import { resolveRepo } from "../workspaces/workspaces.js";
import { runSetup, setupEnv } from "../../verify/setup.js";

/*
 * A health scan from start to end (docs/api.md, "How scans run"), the state machine of a
 * report: pending → running (a lease per run) → the clone → the metrics (health/scanner.ts) →
 * completed or failed → the clone removed. The job door (jobs/health-scan.ts) only parses its
 * payload and calls runHealthScan. What keeps a report from staying `pending`/`running`: a
 * lease per run (a unique insert, kept alive by a heartbeat that also touches Agenda's lock),
 * so a run whose worker died is taken over after the lock lifetime, at most MAX_ATTEMPTS
 * times; HEALTH_SCAN_TIMEOUT_S bounds a run; and the sweep job fails what no worker finishes
 * (reports.ts sweepHealthReports).
 */

/** Runs of one scan (a worker dying mid-scan counts) before the report fails. */
export const MAX_ATTEMPTS = 2;

/** A failure with the sentence the report's `error` should say. */
export class ScanError extends Error {
  override name = "ScanError";
}

export interface HealthScanDeps {
  config: Config;
  models: Models;
  logger: Logger;
  /** The App's clients; `configured: false` without an App (GitHub repositories then fail). */
  github: GithubClient;
}

/** The readable `error` of a failed scan. */
export function describeScanFailure(error: unknown, timedOut: boolean, timeoutMs: number): string {
  let message: string;
  if (timedOut)
    message = `The scan did not finish within ${Math.round(timeoutMs / 1000)} s (HEALTH_SCAN_TIMEOUT_S).`;
  else if (error instanceof ScanError) message = error.message;
  // Reported on purpose, e.g. its tests went past TASK_DISK_LIMIT_MB (sandbox/disk.ts).
  else if (error instanceof StageError) message = error.message;
  else if (error instanceof GitError)
    message = `git failed while cloning the repository: ${error.stderr || error.message}`;
  else message = "An internal error stopped the scan; the service log has the details.";
  return redactText(message).slice(0, 2000);
}

/**
 * Where the report's repository is cloned from: its URL (the clone-URL policy checked again,
 * or an installation token URL), the branch, the git options and the CI source.
 */
async function cloneSource(deps: HealthScanDeps, report: HealthReportRecord) {
  const { config, models } = deps;
  let found;
  try {
    found = await resolveRepo(models, report.account_id, report.workspace_id, report.repo_id);
  } catch (error) {
    if (error instanceof AppError && error.status === 404)
      throw new ScanError(
        `The repository ${report.repo_id} is no longer part of workspace ${report.workspace_id}.`,
      );
    throw error;
  }
  const { workspace, repo } = found;
  // Unknown until a first clone (installation events do not carry it): the clone then
  // takes the remote's default branch, and the CI metric asks about the branch it found.
  const branch = repo.default_branch || null;
  const installationId = workspace.github?.installation_id;
  if (workspace.kind !== "github") {
    const ci: CiSource = { kind: "none", reason: "not a GitHub repository" };
    // The clone-URL policy again at clone time (the name may resolve elsewhere now).
    let gitConfig: string[];
    try {
      gitConfig = await remoteGitArgs(repo.clone_url, config.allowLocalRepos);
    } catch (error) {
      if (error instanceof RemoteUrlError)
        throw new ScanError(
          `The clone URL of ${repo.full_name} is not allowed (${error.message}). Only https://, ssh:// and user@host:path remotes on public hosts can be used.`,
        );
      throw error;
    }
    return { url: repo.clone_url, branch, ci, gitConfig };
  }
  const github = deps.github;
  if (!github.configured || installationId == null)
    throw new ScanError(
      "This repository belongs to a GitHub App installation, but the GitHub App is not configured on this worker (APP_ID, PRIVATE_KEY).",
    );
  const ci: CiSource = {
    kind: "github",
    octokit: () => github.octokit(installationId),
    fullName: repo.full_name,
    branch: branch ?? "",
  };
  return {
    url: await github.cloneUrl(installationId, repo.clone_url),
    branch,
    ci,
    gitConfig: [] as string[],
  };
}

/**
 * Runs the scan of a report to its end (a report already ended or unknown is left alone);
 * `touch` keeps the job's lock alive with each heartbeat.
 */
export async function runHealthScan(
  deps: HealthScanDeps,
  reportId: string,
  touch: () => Promise<void>,
): Promise<void> {
  const { config, models } = deps;
  const ttlMs = config.jobs.lockLifetimeMs;
  const logger = deps.logger.child({ component: "health-scan", report: reportId });
  const report = await openReport(models, reportId);
  if (!report) return;
  const result = await runLeased(
    models,
    {
      attempt: (attempt) => healthLease(report._id, attempt),
      ttlMs,
      maxAttempts: MAX_ATTEMPTS,
      beat: async () => {
        await beatReport(models, report._id);
        await touch();
      },
      onBeatError: (error) => logger.warn({ err: error }, "heartbeat failed"),
      timeout: { ms: config.health.scanTimeoutMs, reason: "the scan timed out" },
    },
    async (run) => {
      await startReport(models, report, run.lease.attempt);
      const workdir = path.join(config.dataDir, "health", `${report._id}-${run.lease.attempt}`);
      let commit: string | null = null;
      const started = performance.now();
      try {
        const source = await cloneSource(deps, report);
        // A clone left by an earlier run whose worker died on this machine goes too.
        for (let attempt = 0; attempt <= run.lease.attempt; attempt++)
          await removeWorkdir(path.join(config.dataDir, "health", `${report._id}-${attempt}`));
        // On a volume of TASK_DISK_LIMIT_MB where the host allows it (workcopy/volume.ts).
        await prepareWorkdir(workdir, config.sandbox.diskLimitMb, (reason) =>
          logger.warn(
            { reason },
            "no volume for the scan's clone; the disk watcher alone keeps the budget",
          ),
        );
        await shallowClone(source.url, source.branch, workdir, {
          config: source.gitConfig,
          timeoutMs: config.pipeline.commandTimeoutS * 1000,
          signal: run.signal,
        });
        commit = (await runGit(["rev-parse", "HEAD"], { cwd: workdir })).trim();
        if (!source.branch) {
          // No branch known: the clone followed the remote's HEAD; remember what it found.
          const found = (
            await runGit(["symbolic-ref", "--short", "HEAD"], { cwd: workdir })
          ).trim();
          if (source.ci.kind === "github") source.ci.branch = found;
          await recordDefaultBranch(models, report.workspace_id, report.repo_id, found).catch(
            (error: unknown) => logger.warn({ err: error }, "could not record the default branch"),
          );
        }
        await recordReportCommit(models, report._id, commit);
        // The same setup step as a task's (verify/setup.ts): dependencies through the
        // registries' allowlist, from the account's package cache when it has them, so
        // coverage is measured on repositories with dependencies.
        const owner = {
          account: report.account_id,
          repo: `${report.workspace_id}/${report.repo_id}`,
        };
        const setup = await runSetup({
          workdir,
          owner,
          allow: config.sandbox.setupAllow,
          timeoutMs: config.health.coverageTimeoutMs,
          signal: run.signal,
          env: setupEnv({
            goproxyUrl: config.health.registry.goproxyUrl,
            pipIndexUrl: config.sandbox.pipIndexUrl,
          }),
          subject: "scan",
          log: (message) => logger.info({ setup: true }, message),
        });
        if (!setup.ok) logger.warn({ error: setup.error }, "health scan: the setup step failed");
        const result = await scanRepository({
          root: workdir,
          config: config.health,
          ci: source.ci,
          logger,
          signal: run.signal,
          // The entry the setup step used, read-only, as a task's later commands get it.
          ...(setup.cache ? { cache: setup.cache } : {}),
          ...(setup.ok ? {} : { setupFailure: setup.error ?? "the setup step failed" }),
        });
        await finishReport(models, report._id, {
          status: "completed",
          commit_sha: commit,
          score: result.score,
          grade: result.grade,
          metrics: result.metrics,
          weights: result.weights,
        });
        logger.info(
          { score: result.score, ms: Math.round(performance.now() - started) },
          "health scan finished",
        );
      } catch (error) {
        const message = describeScanFailure(error, run.signal.aborted, config.health.scanTimeoutMs);
        logger.warn({ err: error }, "health scan failed");
        await finishReport(models, report._id, {
          status: "failed",
          error: message,
          commit_sha: commit,
        });
      } finally {
        await removeWorkdir(workdir).catch(() => undefined);
      }
    },
  );
  if (result === "exhausted")
    await finishReport(models, report._id, {
      status: "failed",
      error: `The worker running this scan stopped ${MAX_ATTEMPTS} times before finishing it; the workers' logs say why.`,
    });
}
