/*
 * `npm run bench -- build-cache`: a Go package's checks at warm-cache speed (issue 41 item 7).
 * Verification ran `go test ./...` of a two-file package in 39–81 s per run, because every
 * run (the base's too) compiled the standard library into an empty build cache; on the host,
 * with its cache warm, the same run takes about half a second. The build caches are now kept
 * per account and repository (util/sandbox-cache.ts, withBuildCache).
 *
 * Measured, alternating run by run so the machine's load weighs on both alike:
 *   host     `go test ./...` with a build cache of its own (GOCACHE in a temp folder), warmed
 *            by one unmeasured run: what a developer's machine does.
 *   sandbox  the same command through runSandboxed with the account's caches, as
 *            verification runs it, after one unmeasured run that fills the build cache.
 * Both as `go test ./...` (Go may answer from its test cache: the warm developer's case) and
 * as `go test -count=1 ./...` (the tests run; only compiling is saved). Also the first run
 * into an empty build cache, once, for the record. Target: sandbox ≤ 2× host (medians).
 * BENCH_BUILD_CACHE_RUNS (default 7) runs of each.
 */
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { promisify } from "node:util";
import { configureSandboxCaches, removeTree, withBuildCache } from "../src/util/sandbox-cache.js";
import { runSandboxed } from "../src/util/sandbox.js";
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
} from "./lib/harness.js";

/** The sandboxed run may take at most this many times the warm host run. */
export const TARGET_RATIO = 2;
const execFileAsync = promisify(execFile);
const COMMANDS = ["go test ./...", "go test -count=1 ./..."] as const;

/** The two-file package of the issue: a function and its test. */
async function writePackage(dir: string): Promise<void> {
  await mkdir(dir);
  await writeFile(path.join(dir, "go.mod"), "module example.com/calc\n\ngo 1.21\n");
  await writeFile(
    path.join(dir, "calc.go"),
    'package calc\n\nimport "strings"\n\n// Shout upper-cases s.\nfunc Shout(s string) string { return strings.ToUpper(s) + "!" }\n',
  );
  await writeFile(
    path.join(dir, "calc_test.go"),
    'package calc\n\nimport "testing"\n\nfunc TestShout(t *testing.T) {\n\tif got := Shout("hi"); got != "HI!" {\n\t\tt.Fatalf("Shout(hi) = %q", got)\n\t}\n}\n',
  );
}

async function hostRun(command: string, cwd: string, gocache: string): Promise<number> {
  const [file, ...args] = command.split(" ") as [string, ...string[]];
  const started = performance.now();
  await execFileAsync(file, args, { cwd, env: { ...process.env, GOCACHE: gocache } });
  return performance.now() - started;
}

async function sandboxRun(command: string, cwd: string): Promise<number> {
  const cache = await withBuildCache({ account: "acct_bench", repo: "ws/calc" }, undefined);
  const result = await runSandboxed(command, { cwd, timeoutMs: 600_000, cache });
  if (!result.ok)
    throw new BenchError(`\`${command}\` failed in the sandbox:\n${result.output.slice(-2000)}`);
  return result.durationMs;
}

const ms = (n: number) => `${n.toFixed(0)} ms`;

export const buildCacheBench: Benchmark = {
  name: "build-cache",
  description:
    "go test ./... of a small package in the sandbox with the kept build cache vs on the host",
  async run(): Promise<BenchReport> {
    const runs = envInt("BENCH_BUILD_CACHE_RUNS", 7, 1, 100);
    const cleanup = new Cleanup();
    activeCleanups.add(cleanup);
    try {
      const tmp = await mkdtemp(path.join(os.tmpdir(), "foreman-bench-build-cache-"));
      cleanup.defer("remove temp folder", () => removeTree(tmp));
      configureSandboxCaches({ root: path.join(tmp, "caches") });
      cleanup.defer("restore cache settings", () => configureSandboxCaches({}));
      const pkg = path.join(tmp, "calc");
      await writePackage(pkg);
      const gocache = path.join(tmp, "host-gocache");

      const coldHost = await hostRun("go test -count=1 ./...", pkg, gocache);
      const coldSandbox = await sandboxRun("go test -count=1 ./...", pkg);
      console.log(
        `  first run, empty build cache: host ${ms(coldHost)}, sandbox ${ms(coldSandbox)}`,
      );

      const latencies = [];
      const checks: Check[] = [];
      const info: Record<string, unknown> = {
        runs,
        coldHostMs: coldHost,
        coldSandboxMs: coldSandbox,
      };
      for (const command of COMMANDS) {
        await hostRun(command, pkg, gocache);
        await sandboxRun(command, pkg);
        const { base: host, measured: boxed } = await alternateRuns(
          runs,
          () => hostRun(command, pkg, gocache),
          () => sandboxRun(command, pkg),
        );
        const compared = medianRatioCheck(
          `sandbox/host \`${command}\` (warm)`,
          { label: `host ${command}`, ms: host },
          { label: `sandbox ${command}`, ms: boxed },
          TARGET_RATIO,
          `${ms(median(boxed))} in the sandbox / ${ms(median(host))} on the host (medians of ${runs}); the first run into an empty cache took ${ms(coldSandbox)}`,
        );
        console.log(
          `  \`${command}\`: host median ${ms(median(host))}, sandbox median ${ms(median(boxed))}, ratio ${compared.ratio.toFixed(2)}`,
        );
        latencies.push(...compared.latencies);
        checks.push(compared.check);
        info[command] = { hostMs: host, sandboxMs: boxed };
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
