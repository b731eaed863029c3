/*
 * `npm run bench -- test-reports`: what reading a check per test costs (issue 41, "for each
 * runner, the time its report adds to a test run against the same run without it; target
 * ≤ 5%"). For each runner's fixture repository (test/fixtures/test-runners/<runner>: a passing
 * test, a failing one, a skipped one), the same command through the sandbox as verification
 * runs it:
 *   plain     runSandboxed(command): the repository's command as it is
 *   reported  runWithTests(command) (src/verify/tests): the runner's report added (NODE_OPTIONS,
 *             PYTEST_ADDOPTS, -json, reporter flags), the report read and parsed per test
 * alternating run by run after one unmeasured run of each, so the machine's load weighs on
 * both alike. vitest, jest and mocha are installed by the setup step from the registry into a
 * package cache that outlives the run (one install per lockfile on a machine); go and cargo
 * keep their build outputs (the account's build cache; cargo's target/ in the copy).
 * BENCH_TEST_REPORTS_RUNS (default 7) runs of each; BENCH_TEST_REPORTS_ONLY=go,pytest picks
 * runners. Figures are medians; the ratio is reported/plain. All eight take longer than the
 * default BENCH_TIMEOUT_S on a 2-core machine: give it 1500.
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
  alternateRuns,
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

/** Medians of `runs` alternating plain and reported runs of one runner's command. */
async function measure(
  command: string,
  options: { cwd: string; cache: SandboxCache },
  runs: number,
): Promise<{ plain: number[]; reported: number[]; tests: number }> {
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
  const { base: plain, measured: reported } = await alternateRuns(
    runs,
    () => timed(() => runSandboxed(command, sandbox)),
    () => timed(() => runWithTests(command, sandbox)),
  );
  return { plain, reported, tests: first.tests.tests.length };
}

const ms = (n: number) => `${n.toFixed(0)} ms`;

export const testReportsBench: Benchmark = {
  name: "test-reports",
  description: "each runner's test run with its report read per test vs the same run without",
  async run(): Promise<BenchReport> {
    const runs = envInt("BENCH_TEST_REPORTS_RUNS", 7, 1, 100);
    const cleanup = new Cleanup();
    activeCleanups.add(cleanup);
    try {
      const latencies: LatencySummary[] = [];
      const checks: Check[] = [];
      const info: Record<string, unknown> = { runs };
      for (const { runner, command, install } of selected()) {
        const { dir, cache } = await prepare(cleanup, runner, install === true);
        const m = await measure(command, { cwd: dir, cache }, runs);
        const compared = medianRatioCheck(
          `${runner}: report/plain`,
          { label: `${runner} plain`, ms: m.plain },
          { label: `${runner} report`, ms: m.reported },
          TARGET_RATIO,
          `\`${command}\`: ${ms(median(m.reported))} with the report read per test / ${ms(median(m.plain))} plain (medians of ${runs})`,
        );
        console.log(
          `  ${runner} \`${command}\` (${m.tests} tests): plain ${ms(median(m.plain))}, with its report ${ms(median(m.reported))}, ratio ${compared.ratio.toFixed(3)}`,
        );
        latencies.push(...compared.latencies);
        checks.push(compared.check);
        info[runner] = { command, plainMs: m.plain, reportedMs: m.reported, tests: m.tests };
      }
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
