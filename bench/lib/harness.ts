import autocannon from "autocannon";
import { performance } from "node:perf_hooks";

/** Load settings shared by every benchmark; each can be overridden from the environment. */
export interface BenchSettings {
  /** Seconds of measurement per round and subject (BENCH_DURATION_S). */
  durationS: number;
  /** Seconds of warm-up per subject before the first round (BENCH_WARMUP_S). */
  warmupS: number;
  /** Concurrent connections of the load generator (BENCH_CONNECTIONS). */
  connections: number;
  /** Measured rounds per subject; the median is reported (BENCH_ROUNDS). */
  rounds: number;
}

/**
 * A whole number from the environment variable `name`: `fallback` when it is unset or blank,
 * refused (BenchError) outside `min`..`max`. Every benchmark reads its counts this way.
 */
export function envInt(name: string, fallback: number, min: number, max: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw.trim() === "") return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new BenchError(`${name} must be an integer from ${min} to ${max}, got "${raw}"`);
  }
  return value;
}

export function settingsFromEnv(): BenchSettings {
  return {
    durationS: envInt("BENCH_DURATION_S", 5, 1, 120),
    warmupS: envInt("BENCH_WARMUP_S", 2, 0, 60),
    connections: envInt("BENCH_CONNECTIONS", 20, 1, 1000),
    rounds: envInt("BENCH_ROUNDS", 3, 1, 20),
  };
}

/** One measured load run against one URL. */
export interface LoadSample {
  requestsPerSec: number;
  latencyP50Ms: number;
  latencyP99Ms: number;
  latencyMeanMs: number;
  completed: number;
  durationS: number;
  /**
   * Share of the wall time this process's main thread (both servers and the database
   * driver; not the load generator) was busy, 0–1. Near 1 means the run was bound by
   * JavaScript on the main thread rather than by waiting on the database.
   */
  eventLoopUtilization: number;
  /** Busy main-thread milliseconds per completed request. */
  mainThreadMsPerRequest: number;
}

/** Median of per-round figures for one subject. */
export interface SubjectSummary {
  subject: string;
  requestsPerSec: number;
  latencyP50Ms: number;
  latencyP99Ms: number;
  eventLoopUtilization: number;
  mainThreadMsPerRequest: number;
  rounds: LoadSample[];
}

/** A pass/fail (or informative) verdict a benchmark reports next to its figures. */
export interface Check {
  name: string;
  value: number;
  target: number;
  pass: boolean;
  detail: string;
  /** The value must stay at or below `target` (a latency) instead of reaching it. */
  atMost?: boolean;
}

/** One timed pass of a throughput benchmark over a fixed amount of work. */
export interface ThroughputRound {
  ms: number;
  files: number;
  bytes: number;
}

/** Figures of the fastest round of one subject of a throughput (not request) benchmark. */
export interface ThroughputSummary {
  subject: string;
  filesPerSec: number;
  mbPerSec: number;
  bestMs: number;
  rounds: ThroughputRound[];
}

/** The best (fastest) round: on a shared machine, slower rounds measure the neighbours. */
export function summariseThroughput(subject: string, rounds: ThroughputRound[]): ThroughputSummary {
  const best = rounds.reduce((a, b) => (b.ms < a.ms ? b : a));
  return {
    subject,
    filesPerSec: best.files / (best.ms / 1000),
    mbPerSec: best.bytes / 1e6 / (best.ms / 1000),
    bestMs: best.ms,
    rounds,
  };
}

/** Pooled latency samples of one subject (e.g. event deliveries), with per-round p99s. */
export interface LatencySummary {
  subject: string;
  samples: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  roundP99Ms: number[];
}

/** Nearest-rank percentile (0–100) of ascending `sorted`. */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1]!;
}

/** Pools the rounds' samples (milliseconds) of one subject into one distribution. */
export function summariseLatencies(subject: string, rounds: Float64Array[]): LatencySummary {
  const all = new Float64Array(rounds.reduce((n, r) => n + r.length, 0));
  let at = 0;
  for (const r of rounds) {
    all.set(r, at);
    at += r.length;
  }
  all.sort();
  return {
    subject,
    samples: all.length,
    p50Ms: percentile(all, 50),
    p99Ms: percentile(all, 99),
    maxMs: all.length > 0 ? all[all.length - 1]! : Number.NaN,
    roundP99Ms: rounds.map((r) => percentile(Float64Array.from(r).sort(), 99)),
  };
}

/** Run times (ms) of one side of a comparison, under the name of its latency summary. */
export interface TimedSeries {
  label: string;
  ms: number[];
}

