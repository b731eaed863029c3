import type { Db } from "mongodb";
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { Next, ParameterizedContext } from "koa";

/*
 * The service's Prometheus metrics (GET /metrics). One registry per process: counters and
 * histograms (HTTP requests, stage durations, model tokens, webhooks, sandbox runs) count
 * what THIS process did, so a worker's stages show on the worker's endpoint (METRICS_PORT),
 * not the web process's. What is shared state (tasks by status, the job queue) is read from
 * the database when scraped, so every process reports the same figures for it.
 *
 * Recording is a no-op until `enableMetrics()` runs (METRICS=off, or no way to read them),
 * so instrumented code costs nothing when metrics are not wanted.
 */

let enabled = false;
let defaultsCollected = false;

export const registry = new Registry();

const SECONDS_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const STAGE_BUCKETS = [0.1, 0.5, 1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600];

const httpRequests = new Counter({
  name: "foreman_http_requests_total",
  help: "HTTP requests answered, by method, route template and status (this process).",
  labelNames: ["method", "route", "status"] as const,
  registers: [registry],
});
const httpDuration = new Histogram({
  name: "foreman_http_request_duration_seconds",
  help: "HTTP request latency, by method, route template and status (this process).",
  labelNames: ["method", "route", "status"] as const,
  buckets: SECONDS_BUCKETS,
  registers: [registry],
});
const stageDuration = new Histogram({
  name: "foreman_stage_duration_seconds",
  help: "Pipeline stage runs, by stage and outcome (done or failed), run in this process.",
  labelNames: ["stage", "outcome"] as const,
  buckets: STAGE_BUCKETS,
  registers: [registry],
});
const modelTokens = new Counter({
  name: "foreman_model_tokens_total",
  help: "Model tokens used by this process, by provider, model and direction (input, output).",
  labelNames: ["provider", "model", "direction"] as const,
  registers: [registry],
});
const modelCost = new Counter({
  name: "foreman_model_cost_usd_total",
  help: "Model cost in USD at the configured prices, by provider and model (this process).",
  labelNames: ["provider", "model"] as const,
  registers: [registry],
});
const modelCalls = new Counter({
  name: "foreman_model_calls_total",
  help: "Model calls made by this process, by provider and model.",
  labelNames: ["provider", "model"] as const,
  registers: [registry],
});
const webhookDeliveries = new Counter({
  name: "foreman_webhook_deliveries_total",
  help: "Webhook deliveries received by this process, by source (github, automation) and outcome.",
  labelNames: ["source", "outcome"] as const,
  registers: [registry],
});
const sandboxRuns = new Counter({
  name: "foreman_sandbox_runs_total",
  help: "Repository commands run in the sandbox by this process, by outcome.",
  labelNames: ["outcome"] as const,
  registers: [registry],
});
const sandboxDuration = new Histogram({
  name: "foreman_sandbox_run_duration_seconds",
  help: "Duration of sandboxed repository commands, by outcome (this process).",
  labelNames: ["outcome"] as const,
  buckets: [0.05, 0.25, 1, 5, 15, 60, 300, 900, 3600],
  registers: [registry],
});

const collectFailures = new Counter({
  name: "foreman_metrics_collect_failures_total",
  help: "Scrape-time database reads that failed or timed out (their gauges were left empty; counted from the next scrape).",
  labelNames: ["collector"] as const,
  registers: [registry],
});

/** A scrape never waits on the database longer than this, nor fails because of it. */
const COLLECT_TIMEOUT_MS = 2_000;
function collectFailed(collector: string) {
  return () => {
    collectFailures.inc({ collector });
    return [];
  };
}

/*
 * The database read at scrape time: that of the latest service started in this process
 * still running (tests and benchmarks run several on one database); none before a start.
 */
const databases: Db[] = [];
let database: Db | undefined;

/*
 * Shared state, read once per scrape with one aggregate each. The values describe the whole
 * deployment (every process reports the same), so dashboards take max() across instances.
 */
