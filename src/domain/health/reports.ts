import { afterFilter, type SortKey } from "../../util/paging.js";
import { claimMarker, markerKind } from "../../durable/markers.js";
import {
  collectionOf,
  type HealthReportStatus,
  type Models,
  type RepositoryDoc,
} from "../../db/models.js";
import { errors } from "../../errors.js";
import type { Metrics } from "../../health/types.js";
import { newId } from "../../util/ids.js";
import { redactText } from "../../util/redact.js";
import { listWorkspaces, resolveRepo, type WorkspaceRecord } from "../workspaces/workspaces.js";

/** A health report's ending. */
export const healthEndMarker = markerKind("health-end", "health-end", (reportId: string) => [
  reportId,
]);

/** The driver collections this module uses, typed by their records (db/models.ts). */
const healthReportsOf = (models: Models) => collectionOf<HealthReportRecord>(models.HealthReport);

/*
 * Health reports (docs/api.md, "Health reports and analytics"): a scan is requested through the
 * API (a `pending` report and a job), measured by a worker (domain/health/scan.ts
 * runHealthScan, which alone calls the transitions below) and ended once, `completed` or
 * `failed`, by whoever gets there first (a unique marker, atomic on FerretDB too). A sweep fails reports whose worker went away, so none stays `pending` or
 * `running` for ever.
 */

