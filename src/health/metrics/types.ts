/*
 * What a health metric is (docs/architecture.md, "How to add a health metric"): a name of the
 * report (health/types.ts METRIC_NAMES), its weight in the overall score, and `measure`, which
 * reads the one scan context the scanner builds and returns the metric's result.
 */
import type { SandboxCache } from "../../sandbox/index.js";
import type { Config } from "../../config/env.js";
import type { Logger } from "../../util/logger.js";
import type { CiSource } from "../ci.js";
import type { RepoFiles } from "../files.js";
import type { Manifests } from "../manifests.js";
import type { RegistryClient } from "../registry.js";
import type { MetricName, MetricResult } from "../types.js";

/** Everything a metric may use, built once per scan by health/scanner.ts. */
export interface ScanContext {
  /** The working copy (read it through workcopy/fs.ts, never plain node:fs). */
  root: string;
  /** Its files, read once (health/files.ts). */
  files: RepoFiles;
  /** The dependencies it declares at the root (health/manifests.ts). */
  manifests: Manifests;
  /** The package registries and advisory sources, bounded per scan (health/registry.ts). */
  registry: RegistryClient;
  /** Where the CI history comes from (GitHub, or none and why). */
  ci: CiSource;
  /** How the repository's own commands run in the sandbox (sandbox/run.ts). */
  sandbox: {
    /** Budget for every install and test command of the scan together. */
    timeoutMs: number;
    /** GOPROXY for Go commands (from GOPROXY_URL). */
    goproxy: string;
    /** The package cache of the scan's account and repository (sandbox/cache.ts). */
    cache?: SandboxCache;
    /** Why the scan's setup step did not install the dependencies (verify/setup.ts). */
    setupFailure?: string;
  };
  /** The scan's configuration (HEALTH_*). */
  config: Config["health"];
  /** Aborted when the scan times out or its worker stops. */
  signal?: AbortSignal;
  logger: Logger;
}

/** One metric of the report: adding one is a file of this shape and a line in ./index.ts. */
export interface HealthMetric<N extends MetricName = MetricName> {
  name: N;
  /** Relative weight in the overall score (the registry's weights sum to 100). */
  weight: number;
  /**
   * What its work is, which decides when the scanner starts it: `lookup` (registries, CI:
   * waiting on the network) at once; `analysis` (in-process reading of the files) at once;
   * `commands` (the repository's own commands in the sandbox, with a time budget) only after
   * the analyses, so they do not take the CPU from commands that are being timed.
   */
  work: "analysis" | "lookup" | "commands";
  /** Measures the working copy; throws only when the scan is aborted. */
  measure(ctx: ScanContext): Promise<MetricResult>;
}

/** Notes on a file-reading metric's result that only part of the repository was read. */
export function noteTruncation(files: RepoFiles, result: MetricResult): MetricResult {
  if (files.truncated)
    result.details.truncated = `only part of the repository was read (${JSON.stringify(files.skipped)})`;
  return result;
}
