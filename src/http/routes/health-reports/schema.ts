import { z } from "zod";
import { pageFields } from "../../paging.js";
import { HEALTH_REPORT_STATUSES } from "../../../domain/vocabulary.js";
import { opaqueId, timestamp } from "../../schemas.js";
import { METRIC_NAMES, type MetricName } from "../../../health/types.js";

/** A repository id, or its `owner/name` URL-encoded (`owner%2Fname`). */
export const repoPathParams = z.strictObject({
  repo_id: z
    .string()
    .trim()
    .min(1)
    .max(200)
    .regex(/^[A-Za-z0-9_.:-]+(\/[A-Za-z0-9_.-]+)?$/, "must be a repository id or owner/name")
    .describe("repo_id, or the repository's full name owner/name URL-encoded"),
});

export const reportPathParams = repoPathParams.extend({ report_id: opaqueId });

const workspaceId = opaqueId
  .optional()
  .describe("the workspace, when the repository is in several of the account's workspaces");

export const repoQuery = z.strictObject({ workspace_id: workspaceId });

export const historyQuery = z.strictObject({
  workspace_id: workspaceId,
  ...pageFields,
  before: opaqueId
    .optional()
    .describe("a report id: the page continues after it (older form of `cursor`)"),
});

const metric = z
  .object({
    score: z
      .number()
      .min(0)
      .max(100)
      .nullable()
      .describe("0..100; null when nothing could be scored"),
    summary: z.string(),
    details: z
      .record(z.string(), z.unknown())
      .describe("the figures behind the score; `reason` says why a metric is not measured"),
    measured: z
      .boolean()
      .describe("false when the figure is only estimated or unavailable (see details.reason)"),
  })
  .meta({ id: "HealthMetric" });

/* One entry per metric of health/types.ts: a new metric is in the API without an edit here. */
const metricShape = Object.fromEntries(METRIC_NAMES.map((name) => [name, metric])) as Record<
  MetricName,
  typeof metric
>;

export const healthReport = z
  .object({
    id: z.string(),
    repo_id: z.string(),
    workspace_id: z.string().describe("extension: the workspace the repository was scanned in"),
    commit_sha: z.string().nullable().describe("the commit scanned; null until cloned"),
    created_at: timestamp,
    started_at: timestamp.nullable().describe("extension"),
    finished_at: timestamp.nullable().describe("extension"),
    status: z.enum(HEALTH_REPORT_STATUSES),
    score: z.number().int().min(0).max(100).nullable().describe("null until completed"),
    grade: z.string().nullable().describe("A+ … F; null until completed"),
    metrics: z.object(metricShape).nullable().describe("null until completed"),
    weights: z
      .record(z.string(), z.number())
      .nullable()
      .describe("extension: the weight each scored metric had in `score`"),
    error: z.string().nullable().describe("extension: why a failed scan failed"),
  })
  .meta({ id: "HealthReport" });