/**
 * `runs` alternating runs of `base` and `measured` (each resolving to its time in ms), so the
 * machine's load weighs on both alike. Any unmeasured warm-up is the caller's.
 */
export async function alternateRuns(
  runs: number,
  base: () => Promise<number>,
  measured: () => Promise<number>,
): Promise<{ base: number[]; measured: number[] }> {
  const times = { base: [] as number[], measured: [] as number[] };
  for (let i = 0; i < runs; i++) {
    times.base.push(await base());
    times.measured.push(await measured());
  }
  return times;
}

/**
 * Two series of run times compared by their medians: `measured` may take at most `target`
 * times `base`. Returns the ratio, both series' latency summaries (base first, a round per
 * run) and the check named `name`, with the caller's `detail`.
 */
export function medianRatioCheck(
  name: string,
  base: TimedSeries,
  measured: TimedSeries,
  target: number,
  detail: string,
): { ratio: number; latencies: LatencySummary[]; check: Check } {
  const ratio = median(measured.ms) / median(base.ms);
  const rounds = (ms: number[]) => ms.map((v) => Float64Array.of(v));
  return {
    ratio,
    latencies: [
      summariseLatencies(base.label, rounds(base.ms)),
      summariseLatencies(measured.label, rounds(measured.ms)),
    ],
    check: { name, value: ratio, target, atMost: true, pass: ratio <= target, detail },
  };
}

export interface BenchReport {
  /** Request-oriented results (load runs); empty for throughput benchmarks. */
  subjects: SubjectSummary[];
  /** Throughput results (work done per second), for benchmarks that are not request loads. */
  throughput?: ThroughputSummary[];
  /** Latency distributions (delivery times, not request loads), one per subject. */
  latencies?: LatencySummary[];
  checks: Check[];
  /** Anything else worth keeping in the JSON results (engine, settings, notes). */
  info: Record<string, unknown>;
}

export interface Benchmark {
  name: string;
  description: string;
  run(settings: BenchSettings): Promise<BenchReport>;
}

export class BenchError extends Error {
  override name = "BenchError";
}

/**
 * Runs autocannon against `url` for `durationS` seconds. The load generator runs in a worker
 * thread so it does not share the event loop with the servers under test in this process.
 * Any response other than `expectStatus`, any socket error or timeout makes the run fail:
 * a benchmark of error responses measures nothing.
 */
export async function runLoad(options: {
  url: string;
  headers?: Record<string, string>;
  connections: number;
  durationS: number;
  expectStatus?: number;
  /** GET unless given; a POST sends `body` (the same text on every request). */
  method?: "GET" | "POST";
  body?: string;
}): Promise<LoadSample> {
  const expected = options.expectStatus ?? 200;
  const elu = performance.eventLoopUtilization();
  const result = await autocannon({
    url: options.url,
    method: options.method ?? "GET",
    ...(options.body !== undefined ? { body: options.body } : {}),
    headers: options.headers ?? {},
    connections: options.connections,
    duration: options.durationS,
    pipelining: 1,
    timeout: 10,
    workers: 1,
  });
  const busy = performance.eventLoopUtilization(elu);
  const statuses = Object.entries(result.statusCodeStats ?? {}).map(
    ([code, s]) => [code, s.count ?? 0] as const,
  );
  const unexpected = statuses.filter(([code, count]) => code !== String(expected) && count > 0);
  if (unexpected.length > 0 || result.errors > 0 || result.timeouts > 0) {
    const codes = unexpected.map(([code, count]) => `${count}× ${code}`).join(", ") || "none";
    throw new BenchError(
      `load on ${options.url} was not clean: unexpected statuses ${codes}; ` +
        `${result.errors} errors, ${result.timeouts} timeouts (expected only ${expected})`,
    );
  }
  const completed = result.requests.total;
  if (completed === 0) throw new BenchError(`load on ${options.url} completed no request`);
  return {
    requestsPerSec: completed / result.duration,
    latencyP50Ms: result.latency.p50,
    latencyP99Ms: result.latency.p99,
    latencyMeanMs: result.latency.average,
    completed,
    durationS: result.duration,
    eventLoopUtilization: busy.utilization,
    mainThreadMsPerRequest: busy.active / completed,
  };
}

