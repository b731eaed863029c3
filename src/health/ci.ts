/*
 * CI pass rate: the conclusions of the latest completed GitHub Actions workflow runs on the
 * default branch, or, when there are none, of the check runs on the branch's head commit
 * (other CI systems report there). GitHub repositories only.
 */
import { clampScore, unavailable, type MetricResult } from "./types.js";

/** How many recent runs count. */
export const CI_RUNS = 50;

/** The part of an installation Octokit the metric uses. */
export interface CiOctokit {
  request(route: string, parameters: Record<string, unknown>): Promise<{ data: unknown }>;
}

export type CiSource =
  | { kind: "github"; octokit: () => Promise<CiOctokit>; fullName: string; branch: string }
  | { kind: "none"; reason: string };

const PASSED = new Set(["success"]);
const FAILED = new Set(["failure", "timed_out", "startup_failure"]);

interface RunLike {
  conclusion?: string | null;
  name?: string | null;
  head_sha?: string | null;
  created_at?: string | null;
  started_at?: string | null;
}

function tally(runs: RunLike[]) {
  const counts: Record<string, number> = {};
  for (const run of runs) {
    const conclusion = run.conclusion ?? "none";
    counts[conclusion] = (counts[conclusion] ?? 0) + 1;
  }
  const passed = runs.filter((r) => PASSED.has(r.conclusion ?? "")).length;
  const failed = runs.filter((r) => FAILED.has(r.conclusion ?? "")).length;
  return { counts, passed, failed };
}

function describeError(error: unknown): string {
  const status = (error as { status?: unknown }).status;
  if (typeof status === "number") return `GitHub answered ${status}`;
  return "GitHub could not be reached";
}

/** The CI pass-rate metric. */
export async function measureCiPassRate(source: CiSource): Promise<MetricResult> {
  if (source.kind === "none") return unavailable("No CI history.", source.reason);
  const [owner, repo] = source.fullName.split("/");
  let octokit: CiOctokit;
  let runs: RunLike[];
  let origin: "workflow_runs" | "check_runs" = "workflow_runs";
  try {
    octokit = await source.octokit();
    const answer = await octokit.request("GET /repos/{owner}/{repo}/actions/runs", {
      owner,
      repo,
      branch: source.branch,
      status: "completed",
      per_page: CI_RUNS,
    });
    runs = ((answer.data as { workflow_runs?: RunLike[] }).workflow_runs ?? []).slice(0, CI_RUNS);
    if (runs.length === 0) {
      origin = "check_runs";
      const checks = await octokit.request("GET /repos/{owner}/{repo}/commits/{ref}/check-runs", {
        owner,
        repo,
        ref: source.branch,
        status: "completed",
        per_page: 100,
      });
      runs = (checks.data as { check_runs?: RunLike[] }).check_runs ?? [];
    }
  } catch (error) {
    return unavailable(
      "CI history could not be read.",
      `${describeError(error)} when listing CI runs`,
    );
  }
  const { counts, passed, failed } = tally(runs);
  const decisive = passed + failed;
  const details = {
    source: origin,
    branch: source.branch,
    runs_considered: runs.length,
    passed,
    failed,
    conclusions: counts,
    recent: runs.slice(0, 10).map((r) => ({
      name: r.name ?? null,
      conclusion: r.conclusion ?? null,
      head_sha: r.head_sha ?? null,
      at: r.created_at ?? r.started_at ?? null,
    })),
  };
  if (decisive === 0)
    return unavailable(
      `No passed or failed CI runs on ${source.branch}.`,
      runs.length === 0
        ? `no completed workflow runs or check runs on ${source.branch}`
        : `the ${runs.length} completed runs on ${source.branch} were all cancelled, skipped or neutral`,
      details,
    );
  const rate = (100 * passed) / decisive;
  return {
    score: clampScore(rate),
    summary: `${passed} of ${decisive} recent ${origin === "workflow_runs" ? "workflow runs" : "check runs"} on ${source.branch} passed (${Math.round(rate * 10) / 10}%).`,
    details,
    measured: true,
  };
}