// Shared state is read at most once per METRICS_DB_READ_S whatever the scrape rate: with a
// 1 s scrape the reads cost POST /tasks most of its throughput on FerretDB (bench/
// metrics-overhead.ts), so several scrapes (and several Prometheus servers) share one read.
let readEveryMs = 5_000;
function everyFewSeconds<T>(read: () => Promise<T>): () => Promise<T> {
  let last: { at: number; value: Promise<T> } | undefined;
  return () => {
    const now = Date.now();
    if (!last || now - last.at >= readEveryMs) last = { at: now, value: read() };
    return last.value;
  };
}

/** Statuses of tasks still under way; ended ones are counted (foreman_tasks_ended_total). */
const ACTIVE_STATUSES = ["queued", "running", "awaiting_approval", "awaiting_diff_approval"];

const activeTasks = everyFewSeconds(async () => {
  if (!database) return [];
  return database
    .collection("tasks")
    .aggregate<{ _id: { status: string; phase: string }; n: number }>(
      [
        // Matching on the indexed status keeps the read to the tasks under way, never the
        // history, which only grows.
        { $match: { status: { $in: ACTIVE_STATUSES } } },
        { $group: { _id: { status: "$status", phase: "$phase" }, n: { $sum: 1 } } },
      ],
      { maxTimeMS: COLLECT_TIMEOUT_MS },
    )
    .toArray()
    .catch(collectFailed("tasks"));
});

new Gauge({
  name: "foreman_tasks",
  help: "Tasks under way (not ended) by status and phase, read from the database at scrape time (all processes).",
  labelNames: ["status", "phase"] as const,
  registers: [registry],
  async collect() {
    this.reset();
    for (const row of await activeTasks())
      this.set({ status: row._id.status, phase: row._id.phase }, row.n);
  },
});

const tasksEnded = new Counter({
  name: "foreman_tasks_ended_total",
  help: "Tasks ended by this process, by final status (completed, failed, cancelled).",
  labelNames: ["status"] as const,
  registers: [registry],
});

/**
 * Due, unlocked, enabled Agenda jobs (the queue waiting for a worker): one aggregate for the
 * counts, then the oldest per job name (a handful of kinds), as FerretDB has no $min.
 */
async function dueJobs(): Promise<Array<{ _id: string; n: number; oldest: Date }>> {
  if (!database) return [];
  const jobs = database.collection("jobs");
  const due = { nextRunAt: { $lte: new Date() }, lockedAt: null, disabled: { $ne: true } };
  const counts = await jobs
    .aggregate<{ _id: string; n: number }>(
      [{ $match: due }, { $group: { _id: "$name", n: { $sum: 1 } } }],
      { maxTimeMS: COLLECT_TIMEOUT_MS },
    )
    .toArray();
  return Promise.all(
    counts.map(async (row) => {
      const oldest = await jobs.findOne(
        { ...due, name: row._id },
        { sort: { nextRunAt: 1 }, projection: { nextRunAt: 1 }, maxTimeMS: COLLECT_TIMEOUT_MS },
      );
      return { ...row, oldest: (oldest?.nextRunAt as Date | undefined) ?? new Date() };
    }),
  );
}

// One read serves both queue gauges (collect() runs for each gauge) and scrapes close by.
const jobsOfThisScrape = everyFewSeconds(() => dueJobs().catch(collectFailed("jobs")));

new Gauge({
  name: "foreman_jobs_due",
  help: "Jobs due and not taken by any worker, by job name, read from the database at scrape time.",
  labelNames: ["name"] as const,
  registers: [registry],
  async collect() {
    this.reset();
    for (const row of await jobsOfThisScrape()) this.set({ name: row._id }, row.n);
  },
});
new Gauge({
  name: "foreman_jobs_lag_seconds",
  help: "How long the oldest due, untaken job of each name has been waiting (queue lag).",
  labelNames: ["name"] as const,
  registers: [registry],
  async collect() {
    this.reset();
    const now = Date.now();
    for (const row of await jobsOfThisScrape())
      this.set({ name: row._id }, Math.max(0, (now - new Date(row.oldest).getTime()) / 1000));
  },
});