export function median(values: number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export function summarise(subject: string, rounds: LoadSample[]): SubjectSummary {
  return {
    subject,
    requestsPerSec: median(rounds.map((r) => r.requestsPerSec)),
    latencyP50Ms: median(rounds.map((r) => r.latencyP50Ms)),
    latencyP99Ms: median(rounds.map((r) => r.latencyP99Ms)),
    eventLoopUtilization: median(rounds.map((r) => r.eventLoopUtilization)),
    mainThreadMsPerRequest: median(rounds.map((r) => r.mainThreadMsPerRequest)),
    rounds,
  };
}

/** Cleanup steps run last-in first-out, once, whatever failed before. */
export class Cleanup {
  private readonly steps: Array<{ label: string; fn: () => Promise<unknown> | unknown }> = [];
  private running: Promise<void> | undefined;

  defer(label: string, fn: () => Promise<unknown> | unknown): void {
    this.steps.push({ label, fn });
  }

  run(): Promise<void> {
    this.running ??= (async () => {
      const errors: string[] = [];
      for (const step of this.steps.reverse()) {
        try {
          await step.fn();
        } catch (error) {
          errors.push(`${step.label}: ${error instanceof Error ? error.message : String(error)}`);
        }
      }
      if (errors.length > 0) throw new BenchError(`cleanup failed: ${errors.join("; ")}`);
    })();
    return this.running;
  }
}

/** Cleanups of benchmarks in flight, so that an interrupt still stops servers and databases. */
export const activeCleanups = new Set<Cleanup>();

/** One side of a throughput comparison: a URL to load, and a way to wait until it is idle. */
export interface LoadSubject {
  name: string;
  url: string;
  /** Resolves once no request of this subject is still being handled. */
  idle(): Promise<void>;
}

/**
 * Warm-up, then `settings.rounds` rounds in which every subject is loaded in turn (so each
 * service round runs right after a bare round), one line per sample. `describe` may add to
 * a sample's line (it runs around the load: `before` returns a function given the sample).
 */
export async function alternatingRounds(
  settings: BenchSettings,
  subjects: LoadSubject[],
  request: Omit<Parameters<typeof runLoad>[0], "url" | "connections" | "durationS">,
  before?: (subject: LoadSubject) => ((sample: LoadSample) => string) | undefined,
): Promise<SubjectSummary[]> {
  const load = async (subject: LoadSubject, durationS: number) => {
    const sample = await runLoad({
      ...request,
      url: subject.url,
      connections: settings.connections,
      durationS,
    });
    await subject.idle();
    return sample;
  };
  if (settings.warmupS > 0) {
    for (const subject of subjects) {
      console.log(`  warm-up ${subject.name} (${settings.warmupS} s)`);
      await load(subject, settings.warmupS);
    }
  }
  const width = Math.max(...subjects.map((s) => s.name.length));
  const samples = new Map<string, LoadSample[]>(subjects.map((s) => [s.name, []]));
  for (let round = 1; round <= settings.rounds; round++) {
    // Every other round in reverse order: when the subjects share a database that grows
    // (POST /tasks), the one always run second would always meet the bigger collections.
    const order = round % 2 === 1 ? subjects : [...subjects].reverse();
    for (const subject of order) {
      const after = before?.(subject);
      const sample = await load(subject, settings.durationS);
      samples.get(subject.name)!.push(sample);
      console.log(
        `  round ${round}/${settings.rounds} ${subject.name.padEnd(width)} ` +
          `${sample.requestsPerSec.toFixed(0).padStart(6)} req/s  p50 ${sample.latencyP50Ms} ms  ` +
          `p99 ${sample.latencyP99Ms} ms  main thread ${(sample.eventLoopUtilization * 100).toFixed(0)}% busy, ` +
          `${sample.mainThreadMsPerRequest.toFixed(2)} ms/req${after ? after(sample) : ""}`,
      );
    }
  }
  return subjects.map((s) => summarise(s.name, samples.get(s.name)!));
}

/**
 * The service/bare throughput check of two summaries (bare first). Each service round ran
 * right after a bare round: their per-round ratios are the least disturbed by other load on
 * the machine, and are reported next to the ratio of the medians.
 */
export function throughputRatio(
  bare: SubjectSummary,
  svc: SubjectSummary,
  target: number,
): { check: Check; pairRatios: number[] } {
  const ratio = svc.requestsPerSec / bare.requestsPerSec;
  const pairRatios = svc.rounds.map((r, i) => r.requestsPerSec / bare.rounds[i]!.requestsPerSec);
  return {
    pairRatios,
    check: {
      name: "service/bare throughput",
      value: ratio,
      target,
      pass: ratio >= target,
      detail:
        `${svc.requestsPerSec.toFixed(0)} / ${bare.requestsPerSec.toFixed(0)} req/s (medians); ` +
        `per round ${pairRatios.map((r) => r.toFixed(2)).join(", ")}`,
    },
  };
}
