/*
 * The health scan of one working copy: reads the files and manifests once, builds the one scan
 * context, runs every metric of the registry (health/metrics/index.ts; docs/api.md, "The
 * report") on it, and weighs their results into a score and a grade. The metrics run side by
 * side: coverage's tests in the sandbox while the registries and GitHub are asked (bounded).
 * The caller clones and removes the working copy.
 */
import type { Config } from "../config/env.js";
import type { Logger } from "../util/logger.js";
import type { SandboxCache } from "../sandbox/index.js";
import type { CiSource } from "./ci.js";
import { readRepoFiles } from "./files.js";
import { gradeFor, METRIC_WEIGHTS, overallScore } from "./grading.js";
import { readManifests } from "./manifests.js";
import { HEALTH_METRICS, type ScanContext } from "./metrics/index.js";
import { RegistryClient } from "./registry.js";
import { METRIC_NAMES, type MetricName, type MetricResult, type Metrics } from "./types.js";

export interface ScanOptions {
  root: string;
  /** The scan's configuration (HEALTH_*: coverage budget, registries). */
  config: Config["health"];
  ci: CiSource;
  logger: Logger;
  signal?: AbortSignal;
  /** The package cache of the scan's account and repository (sandbox/cache.ts). */
  cache?: SandboxCache;
  /** Why the scan's setup step (verify/setup.ts) did not install the dependencies. */
  setupFailure?: string;
}

export interface ScanResult {
  metrics: Metrics;
  score: number | null;
  grade: string | null;
  /** Extension: which weights the score used after leaving out metrics without a score. */
  weights: Record<string, number>;
}

/** Reads the working copy once into the context every metric measures. */
async function scanContext(options: ScanOptions): Promise<ScanContext> {
  const files = await readRepoFiles(options.root);
  options.signal?.throwIfAborted();
  const manifests = await readManifests(options.root, files);
  return {
    root: options.root,
    files,
    manifests,
    registry: new RegistryClient(options.config.registry, options.signal),
    ci: options.ci,
    sandbox: {
      timeoutMs: options.config.coverageTimeoutMs,
      goproxy: options.config.registry.goproxyUrl,
      ...(options.cache ? { cache: options.cache } : {}),
      ...(options.setupFailure ? { setupFailure: options.setupFailure } : {}),
    },
    config: options.config,
    ...(options.signal ? { signal: options.signal } : {}),
    logger: options.logger,
  };
}

/**
 * Measures a working copy. Throws only when the scan is aborted, or when its tests went past
 * TASK_DISK_LIMIT_MB (DiskBudgetError).
 */
export async function scanRepository(options: ScanOptions): Promise<ScanResult> {
  const ctx = await scanContext(options);
  // Lookups and analyses start at once; the repository's commands start when the analyses
  // are done (see HealthMetric.work). Every metric runs to its end before an error is
  // thrown, so none outlives the scan (and its working copy).
  const start = (name: MetricName) => HEALTH_METRICS[name].measure(ctx);
  const runs = new Map<MetricName, Promise<MetricResult>>();
  for (const name of METRIC_NAMES)
    if (HEALTH_METRICS[name].work !== "commands") runs.set(name, start(name));
  await Promise.allSettled(
    METRIC_NAMES.filter((name) => HEALTH_METRICS[name].work === "analysis").map((name) =>
      runs.get(name)!,
    ),
  );
  for (const name of METRIC_NAMES) if (!runs.has(name)) runs.set(name, start(name));
  const settled = await Promise.allSettled(METRIC_NAMES.map((name) => runs.get(name)!));
  options.signal?.throwIfAborted();
  const metrics = {} as Record<string, MetricResult>;
  for (const [i, name] of METRIC_NAMES.entries()) {
    const outcome = settled[i]!;
    if (outcome.status === "rejected") throw outcome.reason;
    metrics[name] = outcome.value;
  }
  const score = overallScore(metrics as Metrics);
  const used = METRIC_NAMES.filter((name) => metrics[name]!.score !== null);
  const total = used.reduce((sum, name) => sum + METRIC_WEIGHTS[name], 0);
  const weights = Object.fromEntries(
    used.map((name) => [name, Math.round((METRIC_WEIGHTS[name] / total) * 1000) / 1000]),
  );
  return {
    metrics: metrics as Metrics,
    score,
    grade: score === null ? null : gradeFor(score),
    weights,
  };
}