/** Turns recording on for this process; default process metrics (CPU, memory, GC) too. */
export function enableMetrics(db: Db | undefined, dbReadEveryMs = 5_000): void {
  enabled = true;
  if (db) databases.push(db);
  database = databases.at(-1);
  readEveryMs = dbReadEveryMs;
  if (!defaultsCollected) {
    defaultsCollected = true;
    collectDefaultMetrics({ register: registry });
  }
}

/** Stops reading the database (service stopped); counters keep their values. */
export function detachMetricsDatabase(db: Db | undefined): void {
  const index = db ? databases.lastIndexOf(db) : -1;
  if (index >= 0) databases.splice(index, 1);
  database = databases.at(-1);
}

export function metricsEnabled(): boolean {
  return enabled;
}

/** The exposition text and its content type. */
export async function renderMetrics(): Promise<{ contentType: string; body: string }> {
  return { contentType: registry.contentType, body: await registry.metrics() };
}

// Label children cached by their values: prom-client hashes the label object on every
// call otherwise, which is most of the cost of a measured request.
const httpChildren = new Map<
  string,
  { count: ReturnType<typeof httpRequests.labels>; time: ReturnType<typeof httpDuration.labels> }
>();

/**
 * Koa middleware, outermost: counts and times every request by its route template
 * (`/tasks/:id`, never the raw path, so ids do not explode the series), or `unmatched`.
 * Installed only on an app whose configuration enables metrics (http/app.ts).
 */
export function httpMetrics() {
  return async (ctx: ParameterizedContext, next: Next): Promise<void> => {
    const started = performance.now();
    try {
      await next();
    } finally {
      const matched = (ctx as { _matchedRoute?: string | RegExp })._matchedRoute;
      const route = typeof matched === "string" ? matched : "unmatched";
      const key = `${ctx.method} ${route} ${ctx.status}`;
      let child = httpChildren.get(key);
      if (!child) {
        const labels = [ctx.method, route, String(ctx.status)] as const;
        child = { count: httpRequests.labels(...labels), time: httpDuration.labels(...labels) };
        httpChildren.set(key, child);
      }
      child.count.inc();
      child.time.observe((performance.now() - started) / 1000);
    }
  };
}

/** A task ended (endTask won its ending) in this process. */
export function recordTaskEnded(status: string): void {
  if (enabled) tasksEnded.inc({ status });
}

/** A pipeline stage ended in this process (`started` from performance.now()). */
export function recordStage(stage: string, outcome: "done" | "failed", started: number): void {
  if (enabled) stageDuration.observe({ stage, outcome }, (performance.now() - started) / 1000);
}

/** One model call's tokens and cost. */
export function recordModelUsage(
  provider: string,
  model: string,
  usage: { inputTokens: number; outputTokens: number; usd: number },
): void {
  if (!enabled) return;
  modelCalls.inc({ provider, model });
  modelTokens.inc({ provider, model, direction: "input" }, usage.inputTokens);
  modelTokens.inc({ provider, model, direction: "output" }, usage.outputTokens);
  modelCost.inc({ provider, model }, usage.usd);
}

/** One webhook delivery and what became of it (accepted, duplicate, fired, no_match, or an error code). */
export function recordWebhook(source: "github" | "automation", outcome: string): void {
  if (enabled) webhookDeliveries.inc({ source, outcome });
}

/** Runs a delivery handler, counting its outcome: `outcomeOf(result)`, or the error's code. */
export async function countWebhook<T>(
  source: "github" | "automation",
  handle: () => Promise<T>,
  outcomeOf: (result: T) => string,
): Promise<T> {
  try {
    const result = await handle();
    recordWebhook(source, outcomeOf(result));
    return result;
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    recordWebhook(source, typeof code === "string" ? code : "error");
    throw error;
  }
}

/** One sandboxed command ended: ok, failed (non-zero exit), timeout or aborted. */
export function recordSandboxRun(outcome: string, durationMs: number): void {
  if (!enabled) return;
  sandboxRuns.inc({ outcome });
  sandboxDuration.observe({ outcome }, durationMs / 1000);
}
