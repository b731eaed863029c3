/*
 * Dependency freshness (declared versions against each registry's latest) and known
 * vulnerabilities of the declared or locked versions (npm's advisories, OSV).
 */
import { mapConcurrently } from "../util/concurrency.js";
import semver from "semver";
import { ECOSYSTEMS, type ManifestReader } from "../ecosystems/index.js";
import type { Dependency, Ecosystem, Manifests } from "./manifests.js";
import {
  npmAdvisories,
  osvAdvisories,
  type AdvisoryCheck,
  type RegistryClient,
  type Vulnerability,
} from "./registry.js";
import { clampScore, type MetricResult } from "./types.js";

export type FreshnessStatus = "up_to_date" | "outdated" | "unknown";

export interface DependencyFreshness {
  ecosystem: Ecosystem;
  name: string;
  declared: string;
  latest: string | null;
  status: FreshnessStatus;
  majors_behind: number | null;
  score: number | null;
  error?: string;
}

/** The points one dependency earns: 100 when the declared range admits the latest. */
export function dependencyPoints(status: FreshnessStatus, majorsBehind: number): number {
  if (status === "up_to_date") return 100;
  if (majorsBehind <= 0) return 80;
  if (majorsBehind === 1) return 50;
  if (majorsBehind === 2) return 25;
  return 0;
}

/** The manifest readers of the registered ecosystems, one per package registry. */
const READERS = ECOSYSTEMS.flatMap((e): ManifestReader[] => (e.manifests ? [e.manifests] : []));

/** Normalises a registry version to semver, as its ecosystem reads it (PyPI's are PEP 440). */
function asSemver(ecosystem: Ecosystem, version: string): string | null {
  const reader = READERS.find((r) => r.registry === ecosystem);
  return reader ? reader.toSemver(version) : null;
}

/**
 * Major versions between the lowest version a range admits and the latest. Under 1.0.0 a
 * new minor is breaking, so it counts as a major.
 */
export function majorsBehind(range: string, latest: string): number {
  const floor = semver.minVersion(range);
  if (!floor) return 0;
  const from = floor.major;
  const to = semver.major(latest);
  if (to > from) return to - from;
  if (from === 0 && to === 0 && semver.minor(latest) > floor.minor) return 1;
  return 0;
}

/** Compares one dependency with the registry's latest version. */
export function compareWithLatest(dep: Dependency, latestRaw: string): DependencyFreshness {
  const base = { ecosystem: dep.ecosystem, name: dep.name, declared: dep.declared };
  const latest = asSemver(dep.ecosystem, latestRaw);
  if (!latest || dep.range === null)
    return {
      ...base,
      latest: latestRaw,
      status: "unknown",
      majors_behind: null,
      score: null,
      error: "version not comparable",
    };
  // A pre-release latest (rare on "latest") is compared by its release numbers.
  const release = `${semver.major(latest)}.${semver.minor(latest)}.${semver.patch(latest)}`;
  const upToDate =
    semver.satisfies(release, dep.range, { includePrerelease: true }) ||
    (semver.minVersion(dep.range) !== null && semver.gte(semver.minVersion(dep.range)!, release));
  const behind = upToDate ? 0 : majorsBehind(dep.range, release);
  const status: FreshnessStatus = upToDate ? "up_to_date" : "outdated";
  return {
    ...base,
    latest: latestRaw,
    status,
    majors_behind: behind,
    score: dependencyPoints(status, behind),
  };
}

/** The dependency-freshness metric: every declared dependency against its registry. */
export async function measureFreshness(
  client: RegistryClient,
  manifests: Manifests,
): Promise<MetricResult> {
  const deps = manifests.dependencies;
  const skipped = manifests.skipped;
  if (deps.length === 0)
    return {
      score: null,
      summary: "No registry dependencies declared; freshness not scored.",
      details: { dependencies: [], skipped, reason: "nothing to compare" },
      measured: true,
    };
  const results = await mapConcurrently(deps, client.config.concurrency, async (dep) => {
    const answer = await client.latest(dep.ecosystem, dep.name);
    if (!answer.ok)
      return {
        ecosystem: dep.ecosystem,
        name: dep.name,
        declared: dep.declared,
        latest: null,
        status: "unknown" as const,
        majors_behind: null,
        score: null,
        error: answer.error,
      } satisfies DependencyFreshness;
    return compareWithLatest(dep, answer.value);
  });
  const scored = results.filter((r) => r.score !== null);
  const unknown = results.filter((r) => r.score === null);
  const outdated = results.filter((r) => r.status === "outdated");
  const majors = outdated.reduce((sum, r) => sum + (r.majors_behind ?? 0), 0);
  const details = {
    checked: scored.length,
    declared: deps.length,
    outdated: outdated.length,
    majors_behind_total: majors,
    dependencies: results,
    skipped,
  };
  if (scored.length === 0)
    return {
      score: null,
      summary: `None of ${deps.length} dependencies could be checked against its registry.`,
      details: {
        ...details,
        reason: `registry not reachable: ${unknown[0]?.error ?? "no answer"}`,
      },
      measured: false,
    };
  const score = clampScore(scored.reduce((sum, r) => sum + (r.score ?? 0), 0) / scored.length);
  const summary = `${outdated.length} of ${scored.length} dependencies outdated (${majors} major version${majors === 1 ? "" : "s"} behind in total)${unknown.length > 0 ? `; ${unknown.length} could not be checked` : ""}.`;
  if (unknown.length > 0)
    return {
      score,
      summary,
      details: {
        ...details,
        reason: `${unknown.length} of ${deps.length} dependencies could not be checked (${unknown[0]!.error}); the score covers the others`,
      },
      measured: false,
    };
  return { score, summary, details, measured: true };
}

export interface AdvisoryResult {
  checks: AdvisoryCheck[];
  vulnerabilities: Vulnerability[];
  /** Dependencies whose version is not exact, so advisories could not be matched. */
  unpinned: number;
}

/** Known vulnerabilities of the repository's dependency versions. */
export async function collectAdvisories(
  client: RegistryClient,
  manifests: Manifests,
): Promise<AdvisoryResult> {
  const result: AdvisoryResult = { checks: [], vulnerabilities: [], unpinned: 0 };
  const npmDeps = manifests.dependencies.filter((d) => d.ecosystem === "npm");
  let npmVersions = manifests.npmLocked;
  if (!npmVersions && npmDeps.length > 0) {
    // No lockfile: the lowest version each declared range admits is what a fresh install
    // may resolve to at worst.
    npmVersions = new Map();
    for (const dep of npmDeps) if (dep.exact) npmVersions.set(dep.name, new Set([dep.exact]));
  }
  if (npmVersions && npmVersions.size > 0) {
    const npm = await npmAdvisories(client, npmVersions, (v, range) => {
      try {
        return semver.satisfies(v, range);
      } catch {
        return false;
      }
    });
    result.checks.push(npm.check);
    result.vulnerabilities.push(...npm.vulnerabilities);
  }
  for (const { registry: ecosystem } of READERS.filter((r) => r.advisories === "osv")) {
    const deps = manifests.dependencies.filter((d) => d.ecosystem === ecosystem);
    if (deps.length === 0) continue;
    const exact = deps
      .filter((d) => d.exact !== null)
      .map((d) => ({ name: d.name, version: d.exact! }));
    result.unpinned += deps.length - exact.length;
    if (exact.length === 0) continue;
    const osv = await osvAdvisories(client, ecosystem, exact);
    result.checks.push(osv.check);
    result.vulnerabilities.push(...osv.vulnerabilities);
  }
  return result;
}
