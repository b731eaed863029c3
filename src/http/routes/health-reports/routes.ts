import { z } from "zod";
import {
  getReport,
  latestReport,
  reportHistory,
  requestScan,
  toHealthReportView,
  type HealthReportView,
} from "../../../domain/health/reports.js";
import { route, type AnyRoute } from "../../route.js";
import type { HttpDeps } from "../../types.js";
import {
  healthReport,
  historyQuery,
  repoPathParams,
  repoQuery,
  reportPathParams,
} from "./schema.js";

function scansOf(deps: HttpDeps) {
  return deps.healthScans;
}

export const healthReportRoutes: AnyRoute[] = [
  route({
    method: "post",
    path: "/health-reports/:repo_id/scan",
    operationId: "scanRepository",
    tag: "health",
    summary: "Scan a repository's health",
    description:
      "Queues a health scan of one of the account's repositories and answers at once with the pending report; a worker clones the default branch, measures the six metrics and completes the report (or fails it with `error`). A scan of the repository already pending or running is answered instead of a second one. `workspace_id` (query) chooses the workspace when the repository is in several.",
    auth: "key",
    params: repoPathParams,
    query: repoQuery,
    status: 202,
    response: { description: "The pending report", schema: healthReport },
    errors: [404, 503],
    // 202: the report to poll until it completes or fails.
    location: (r: HealthReportView) =>
      `/health-reports/${encodeURIComponent(r.repo_id)}/scans/${r.id}?workspace_id=${encodeURIComponent(r.workspace_id)}`,
    async handler(_ctx, { params, query, principal, deps }) {
      const scans = scansOf(deps);
      const report = await requestScan(
        deps.models,
        principal.accountId,
        { repo_id: params.repo_id, workspace_id: query.workspace_id },
        scans,
      );
      return toHealthReportView(report);
    },
  }),
  route({
    method: "get",
    path: "/health-reports/:repo_id",
    operationId: "getLatestHealthReport",
    tag: "health",
    summary: "The latest completed health report of a repository",
    description: "404 when the repository has no completed report yet.",
    auth: "key",
    params: repoPathParams,
    query: repoQuery,
    status: 200,
    response: { description: "The report", schema: healthReport },
    errors: [404],
    async handler(_ctx, { params, query, principal, deps }) {
      return toHealthReportView(
        await latestReport(deps.models, principal.accountId, params.repo_id, query.workspace_id),
      );
    },
  }),
  route({
    method: "get",
    path: "/health-reports/:repo_id/history",
    operationId: "listHealthReports",
    tag: "health",
    summary: "Finished health reports of a repository, newest first",
    description:
      "Completed and failed reports, newest first; paged (see Paging), `before` (the last id of the previous page) still works.",
    auth: "key",
    params: repoPathParams,
    query: historyQuery,
    status: 200,
    response: { description: "Reports", schema: z.array(healthReport) },
    errors: [404],
    page: { key: (r: HealthReportView) => [r.created_at, r.id] },
    async handler(_ctx, { params, query, principal, deps, page }) {
      const filter = { ...query, limit: page.limit + 1, after: page.after };
      const reports = await reportHistory(deps.models, principal.accountId, params.repo_id, filter);
      return reports.map(toHealthReportView);
    },
  }),
  route({
    method: "get",
    path: "/health-reports/:repo_id/scans/:report_id",
    operationId: "getHealthReport",
    tag: "health",
    summary: "One health report in any status (extension)",
    description: "For following a scan after POST …/scan: pending, running, completed or failed.",
    auth: "key",
    params: reportPathParams,
    query: repoQuery,
    status: 200,
    response: { description: "The report", schema: healthReport },
    errors: [404],
    async handler(_ctx, { params, query, principal, deps }) {
      return toHealthReportView(
        await getReport(
          deps.models,
          principal.accountId,
          params.repo_id,
          params.report_id,
          query.workspace_id,
        ),
      );
    },
  }),
];
