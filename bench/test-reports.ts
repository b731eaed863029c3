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
 * moved ±20% from one run to the next. Pairs go on until BENCH_TEST_REPORTS_RUNS (default 15)
 * or BENCH_TEST_REPORTS_SECONDS (default 60) per runner, whichever comes first, at least 5.
 * BENCH_TEST_REPORTS_ONLY=go,pytest picks runners. All eight take longer than the default
 * BENCH_TIMEOUT_S on a 2-core machine: give it 1500.
 */
import { cp, mkdtemp } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { withBuildCache, removeTree, type SandboxCache } from "../src/util/sandbox-cache.js";
import { DEFAULT_SETUP_ALLOW } from "../src/util/setup-proxy.js";
import { runSandboxed } from "../src/util/sandbox.js";
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
const MIN_PAIRS = 5;

/**
 * Pairs of a plain and a reported run of one runner's command, the order swapped each pair,
 * until `maxPairs` or `budgetMs` (at least MIN_PAIRS).
 */
async function measure(
  command: string,
  options: { cwd: string; cache: SandboxCache },
  maxPairs: number,
  budgetMs: number,
): Promise<{ plain: number[]; reported: number[]; ratios: number[]; tests: number }> {
  const sandbox = { ...options, timeoutMs: 300_000 };
  await runSandboxed(command, sandbox);
  const first = await runWithTests(command, sandbox);
  if (!first.tests?.tests.length)
    throw new BenchError(`\`${command}\` gave no tests:\n${first.result.output.slice(-1500)}`);
  // Both timed the same way, around the call (the sandbox's own durationMs leaves out its
  // set-up and clean-up): the reported one is the whole of what verification does, the run
  // with its report and reading it.
  const timed = async (run: () => Promise<unknown>) => {
    const started = performance.now();
    await run();
    return performance.now() - started;
  };
  const plainRun = () => timed(() => runSandboxed(command, sandbox));
  const reportedRun = () => timed(() => runWithTests(command, sandbox));
  const out = { plain: [] as number[], reported: [] as number[], ratios: [] as number[] };
  const started = performance.now();
  for (let i = 0; i < maxPairs; i++) {
    if (i >= MIN_PAIRS && performance.now() - started > budgetMs) break;
    let plain: number;
    let reported: number;
    if (i % 2 === 0) {
      plain = await plainRun();
      reported = await reportedRun();
    } else {
      reported = await reportedRun();
      plain = await plainRun();
    }
    out.plain.push(plain);
    out.reported.push(reported);
    out.ratios.push(reported / plain);
  }
  return { ...out, tests: first.tests.tests.length };
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
        const m = await measure(command, { cwd: dir, cache }, runs, budgetMs);
        const ratio = median(m.ratios);
        const spread = {
          p25: quantile(m.ratios, 0.25),
          p75: quantile(m.ratios, 0.75),
          min: Math.min(...m.ratios),
          max: Math.max(...m.ratios),
        };
        const pct = (r: number) => `${r >= 1 ? "+" : ""}${((r - 1) * 100).toFixed(1)}%`;
        const line = `${runner} \`${command}\` (${m.tests} tests, ${m.ratios.length} pairs): plain ${ms(median(m.plain))}, with its report ${ms(median(m.reported))}; added ${pct(ratio)} (middle half ${pct(spread.p25)} … ${pct(spread.p75)}, all ${pct(spread.min)} … ${pct(spread.max)})`;
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
