/*
 * `npm run bench -- test-reports`: what reading a check per test costs (issue 41, "for each
 * runner, the time its report adds to a test run against the same run without it; target
 * ≤ 5%"). For each runner's fixture repository (test/fixtures/test-runners/<runner>: a passing
 * test, a failing one, a skipped one), the same command through the sandbox as verification
 * runs it:
 *   plain     runSandboxed(command): the repository's command as it is
 *   reported  runWithTests(command) (src/verify/tests): the runner's report added (NODE_OPTIONS,
 *             PYTEST_ADDOPTS, -json, reporter flags), the report read and parsed per test
 * vitest, jest and mocha are installed by the setup step from the registry into a package
 * cache that outlives the run (one install per lockfile on a machine); go and cargo keep their
 * build outputs (the account's build cache).
 *
 * Measured in pairs after one unmeasured run of each: each pair is one plain and one reported
 * run back to back, the order swapped from pair to pair (plain first, then reported first), so
 * a load that comes and goes on the machine weighs on both alike. The figure is the median of
 * the pairs' own ratios (reported/plain), with their spread (the middle half, p25–p75, and the
 * lowest and highest): a ratio of two medians taken over minutes of a shared machine's load
 * moved ±20% from one run to the next. The CPU time of each run's whole process tree is
 * compared the same way: what the report's work costs, which the machine's load hardly moves
 * (wall time is what a task waits, and moves with the load). Pairs go on until BENCH_TEST_REPORTS_RUNS (default 15)
 * or BENCH_TEST_REPORTS_SECONDS (default 60) per runner, whichever comes first, at least 5.
 * BENCH_TEST_REPORTS_ONLY=go,pytest picks runners. All eight take longer than the default
 * BENCH_TIMEOUT_S on a 2-core machine: give it 1500.
 */
import { cp, mkdtemp, readFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { withBuildCache, removeTree, type SandboxCache } from "../src/sandbox/cache.js";
import { DEFAULT_SETUP_ALLOW } from "../src/sandbox/setup-proxy.js";
import { runSandboxed } from "../src/sandbox/index.js";
import { runWithTests } from "../src/verify/tests/index.js";
import { runSetup } from "../src/verify/setup.js";
import {
  activeCleanups,
  BenchError,
  Cleanup,
  envInt,
  median,
  medianRatioCheck,
  type Benchmark,
  type BenchReport,
  type Check,
  type LatencySummary,
} from "./lib/harness.js";

/** The report may add at most this share to a test run. */
export const TARGET_RATIO = 1.05;
const FIXTURES = fileURLToPath(new URL("../test/fixtures/test-runners/", import.meta.url));

/** Each runner's fixture and the command a repository would name for it. */
const RUNNERS: ReadonlyArray<{ runner: string; command: string; install?: true }> = [
  { runner: "node-test", command: "npm test" },
  { runner: "vitest", command: "npm test", install: true },
  { runner: "jest", command: "npm test", install: true },
  { runner: "mocha", command: "npx mocha", install: true },
  { runner: "pytest", command: "pytest" },
  { runner: "unittest", command: "python3 -m unittest -v" },
  // -count=1: the tests run each time (Go would otherwise answer both from its test cache).
  { runner: "go", command: "go test -count=1 ./..." },
  { runner: "cargo", command: "cargo test --offline" },
];

function selected(): typeof RUNNERS {
  const only = (process.env.BENCH_TEST_REPORTS_ONLY ?? "").trim();
  if (!only) return RUNNERS;
  const names = only.split(",").map((n) => n.trim());
  const unknown = names.filter((n) => !RUNNERS.some((r) => r.runner === n));
  if (unknown.length)
    throw new BenchError(
      `BENCH_TEST_REPORTS_ONLY: unknown ${unknown.join(", ")}; known: ${RUNNERS.map((r) => r.runner).join(", ")}`,
    );
  return RUNNERS.filter((r) => names.includes(r.runner));
}

/** The fixture's copy with its caches: the setup step's entry where it installs. */
async function prepare(
  cleanup: Cleanup,
  runner: string,
  install: boolean,
): Promise<{ dir: string; cache: SandboxCache }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), `foreman-bench-${runner}-`));
  cleanup.defer(`remove ${runner} copy`, () => removeTree(dir));
  await cp(path.join(FIXTURES, runner), dir, { recursive: true });
  const owner = { account: "bench-test-reports", repo: runner };
  let entry: SandboxCache | undefined;
  if (install) {
    const setup = await runSetup({
      workdir: dir,
      owner,
      allow: DEFAULT_SETUP_ALLOW,
      timeoutMs: 300_000,
      log: () => undefined,
    });
    if (!setup.ok || !setup.cache)
      throw new BenchError(`${runner}: the setup step failed: ${setup.error ?? "no cache"}`);
    entry = setup.cache;
  }
  return { dir, cache: await withBuildCache(owner, entry) };
}

