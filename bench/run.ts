/*
 * `npm run bench [-- name…]`: runs the benchmarks of this folder in turn (all of them, or
 * those named), prints a summary table and writes bench/results/latest.json.
 *
 * Settings (environment): BENCH_DURATION_S (5), BENCH_WARMUP_S (2), BENCH_CONNECTIONS (20),
 * BENCH_ROUNDS (3), BENCH_TIMEOUT_S (each benchmark, 300). A benchmark that misses its target
 * is reported, not failed: the exit code is non-zero only when something broke. One that
 * breaks (or runs past its time) is named, and the others still run and are reported.
 *
 * With more than one benchmark, each runs in a process of its own (this script again, with
 * BENCH_REPORT_FILE): one benchmark's leftovers must not weigh on the next. Measured: after
 * index-throughput (a 20,000-file corpus through the indexer's worker pool) the same process
 * spawned git markedly slower, and task-overhead's CLONING went from ~45 to ~120 ms.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { backtestBench } from "./backtest.js";
import { buildCacheBench } from "./build-cache.js";
import { dashboardBench } from "./dashboard.js";
import { followUpBench } from "./follow-up.js";
import { githubWebhook } from "./github-webhook.js";
import { healthAccuracy } from "./health-accuracy.js";
import { indexThroughput } from "./index-throughput.js";
import { integrationsBench } from "./integrations.js";
import { keysMe } from "./keys-me.js";
import { mcpBench } from "./mcp.js";
import { sandboxBench } from "./sandbox.js";
import { setupBench } from "./setup.js";
import { startBench } from "./start.js";
import { localisation } from "./localisation.js";
import { promptCache } from "./prompt-cache.js";
import { metricsOverhead } from "./metrics-overhead.js";
import { taskOverhead } from "./task-overhead.js";
import { tasksCreate } from "./tasks-create.js";
import { testReportsBench } from "./test-reports.js";
import { wsFanout } from "./ws-fanout.js";
import {
  activeCleanups,
  settingsFromEnv,
  type Benchmark,
  type BenchReport,
} from "./lib/harness.js";

/** Every benchmark, in run order. Add new ones (tasks, websockets, …) here. */
const BENCHMARKS: Benchmark[] = [
  keysMe,
  indexThroughput,
  tasksCreate,
  wsFanout,
  taskOverhead,
  githubWebhook,
  integrationsBench,
  dashboardBench,
  sandboxBench,
  localisation,
  promptCache,
  metricsOverhead,
  healthAccuracy,
  setupBench,
  startBench,
  backtestBench,
  mcpBench,
  followUpBench,
  buildCacheBench,
  testReportsBench,
];

const here = path.dirname(fileURLToPath(import.meta.url));
const RESULTS = path.join(here, "results", "latest.json");

function select(args: string[]): Benchmark[] {
  const names = args.filter((a) => a !== "--");
  if (names.length === 0) return BENCHMARKS;
  const unknown = names.filter((n) => !BENCHMARKS.some((b) => b.name === n));
  if (unknown.length > 0) {
    throw new Error(
      `unknown benchmark ${unknown.join(", ")}; known: ${BENCHMARKS.map((b) => b.name).join(", ")}`,
    );
  }
  return BENCHMARKS.filter((b) => names.includes(b.name));
}

function printTable(rows: string[][], numeric: (column: number) => boolean): void {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  const line = (r: string[]) =>
    r
      .map((c, i) => (numeric(i) ? c.padStart(widths[i]!) : c.padEnd(widths[i]!)))
      .join("  ")
      .trimEnd();
  console.log(`\n${line(rows[0]!)}\n${widths.map((w) => "-".repeat(w)).join("  ")}`);
  for (const r of rows.slice(1)) console.log(line(r));
}

function printSummary(results: Array<{ name: string; report: BenchReport }>): void {
  const rows = [
    ["benchmark", "subject", "req/s", "p50 ms", "p99 ms", "main ms/req", "req/s by round"],
  ];
  const throughputRows = [["benchmark", "subject", "files/s", "MB/s", "best ms", "ms by round"]];
  const latencyRows = [
    ["benchmark", "subject", "samples", "p50 ms", "p99 ms", "max ms", "p99 ms by round"],
  ];
  for (const { name, report } of results) {
    for (const s of report.subjects) {
      rows.push([
        name,
        s.subject,
        s.requestsPerSec.toFixed(0),
        s.latencyP50Ms.toFixed(1),
        s.latencyP99Ms.toFixed(1),
        s.mainThreadMsPerRequest.toFixed(2),
        s.rounds.map((r) => r.requestsPerSec.toFixed(0)).join(" / "),
      ]);
    }
    for (const t of report.throughput ?? []) {
      throughputRows.push([
        name,
        t.subject,
        t.filesPerSec.toFixed(0),
        t.mbPerSec.toFixed(1),
        t.bestMs.toFixed(0),
        t.rounds.map((r) => r.ms.toFixed(0)).join(" / "),
      ]);
    }
    for (const l of report.latencies ?? []) {
      latencyRows.push([
        name,
        l.subject,
        String(l.samples),
        l.p50Ms.toFixed(1),
        l.p99Ms.toFixed(1),
        l.maxMs.toFixed(1),
        l.roundP99Ms.map((p) => p.toFixed(1)).join(" / "),
      ]);
    }
  }
  if (rows.length > 1) printTable(rows, (i) => i >= 2 && i <= 5);
  if (throughputRows.length > 1) printTable(throughputRows, (i) => i >= 2 && i <= 4);
  if (latencyRows.length > 1) printTable(latencyRows, (i) => i >= 2 && i <= 5);
  console.log("");
  for (const { name, report } of results) {
    for (const c of report.checks) {
      console.log(
        `${name}: ${c.name} = ${c.value.toFixed(2)} (target ${c.atMost ? "≤" : "≥"} ${c.target}) ${c.pass ? "PASS" : "FAIL"} — ${c.detail}`,
      );
    }
  }
}

