import type { Models, TaskStatus } from "../db/models.js";
import { taskFiguresBetween } from "./tasks/store.js";

/*
 * Velocity analytics (docs/api.md, "GET /analytics/velocity") over the account's own tasks. A
 * period of N days is the N UTC calendar days ending today (today included, so far): every task
 * created from 00:00 UTC N-1 days ago on counts, and every figure of a task is counted on the
 * day it was created. One query with a projection reads the period; the figures are computed
 * here (FerretDB's aggregation support is limited).
 */

export const VELOCITY_PERIODS = [7, 30, 90] as const;
export type VelocityPeriod = (typeof VELOCITY_PERIODS)[number];

const DAY_MS = 86_400_000;
const FINISHED: ReadonlySet<TaskStatus> = new Set(["completed", "failed", "cancelled"]);

/** The fields of a task analytics reads. */
export interface TaskFigures {
  status: TaskStatus;
  created_at: Date;
  finished_at: Date | null;
  pr_url: string | null;
  pr_state: "open" | "merged" | "closed" | null;
  cost_usd: number;
  agent_name: string | null;
  tokens: TokenFigures;
}

/**
 * Model tokens of the period: input is every prompt token; cached_input and cache_write are
 * the parts read from and written to the provider's prompt cache, uncached_input the rest.
 */
export interface TokenFigures {
  input: number;
  cached_input: number;
  cache_write: number;
  uncached_input: number;
  output: number;
}

export interface Counts {
  total: number;
  completed: number;
  failed: number;
  cancelled: number;
  in_progress: number;
}

export interface VelocityFigures {
  tasks: Counts;
  /** Completed tasks over finished ones (completed, failed, cancelled), 0..1; null when none finished. */
  success_rate: number | null;
  /** finished_at − created_at of finished tasks, in seconds. */
  duration_seconds: { median: number | null; p90: number | null; count: number };
  pull_requests: { opened: number; merged: number; merge_rate: number | null };
  cost_usd: { total: number; per_successful_task: number | null };
}

export interface VelocityReport extends VelocityFigures {
  period_days: VelocityPeriod;
  tokens: TokenFigures;
  from: string;
  to: string;
  by_agent: Array<VelocityFigures & { agent_name: string | null }>;
}

export interface TimelineRow {
  date: string;
  tasks_created: number;
  completed: number;
  failed: number;
  cancelled: number;
  pull_requests_opened: number;
  pull_requests_merged: number;
  cost_usd: number;
}

/** The first instant of the period: 00:00 UTC, `days - 1` days before `now`'s day. */
export function periodStart(now: Date, days: number): Date {
  const today = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate());
  return new Date(today - (days - 1) * DAY_MS);
}

/** The median (mean of the two middle values for an even count) of sorted numbers. */
export function median(sorted: number[]): number | null {
  if (sorted.length === 0) return null;
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** The nearest-rank percentile of sorted numbers: the value at rank ceil(p/100 · n). */
export function percentile(sorted: number[], p: number): number | null {
  if (sorted.length === 0) return null;
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[Math.min(rank, sorted.length) - 1]!;
}

const money = (usd: number) => Math.round(usd * 1e6) / 1e6;
const ratio = (a: number, b: number) => (b > 0 ? Math.round((a / b) * 10_000) / 10_000 : null);
const seconds = (ms: number | null) => (ms === null ? null : Math.round(ms / 100) / 10);

/** The velocity figures of a set of tasks. */
export function velocityOf(tasks: TaskFigures[]): VelocityFigures {
  const counts: Counts = {
    total: tasks.length,
    completed: 0,
    failed: 0,
    cancelled: 0,
    in_progress: 0,
  };
  const durations: number[] = [];
  let opened = 0;
  let merged = 0;
  let cost = 0;
  for (const task of tasks) {
    if (task.status === "completed") counts.completed++;
    else if (task.status === "failed") counts.failed++;
    else if (task.status === "cancelled") counts.cancelled++;
    else counts.in_progress++;
    if (FINISHED.has(task.status) && task.finished_at)
      durations.push(Math.max(0, task.finished_at.getTime() - task.created_at.getTime()));
    if (task.pr_url) opened++;
    if (task.pr_state === "merged") merged++;
    cost += task.cost_usd;
  }
  durations.sort((a, b) => a - b);
  const finished = counts.completed + counts.failed + counts.cancelled;
  return {
    tasks: counts,
    success_rate: ratio(counts.completed, finished),
    duration_seconds: {
      median: seconds(median(durations)),
      p90: seconds(percentile(durations, 90)),
      count: durations.length,
    },
    pull_requests: { opened, merged, merge_rate: ratio(merged, opened) },
    cost_usd: {
      total: money(cost),
      per_successful_task: counts.completed > 0 ? money(cost / counts.completed) : null,
    },
  };
}

/** The account's tasks created from `from` to `to`, with only the fields analytics needs. */
export async function loadTaskFigures(
  models: Models,
  accountId: string,
  from: Date,
  to: Date,
): Promise<TaskFigures[]> {
  const docs = await taskFiguresBetween(models, accountId, from, to);
  return docs.map((d) => ({
    status: d.status as TaskStatus,
    created_at: d.created_at as Date,
    finished_at: d.finished_at instanceof Date ? d.finished_at : null,
    pr_url: typeof d.pr_url === "string" && d.pr_url !== "" ? d.pr_url : null,
    pr_state: (d.pr_state as TaskFigures["pr_state"]) ?? null,
    cost_usd: typeof d.cost?.usd === "number" ? d.cost.usd : 0,
    agent_name: typeof d.agent_name === "string" ? d.agent_name : null,
    tokens: tokenFigures(d.cost as Record<string, unknown> | undefined),
  }));
}

function tokenFigures(cost: Record<string, unknown> | undefined): TokenFigures {
  const n = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : 0);
  const input = n(cost?.input_tokens);
  const cached = n(cost?.cached_input_tokens);
  const write = n(cost?.cache_write_tokens);
  return {
    input,
    cached_input: cached,
    cache_write: write,
    uncached_input: Math.max(0, input - cached - write),
    output: n(cost?.output_tokens),
  };
}