/** The value at share `q` (0–1) of sorted `values`, interpolated. */
function quantile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (sorted.length - 1) * q;
  const low = Math.floor(at);
  const high = Math.ceil(at);
  return sorted[low]! + (sorted[high]! - sorted[low]!) * (at - low);
}

/** The fewest pairs measured, whatever the time bound. */
export const MIN_PAIRS = 5;

/** Paired run times and each pair's ratio (measured/base). */
export interface Pairs {
  base: number[];
  measured: number[];
  ratios: number[];
}

/**
 * Pairs of a `base` and a `measured` run back to back, the order swapped each pair (so a load
 * coming and going weighs on both alike), until `maxPairs` or `budgetMs` (at least MIN_PAIRS).
 */
export async function pairedRuns(
  base: () => Promise<number>,
  measured: () => Promise<number>,
  limits: { maxPairs: number; budgetMs: number },
): Promise<Pairs> {
  const out: Pairs = { base: [], measured: [], ratios: [] };
  const started = performance.now();
  for (let i = 0; i < Math.max(limits.maxPairs, MIN_PAIRS); i++) {
    if (i >= MIN_PAIRS && performance.now() - started > limits.budgetMs) break;
    let a: number;
    let b: number;
    if (i % 2 === 0) {
      a = await base();
      b = await measured();
    } else {
      b = await measured();
      a = await base();
    }
    out.base.push(a);
    out.measured.push(b);
    out.ratios.push(b / a);
  }
  return out;
}

/** The pairs' ratio (their median) and its spread: the middle half and the extremes. */
export function ratioSpread(ratios: number[]) {
  return {
    ratio: median(ratios),
    p25: quantile(ratios, 0.25),
    p75: quantile(ratios, 0.75),
    min: Math.min(...ratios),
    max: Math.max(...ratios),
  };
}

/**
 * CPU time of this process and of its ended children (Linux: /proc/self/stat's utime, stime,
 * cutime and cstime), in ms. The sandbox's processes are waited for by the process that
 * started them, up to this one, so a run's whole tree is counted once it has ended; unlike
 * wall time, a loaded machine hardly moves it.
 */