export interface HealthReportRecord {
  _id: string;
  account_id: string;
  workspace_id: string;
  repo_id: string;
  status: HealthReportStatus;
  commit_sha: string | null;
  score: number | null;
  grade: string | null;
  metrics: Metrics | null;
  weights: Record<string, number> | null;
  error: string | null;
  attempts: number;
  heartbeat_at: Date | null;
  started_at: Date | null;
  finished_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

export interface HealthReportView {
  id: string;
  repo_id: string;
  workspace_id: string;
  commit_sha: string | null;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  status: HealthReportStatus;
  score: number | null;
  grade: string | null;
  metrics: Metrics | null;
  weights: Record<string, number> | null;
  error: string | null;
}

const FINISHED: HealthReportStatus[] = ["completed", "failed"];

/** The report as the API shows it. */
export function toHealthReportView(report: HealthReportRecord): HealthReportView {
  return {
    id: report._id,
    repo_id: report.repo_id,
    workspace_id: report.workspace_id,
    commit_sha: report.commit_sha ?? null,
    created_at: report.created_at.toISOString(),
    started_at: report.started_at?.toISOString() ?? null,
    finished_at: report.finished_at?.toISOString() ?? null,
    status: report.status,
    score: report.score ?? null,
    grade: report.grade ?? null,
    metrics: report.metrics ?? null,
    weights: report.weights ?? null,
    error: report.error ?? null,
  };
}

/**
 * The account's repository `repoRef` (its id, or `owner/name`). Without `workspaceId` every
 * workspace of the account is searched; a repository found in several of them needs
 * `workspace_id` (400). Not the account's: 404.
 */
export async function findAccountRepo(
  models: Models,
  accountId: string,
  repoRef: string,
  workspaceId?: string,
): Promise<{ workspace: WorkspaceRecord; repo: RepositoryDoc }> {
  if (workspaceId) return resolveRepo(models, accountId, workspaceId, repoRef);
  const ref = repoRef.toLowerCase();
  const matches: Array<{ workspace: WorkspaceRecord; repo: RepositoryDoc }> = [];
  for (const workspace of await listWorkspaces(models, accountId)) {
    const repo = workspace.repos.find(
      (r) => r.repo_id === repoRef || r.full_name.toLowerCase() === ref,
    );
    if (repo) matches.push({ workspace, repo });
  }
  if (matches.length === 0) throw errors.notFound("repository");
  if (matches.length > 1)
    throw errors.validation(
      [
        {
          path: "query.workspace_id",
          message: `The repository is in ${matches.length} workspaces (${matches.map((m) => m.workspace._id).join(", ")}); say which with workspace_id.`,
        },
      ],
      "The repository is in several workspaces.",
    );
  return matches[0]!;
}

/** How long a pending or running scan counts as under way for a repeated request. */
const SCAN_UNDER_WAY_MS = 60 * 60_000;

/** How scans are queued (jobs/health-scan.ts) and refused while DATA_DIR is nearly full. */
export interface HealthScans {
  enqueue(reportId: string): Promise<void>;
  /** 503 `insufficient_storage` while DATA_DIR is nearly full (domain/storage.ts). */
  checkStorage(): Promise<void>;
}

/**
 * Requests a scan: a `pending` report and its job. A scan of the same repository already
 * pending or running is answered instead of queueing a second one. `scans.checkStorage`
 * throws 503 `insufficient_storage` when DATA_DIR is nearly full (domain/storage.ts): then
 * nothing is created.
 */
export async function requestScan(
  models: Models,
  accountId: string,
  input: { repo_id: string; workspace_id?: string | undefined },
  scans: HealthScans,
  now = new Date(),
): Promise<HealthReportRecord> {
  const enqueue = (id: string) => scans.enqueue(id);
  const { workspace, repo } = await findAccountRepo(
    models,
    accountId,
    input.repo_id,
    input.workspace_id,
  );
  const underWay = (await healthReportsOf(models).findOne(
    {
      account_id: accountId,
      workspace_id: workspace._id,
      repo_id: repo.repo_id,
      status: { $in: ["pending", "running"] },
      created_at: { $gte: new Date(now.getTime() - SCAN_UNDER_WAY_MS) },
    },
    { sort: { created_at: -1 } },
  )) as HealthReportRecord | null;
  if (underWay) {
    // Its job may be lost (a crash between insert and enqueue): queueing again is idempotent.
    await enqueue(underWay._id);
    return underWay;
  }
  await scans.checkStorage();
  const doc: HealthReportRecord = {
    _id: newId("hr"),
    account_id: accountId,
    workspace_id: workspace._id,
    repo_id: repo.repo_id,
    status: "pending",
    commit_sha: null,
    score: null,
    grade: null,
    metrics: null,
    weights: null,
    error: null,
    attempts: 0,
    heartbeat_at: null,
    started_at: null,
    finished_at: null,
    created_at: now,
    updated_at: now,
  };
  await healthReportsOf(models).insertOne(doc);
  try {
    await enqueue(doc._id);
  } catch (error) {
    await finishReport(models, doc._id, {
      status: "failed",
      error: "The scan could not be queued; request it again.",
    });
    throw error;
  }
  return doc;
}

async function reportsOf(
  models: Models,
  accountId: string,
  repoRef: string,
  workspaceId: string | undefined,
): Promise<{ workspace_id: string; repo_id: string }> {
  const { workspace, repo } = await findAccountRepo(models, accountId, repoRef, workspaceId);
  return { workspace_id: workspace._id, repo_id: repo.repo_id };
}

/** The latest completed report of the repository; 404 when there is none. */
export async function latestReport(
  models: Models,
  accountId: string,
  repoRef: string,
  workspaceId?: string,
): Promise<HealthReportRecord> {
  const where = await reportsOf(models, accountId, repoRef, workspaceId);
  const doc = await healthReportsOf(models).findOne(
    { account_id: accountId, ...where, status: "completed" },
    { sort: { created_at: -1, _id: -1 } },
  );
  if (!doc) throw errors.notFound("finished health report for this repository");
  return doc;
}

/** Finished reports (completed and failed) of the repository, newest first. */
export async function reportHistory(
  models: Models,
  accountId: string,
  repoRef: string,
  options: {
    workspace_id?: string | undefined;
    limit: number;
    before?: string | undefined;
    after?: SortKey | undefined;
  },
): Promise<HealthReportRecord[]> {
  const where = await reportsOf(models, accountId, repoRef, options.workspace_id);
  const query: Record<string, unknown> = {
    account_id: accountId,
    ...where,
    status: { $in: FINISHED },
  };
  if (options.after) {
    Object.assign(query, afterFilter(options.after));
  } else if (options.before) {
    const cursor = await healthReportsOf(models).findOne(
      { _id: options.before },
      { projection: { account_id: 1, created_at: 1 } },
    );
    if (!cursor || cursor.account_id !== accountId)
      throw errors.validation([
        { path: "query.before", message: "No such report on this account." },
      ]);
    query.$or = [
      { created_at: { $lt: cursor.created_at } },
      { created_at: cursor.created_at, _id: { $lt: options.before } },
    ];
  }
  const docs = await healthReportsOf(models)
    .find(query)
    .sort({ created_at: -1, _id: -1 })
    .limit(options.limit)
    .toArray();
  return docs;
}

/** One report of the repository in any status; 404 for another repository's or account's. */
export async function getReport(
  models: Models,
  accountId: string,
  repoRef: string,
  reportId: string,
  workspaceId?: string,
): Promise<HealthReportRecord> {
  const where = await reportsOf(models, accountId, repoRef, workspaceId);
  const doc = (await healthReportsOf(models).findOne({
    _id: reportId,
  })) as HealthReportRecord | null;
  if (!doc || doc.account_id !== accountId || doc.repo_id !== where.repo_id)
    throw errors.notFound("health report");
  return doc;
}

/** The report a scan job is to work on, or null when it is unknown or has already ended. */
export async function openReport(
  models: Models,
  reportId: string,
): Promise<HealthReportRecord | null> {
  const report = await healthReportsOf(models).findOne({ _id: reportId });
  return report && report.status !== "completed" && report.status !== "failed" ? report : null;
}

/** Marks a report running for a scan attempt (`attempt` counts from 0). */
export async function startReport(
  models: Models,
  report: HealthReportRecord,
  attempt: number,
  now = new Date(),
): Promise<void> {
  await healthReportsOf(models).updateOne(
    { _id: report._id, status: { $in: ["pending", "running"] } },
    {
      $set: {
        status: "running",
        started_at: report.started_at ?? now,
        heartbeat_at: now,
        attempts: attempt + 1,
        updated_at: now,
      },
    },
  );
}

/** A running scan's heartbeat: the sweep fails reports whose heartbeat stops. */
export async function beatReport(models: Models, reportId: string): Promise<void> {
  await healthReportsOf(models).updateOne(
    { _id: reportId, status: "running" },
    { $set: { heartbeat_at: new Date() } },
  );
}

/** The commit the scan reads, recorded as soon as the clone has it. */
export async function recordReportCommit(
  models: Models,
  reportId: string,
  commit: string,
): Promise<void> {
  await healthReportsOf(models).updateOne({ _id: reportId }, { $set: { commit_sha: commit } });
}

export type ReportOutcome =
  | {
      status: "completed";
      commit_sha: string;
      score: number | null;
      grade: string | null;
      metrics: Metrics;
      weights: Record<string, number>;
    }
  | { status: "failed"; error: string; commit_sha?: string | null };

/**
 * Ends a report once: the first caller wins a unique marker, then writes the outcome.
 * Returns false when the report had already ended.
 */
export async function finishReport(
  models: Models,
  reportId: string,
  outcome: ReportOutcome,
): Promise<boolean> {
  const ended = await claimMarker(models, healthEndMarker(reportId), {
    status: outcome.status,
  });
  if (!ended) return false;
  const now = new Date();
  const set: Record<string, unknown> =
    outcome.status === "completed"
      ? { ...outcome, error: null }
      : {
          status: "failed",
          error: redactText(outcome.error).slice(0, 2000),
          ...(outcome.commit_sha ? { commit_sha: outcome.commit_sha } : {}),
        };
  await healthReportsOf(models).updateOne(
    { _id: reportId },
    { $set: { ...set, finished_at: now, updated_at: now } },
  );
  return true;
}

/**
 * Fails reports whose scan stopped: `running` without a heartbeat for `staleMs` (the worker
 * died and none took the job over), or `pending` for longer than `pendingMaxMs`. Pending
 * reports younger than that are queued again (idempotent), in case their job was lost.
 */
export async function sweepHealthReports(
  models: Models,
  options: {
    staleMs: number;
    pendingMaxMs: number;
    requeue(reportId: string): Promise<void>;
    now?: Date;
  },
): Promise<{ failed: string[]; requeued: string[] }> {
  const now = (options.now ?? new Date()).getTime();
  const open = (await healthReportsOf(models)
    .find(
      { status: { $in: ["pending", "running"] } },
      { projection: { status: 1, heartbeat_at: 1, created_at: 1 } },
    )
    .limit(1000)
    .toArray()) satisfies Array<
    Pick<HealthReportRecord, "_id" | "status" | "heartbeat_at" | "created_at">
  >;
  const failed: string[] = [];
  const requeued: string[] = [];
  const fail = async (id: string, error: string) => {
    if (!(await finishReport(models, id, { status: "failed", error }))) {
      // Ended, but the process ending it stopped before writing the outcome.
      const at = new Date(now);
      await healthReportsOf(models).updateOne(
        { _id: id, status: { $in: ["pending", "running"] } },
        {
          $set: {
            status: "failed",
            error: "The scan ended but its result was not stored; request a new scan.",
            finished_at: at,
            updated_at: at,
          },
        },
      );
    }
    failed.push(id);
  };
  for (const report of open) {
    if (report.status === "running") {
      const beat = (report.heartbeat_at ?? report.created_at).getTime();
      if (now - beat <= options.staleMs) continue;
      await fail(
        report._id,
        `The worker running this scan stopped (no sign of it for ${Math.round(options.staleMs / 1000)} s) and no other worker took it over; request a new scan.`,
      );
      continue;
    }
    if (now - report.created_at.getTime() > options.pendingMaxMs) {
      await fail(
        report._id,
        `No worker started this scan within ${Math.round(options.pendingMaxMs / 60_000)} minutes (RUN_WORKERS, HEALTH_SCAN_CONCURRENCY); request a new scan.`,
      );
      continue;
    }
    await options.requeue(report._id);
    requeued.push(report._id);
  }
  return { failed, requeued };
}