function sumTokens(tasks: readonly TaskFigures[]): TokenFigures {
  const total: TokenFigures = {
    input: 0,
    cached_input: 0,
    cache_write: 0,
    uncached_input: 0,
    output: 0,
  };
  for (const { tokens } of tasks) {
    for (const key of Object.keys(total) as Array<keyof TokenFigures>) total[key] += tokens[key];
  }
  return total;
}

/** Velocity of the account over the period, overall and per agent. */
export async function velocity(
  models: Models,
  accountId: string,
  period: VelocityPeriod,
  now = new Date(),
): Promise<VelocityReport> {
  const from = periodStart(now, period);
  const tasks = await loadTaskFigures(models, accountId, from, now);
  const byAgent = new Map<string | null, TaskFigures[]>();
  for (const task of tasks) {
    const list = byAgent.get(task.agent_name) ?? [];
    list.push(task);
    byAgent.set(task.agent_name, list);
  }
  const agents = [...byAgent.entries()]
    .map(([agent_name, list]) => ({ agent_name, ...velocityOf(list) }))
    .sort(
      (a, b) =>
        b.tasks.total - a.tasks.total ||
        String(a.agent_name ?? "").localeCompare(String(b.agent_name ?? "")),
    );
  return {
    period_days: period,
    from: from.toISOString(),
    to: now.toISOString(),
    ...velocityOf(tasks),
    tokens: sumTokens(tasks),
    by_agent: agents,
  };
}

/** One row per UTC day of the period, oldest first, days without tasks included. */
export async function velocityTimeline(
  models: Models,
  accountId: string,
  period: VelocityPeriod,
  now = new Date(),
): Promise<TimelineRow[]> {
  const from = periodStart(now, period);
  const rows: TimelineRow[] = Array.from({ length: period }, (_, i) => ({
    date: new Date(from.getTime() + i * DAY_MS).toISOString().slice(0, 10),
    tasks_created: 0,
    completed: 0,
    failed: 0,
    cancelled: 0,
    pull_requests_opened: 0,
    pull_requests_merged: 0,
    cost_usd: 0,
  }));
  for (const task of await loadTaskFigures(models, accountId, from, now)) {
    const row = rows[Math.floor((task.created_at.getTime() - from.getTime()) / DAY_MS)];
    if (!row) continue;
    row.tasks_created++;
    if (task.status === "completed") row.completed++;
    else if (task.status === "failed") row.failed++;
    else if (task.status === "cancelled") row.cancelled++;
    if (task.pr_url) row.pull_requests_opened++;
    if (task.pr_state === "merged") row.pull_requests_merged++;
    row.cost_usd += task.cost_usd;
  }
  for (const row of rows) row.cost_usd = money(row.cost_usd);
  return rows;
}