export async function cpuMs(): Promise<number> {
  const stat = await readFile("/proc/self/stat", "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // Fields 14–17 of stat(5), counted from the state (field 3) here.
  const ticks = [11, 12, 13, 14].reduce((sum, i) => sum + Number(fields[i]), 0);
  return (ticks * 1000) / CLOCK_TICKS;
}
/** sysconf(_SC_CLK_TCK): 100 on every Linux the service runs on. */
const CLOCK_TICKS = 100;

/** Pairs of a plain and a reported run of one runner's command (pairedRuns). */
async function measure(
  command: string,
  options: { cwd: string; cache: SandboxCache },
  limits: { maxPairs: number; budgetMs: number },
): Promise<{
  plain: number[];
  reported: number[];
  ratios: number[];
  cpuRatios: number[];
  tests: number;
}> {
  const sandbox = { ...options, timeoutMs: 300_000 };
  await runSandboxed(command, sandbox);
  const first = await runWithTests(command, sandbox);
  if (!first.tests?.tests.length)
    throw new BenchError(`\`${command}\` gave no tests:\n${first.result.output.slice(-1500)}`);
  // Both timed the same way, around the call (the sandbox's own durationMs leaves out its
  // set-up and clean-up): the reported one is the whole of what verification does, the run
  // with its report and reading it.
  const cpu = { plain: [] as number[], reported: [] as number[] };
  const timed = async (run: () => Promise<unknown>, into: number[]) => {
    const [started, cpuStarted] = [performance.now(), await cpuMs()];
    await run();
    const wall = performance.now() - started;
    into.push((await cpuMs()) - cpuStarted);
    return wall;
  };
  const pairs = await pairedRuns(
    () => timed(() => runSandboxed(command, sandbox), cpu.plain),
    () => timed(() => runWithTests(command, sandbox), cpu.reported),
    limits,
  );
  return {
    plain: pairs.base,
    reported: pairs.measured,
    ratios: pairs.ratios,
    cpuRatios: cpu.reported.map((ms, i) => ms / Math.max(cpu.plain[i]!, 1)),
    tests: first.tests.tests.length,
  };
}

const ms = (n: number) => `${n.toFixed(0)} ms`;

export const testReportsBench: Benchmark = {
  name: "test-reports",
  description: "each runner's test run with its report read per test vs the same run without",
  async run(): Promise<BenchReport> {
    const runs = envInt("BENCH_TEST_REPORTS_RUNS", 15, MIN_PAIRS, 200);
    const budgetMs = envInt("BENCH_TEST_REPORTS_SECONDS", 60, 1, 3600) * 1000;
    const cleanup = new Cleanup();
    activeCleanups.add(cleanup);
    try {
      const latencies: LatencySummary[] = [];
      const checks: Check[] = [];
      const info: Record<string, unknown> = { maxPairs: runs, budgetMs };
      const table: string[] = [];
      for (const { runner, command, install } of selected()) {
        const { dir, cache } = await prepare(cleanup, runner, install === true);
        const m = await measure(command, { cwd: dir, cache }, { maxPairs: runs, budgetMs });
        const spread = ratioSpread(m.ratios);
        const ratio = spread.ratio;
        const pct = (r: number) => `${r >= 1 ? "+" : ""}${((r - 1) * 100).toFixed(1)}%`;
        const cpu = ratioSpread(m.cpuRatios);
        const line = `${runner} \`${command}\` (${m.tests} tests, ${m.ratios.length} pairs): plain ${ms(median(m.plain))}, with its report ${ms(median(m.reported))}; wall time added ${pct(ratio)} (middle half ${pct(spread.p25)} … ${pct(spread.p75)}, all ${pct(spread.min)} … ${pct(spread.max)}); CPU time added ${pct(cpu.ratio)} (middle half ${pct(cpu.p25)} … ${pct(cpu.p75)})`;
        console.log(`  ${line}`);
        table.push(line);
        const compared = medianRatioCheck(
          `${runner}: report/plain`,
          { label: `${runner} plain`, ms: m.plain },
          { label: `${runner} report`, ms: m.reported },
          TARGET_RATIO,
          line,
        );
        latencies.push(...compared.latencies);
        // The check is the median of the pairs' ratios, not the ratio of the two medians.
        checks.push({ ...compared.check, value: ratio, pass: ratio <= TARGET_RATIO });
        info[runner] = {
          command,
          plainMs: m.plain,
          reportedMs: m.reported,
          ratios: m.ratios,
          ratio,
          spread,
          cpuRatios: m.cpuRatios,
          cpu,
          tests: m.tests,
        };
      }
      console.log(
        `\n  report cost per runner (median of paired ratios):\n    ${table.join("\n    ")}`,
      );
      return {
        subjects: [],
        latencies,
        checks,
        info: { ...info, cpus: os.availableParallelism() },
      };
    } finally {
      await cleanup.run();
      activeCleanups.delete(cleanup);
    }
  },
};
