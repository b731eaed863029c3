/*
 * The health scan of one working copy: reads the files once, measures the six metrics
 * (docs/api.md, "The report"; coverage runs the repository's tests through the sandbox;
 * freshness, advisories and CI ask registries and GitHub over HTTP, bounded), and weighs them
 * into a score and a grade. The caller clones and removes the working copy.
 */
import { measureCiPassRate, type CiSource } from "./ci.js";
import { measureCoverage } from "./coverage.js";
import { measureDocumentation } from "./documentation.js";
import { readRepoFiles, type RepoFiles } from "./files.js";
import { collectAdvisories, measureFreshness, type AdvisoryResult } from "./freshness.js";
import { gradeFor, METRIC_WEIGHTS, overallScore } from "./grading.js";
import { readManifests } from "./manifests.js";
import { RegistryClient, type RegistryConfig, type Severity } from "./registry.js";
import { findDangerousCalls, findSecrets } from "./security.js";
import { measureTechDebt } from "./tech-debt.js";
import { clampScore, type MetricResult, type Metrics } from "./types.js";
import type { SandboxCache } from "../util/sandbox.js";

export interface ScanOptions {
  root: string;
  coverageTimeoutMs: number;
  registry: RegistryConfig;
  ci: CiSource;
  signal?: AbortSignal;
  /** The package cache of the scan's account and repository (util/sandbox-cache.ts). */
  cache?: SandboxCache;
}

export interface ScanResult {
  metrics: Metrics;
  score: number | null;
  grade: string | null;
  /** Extension: which weights the score used after leaving out metrics without a score. */
  weights: Record<string, number>;
}

/** Points one finding costs the security score, and the most a group of findings may cost. */
export const SECURITY_PENALTIES = {
  secret: 25,
  env_file: 15,
  secrets_cap: 60,
  dangerous_call: 10,
  dangerous_cap: 30,
  vulnerability: { critical: 25, high: 15, moderate: 8, low: 3, unknown: 8 } satisfies Record<
    Severity,
    number
  >,
  vulnerabilities_cap: 50,
} as const;

/** The security metric from the file findings and the advisory checks. */
export function securityMetric(repo: RepoFiles, advisories: AdvisoryResult): MetricResult {
  const { secrets, envFiles } = findSecrets(repo);
  const dangerous = findDangerousCalls(repo);
  const p = SECURITY_PENALTIES;
  const secretCost = Math.min(
    p.secrets_cap,
    p.secret * secrets.length + p.env_file * envFiles.length,
  );
  const dangerousCost = Math.min(p.dangerous_cap, p.dangerous_call * dangerous.length);
  const vulnerabilityCost = Math.min(
    p.vulnerabilities_cap,
    advisories.vulnerabilities.reduce((sum, v) => sum + p.vulnerability[v.severity], 0),
  );
  const score = clampScore(100 - secretCost - dangerousCost - vulnerabilityCost);
  const unavailable = advisories.checks.filter((c) => !c.available);
  const bySeverity: Record<string, number> = {};
  for (const v of advisories.vulnerabilities)
    bySeverity[v.severity] = (bySeverity[v.severity] ?? 0) + 1;
  const details: Record<string, unknown> = {
    secrets: { count: secrets.length, findings: secrets.slice(0, 50) },
    env_files: { count: envFiles.length, findings: envFiles.slice(0, 20) },
    dangerous_calls: { count: dangerous.length, findings: dangerous.slice(0, 50) },
    vulnerabilities: {
      count: advisories.vulnerabilities.length,
      by_severity: bySeverity,
      findings: advisories.vulnerabilities.slice(0, 50),
      sources: advisories.checks,
      unpinned_not_checked: advisories.unpinned,
    },
    penalties: {
      secrets: secretCost,
      dangerous_calls: dangerousCost,
      vulnerabilities: vulnerabilityCost,
    },
  };
  const advisoryText =
    advisories.checks.length === 0
      ? "no dependencies to check for advisories"
      : unavailable.length === advisories.checks.length
        ? "vulnerable dependencies unknown (advisories unavailable)"
        : `${advisories.vulnerabilities.length} known-vulnerable dependency version${advisories.vulnerabilities.length === 1 ? "" : "s"}`;
  const summary = `${secrets.length} committed secret${secrets.length === 1 ? "" : "s"}, ${envFiles.length} committed .env file${envFiles.length === 1 ? "" : "s"}, ${dangerous.length} dangerous call${dangerous.length === 1 ? "" : "s"}, ${advisoryText}.`;
  if (unavailable.length > 0) {
    details.reason = `advisories unavailable: ${unavailable.map((c) => `${c.ecosystem}: ${c.reason}`).join("; ")}`;
    return { score, summary, details, measured: false };
  }
  return { score, summary, details, measured: true };
}

/**
 * Measures a working copy. Throws only when the scan is aborted, or when its tests went past
 * TASK_DISK_LIMIT_MB (DiskBudgetError).
 */
export async function scanRepository(options: ScanOptions): Promise<ScanResult> {
  const repo = await readRepoFiles(options.root);
  options.signal?.throwIfAborted();
  const manifests = await readManifests(options.root, repo);
  const client = new RegistryClient(options.registry, options.signal);

  const techDebt = await measureTechDebt(repo);
  const documentation = await measureDocumentation(repo);
  // Network checks run while the tests do.
  const network = (async () => {
    const [freshness, advisories] = await Promise.all([
      measureFreshness(client, manifests),
      collectAdvisories(client, manifests),
    ]);
    return { freshness, advisories };
  })();
  const ci = measureCiPassRate(options.ci);
  const coverage = await measureCoverage(repo, {
    root: options.root,
    timeoutMs: options.coverageTimeoutMs,
    ...(options.signal ? { signal: options.signal } : {}),
    goproxy: options.registry.goproxyUrl,
    ...(options.cache ? { cache: options.cache } : {}),
  });
  const { freshness, advisories } = await network;
  options.signal?.throwIfAborted();

  const metrics: Metrics = {
    test_coverage: coverage,
    tech_debt: techDebt,
    security: securityMetric(repo, advisories),
    documentation,
    dependency_freshness: freshness,
    ci_pass_rate: await ci,
  };
  if (repo.truncated)
    for (const metric of [metrics.tech_debt, metrics.security, metrics.documentation])
      metric.details.truncated = `only part of the repository was read (${JSON.stringify(repo.skipped)})`;
  const score = overallScore(metrics);
  const used = Object.entries(metrics).filter(([, m]) => m.score !== null);
  const total = used.reduce((sum, [name]) => sum + METRIC_WEIGHTS[name as keyof Metrics], 0);
  const weights = Object.fromEntries(
    used.map(([name]) => [
      name,
      Math.round((METRIC_WEIGHTS[name as keyof Metrics] / total) * 1000) / 1000,
    ]),
  );
  return { metrics, score, grade: score === null ? null : gradeFor(score), weights };
}
