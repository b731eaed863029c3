/*
 * Security: committed secrets and .env files, dangerous calls (health/security.ts) and
 * known-vulnerable dependency versions (health/freshness.ts collectAdvisories), each finding
 * costing points off 100, each group capped.
 */
import { collectAdvisories, type AdvisoryResult } from "../freshness.js";
import type { RepoFiles } from "../files.js";
import type { Severity } from "../registry.js";
import { findDangerousCalls, findSecrets } from "../security.js";
import { clampScore, type MetricResult } from "../types.js";
import { noteTruncation, type HealthMetric } from "./types.js";

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

export const security: HealthMetric<"security"> = {
  name: "security",
  weight: 25,
  work: "lookup",
  measure: async (ctx) =>
    noteTruncation(
      ctx.files,
      securityMetric(ctx.files, await collectAdvisories(ctx.registry, ctx.manifests)),
    ),
};