async function main(): Promise<void> {
  const selected = select(process.argv.slice(2));
  const settings = settingsFromEnv();
  const timeoutRaw = Number(process.env.BENCH_TIMEOUT_S ?? 300);
  const timeoutS = Number.isFinite(timeoutRaw) && timeoutRaw > 0 ? timeoutRaw : 300;
  // Each benchmark is bounded, in the process that runs it (this one when it runs one, else
  // each child): the whole suite takes far longer than one benchmark's bound.
  const deadline =
    selected.length === 1
      ? setTimeout(() => {
          console.error(
            `bench: ${selected[0]!.name} exceeded BENCH_TIMEOUT_S=${timeoutS}; giving up`,
          );
          void shutdown(2);
        }, timeoutS * 1000)
      : undefined;
  deadline?.unref();

  const reportFile = process.env.BENCH_REPORT_FILE;
  if (!reportFile)
    console.log(
      `bench: ${selected.map((b) => b.name).join(", ")} — ${settings.connections} connections, ` +
        `${settings.warmupS} s warm-up, ${settings.rounds} rounds × ${settings.durationS} s`,
    );
  const results: Array<{ name: string; report: BenchReport }> = [];
  const broken: string[] = [];
  for (const bench of selected) {
    if (selected.length === 1) {
      console.log(`\n[${bench.name}] ${bench.description}`);
      results.push({ name: bench.name, report: await bench.run(settings) });
      continue;
    }
    // A child prints its own heading, and its error when it breaks.
    try {
      results.push({ name: bench.name, report: await runInChild(bench.name) });
    } catch (error) {
      broken.push(bench.name);
      console.error(`bench: ${error instanceof Error ? error.message : String(error)}; going on`);
    }
  }
  clearTimeout(deadline);
  if (reportFile) {
    // A child of a multi-benchmark run: the parent prints and stores the results.
    await writeFile(reportFile, JSON.stringify(results[0]!.report));
    return;
  }
  printSummary(results);

  await mkdir(path.dirname(RESULTS), { recursive: true });
  await writeFile(
    RESULTS,
    `${JSON.stringify(
      {
        date: new Date().toISOString(),
        settings,
        benchmarks: Object.fromEntries(results.map((r) => [r.name, r.report])),
      },
      null,
      2,
    )}\n`,
  );
  console.log(`\nresults: ${path.relative(process.cwd(), RESULTS)}`);
  if (broken.length > 0) {
    console.error(`bench: broke (see their output above): ${broken.join(", ")}`);
    process.exitCode = 1;
  }
}

/** Runs one benchmark in a fresh process (this script, same loader flags) for its report. */
async function runInChild(name: string): Promise<BenchReport> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "bench-"));
  const file = path.join(dir, "report.json");
  try {
    const child = spawn(
      process.execPath,
      [...process.execArgv, fileURLToPath(import.meta.url), name],
      {
        stdio: ["ignore", "inherit", "inherit"],
        env: { ...process.env, BENCH_REPORT_FILE: file },
      },
    );
    children.add(child);
    const code = await new Promise<number | null>((resolve, reject) => {
      child.once("error", reject);
      child.once("exit", (exitCode) => resolve(exitCode));
    });
    children.delete(child);
    if (code !== 0) throw new Error(`benchmark ${name} failed (exit code ${String(code)})`);
    return JSON.parse(await readFile(file, "utf8")) as BenchReport;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

const children = new Set<ChildProcess>();

async function shutdown(code: number): Promise<never> {
  for (const child of children) child.kill("SIGTERM");
  await Promise.allSettled([...activeCleanups].map((c) => c.run()));
  process.exit(code);
}

process.once("SIGINT", () => void shutdown(130));
process.once("SIGTERM", () => void shutdown(143));

main().then(
  // Every cleanup has run. Agenda (task-overhead runs workers) leaves a timer of half the job
  // lock lifetime, 60 s, per job it ran, which would keep the process alive that long.
  () => process.exit(process.exitCode ?? 0),
  (error: unknown) => {
    console.error(error instanceof Error ? (error.stack ?? error.message) : error);
    void shutdown(1);
  },
);
