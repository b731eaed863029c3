/*
 * `npm run bench -- sandbox`: what the bubblewrap boundary (src/sandbox/sandbox.ts) costs. The
 * same runner runs the same command with SANDBOX=bwrap and SANDBOX=none, alternating run by
 * run so a change in the machine's load weighs on both alike:
 *
 * - `true`: the fixed cost per command (namespaces, mounts, rlimits). Target: < 50 ms more.
 * - `npm test` of a small repository (the calc fixture, fixed: node --test, passing): the
 *   cost on a real test run. Target: < 10% more.
 * - `true` with SANDBOX_NETWORK=public as well: what bringing up the public network costs
 *   per command (slirp4netns and the rules of src/sandbox/network.ts). No target in
 *   issue 14; reported.
 *
 * - BENCH_SANDBOX_REPO (optional): the path of a real repository, its dependencies installed;
 *   its own `npm test`, bwrap vs none, a tenth of the runs (at least 3). The calc fixture's
 *   suite takes ~0.2 s, so the fixed cost per command is most of its ratio; a real suite
 *   takes seconds.
 *
 * Issue 26, in the same run:
 *
 * - the disk budget's watcher (TASK_DISK_LIMIT_MB, sandbox/disk.ts): `npm test` in bwrap
 *   with the watcher on (the default 2048 MB) and off. Target: < 5% more.
 * - the working copy at /workspace through its overlay mount vs bind-mounted at its host
 *   path (the internal `mount: "host"` option): `true` and `npm test`. Target: no change
 *   (reported; < 5% checked, as the run-to-run noise of a 0.2 s suite is about that).
 *
 * BENCH_SANDBOX_RUNS (default 20) runs of `true` per engine, a quarter of that (at least 5)
 * of `npm test`. Figures are medians.
 */
import { execFile } from "node:child_process";
import { mkdtemp, mkdir, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { CALC_BUGGY, CALC_FIX, calcRepoFiles } from "../test/helpers/calc-repo.js";
import { configureWorkdirVolumes, prepareWorkdir, removeWorkdir } from "../src/workcopy/volume.js";
import {
  checkSandbox,
  configureSandbox,
  runSandboxed,
  type SandboxOptions,
  type SandboxSettings,
} from "../src/sandbox/index.js";
import { BenchError, summariseLatencies, type Benchmark, type BenchReport } from "./lib/harness.js";

const TARGET_PER_COMMAND_MS = 50;
const TARGET_TEST_RATIO = 0.1;
const TARGET_DISK_WATCH_RATIO = 0.05;
const TARGET_MOUNT_RATIO = 0.05;

function runs(): number {
  const raw = process.env.BENCH_SANDBOX_RUNS;
  const value = raw === undefined || raw.trim() === "" ? 20 : Number(raw);
  if (!Number.isInteger(value) || value < 3 || value > 1000)
    throw new Error(`BENCH_SANDBOX_RUNS must be an integer from 3 to 1000, got "${raw}"`);
  return value;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/**
 * The configurations compared: no sandbox, the default sandbox, with the public network; the
 * default sandbox without the disk watcher, and with the working copy at its host path.
 */
const MODES = {
  none: { engine: "none" },
  bwrap: { engine: "bwrap" },
  public: { engine: "bwrap", network: "public" },
  noDiskWatch: { engine: "bwrap" },
  hostPath: { engine: "bwrap" },
  volume: { engine: "bwrap" },
} satisfies Record<string, Partial<SandboxSettings>>;
type Mode = keyof typeof MODES;
const RUN_OPTIONS: Partial<Record<Mode, Partial<SandboxOptions>>> = {
  noDiskWatch: { diskLimitMb: 0 },
  hostPath: { mount: "host" },
};

/**
 * The working copy of mode `volume`: the same files on a loop-mounted volume of the budget
 * (TASK_DISK_VOLUMES=auto, workcopy/volume.ts), bound at /workspace as it is.
 */
let volumeCopy: string | undefined;

/** What the disk watcher itself spent, per command (its walks and looks), by mode. */
const watcherBusy: Record<string, { runs: number; busyMs: number; walks: number }> = {};

/** Wall time of one run as the service sees it (setup, FIFO, teardown included). */
async function timed(mode: Mode, command: string, cwd: string): Promise<number> {
  configureSandbox(MODES[mode]);
  const started = performance.now();
  const where = mode === "volume" ? volumeCopy! : cwd;
  const result = await runSandboxed(command, {
    cwd: where,
    timeoutMs: 120_000,
    ...RUN_OPTIONS[mode],
  });
  const ms = performance.now() - started;
  if (result.diskWatch) {
    const entry = (watcherBusy[`${mode} ${command}`] ??= { runs: 0, busyMs: 0, walks: 0 });
    entry.runs++;
    entry.busyMs += result.diskWatch.busyMs;
    entry.walks += result.diskWatch.samples;
  }
  if (!result.ok)
    throw new BenchError(
      `\`${command}\` failed in mode ${mode} (exit ${result.exitCode}):\n${result.output.slice(-2000)}`,
    );
  return ms;
}

async function compare<M extends Mode>(
  command: string,
  cwd: string,
  count: number,
  modes: M[],
): Promise<Record<M, number[]>> {
  const times = Object.fromEntries(modes.map((mode) => [mode, [] as number[]])) as Record<
    M,
    number[]
  >;
  // One unmeasured run each: the first pays for cold caches (and the sandbox's mount list).
  for (const mode of modes) await timed(mode, command, cwd);
  for (let i = 0; i < count; i++) {
    // Rotate which goes first, so none always follows another.
    for (let j = 0; j < modes.length; j++) {
      const mode = modes[(i + j) % modes.length]!;
      times[mode].push(await timed(mode, command, cwd));
    }
  }
  return times;
}

const ms = (n: number) => `${n.toFixed(1)} ms`;

export const sandboxBench: Benchmark = {
  name: "sandbox",
  description:
    "the bubblewrap boundary's cost: `true` and a small `npm test`, bwrap vs none (and `true` with SANDBOX_NETWORK=public)",
  async run(): Promise<BenchReport> {
    const n = runs();
    const dir = await mkdtemp(path.join(os.tmpdir(), "foreman-bench-sandbox-"));
    try {
      const files = calcRepoFiles();
      files["src/math.ts"] = CALC_BUGGY.replace("return value;", CALC_FIX);
      for (const [name, content] of Object.entries(files)) {
        await mkdir(path.dirname(path.join(dir, name)), { recursive: true });
        await writeFile(path.join(dir, name), content);
      }
      // A real .git, so the read-only bind over it is part of what is measured.
      await promisify(execFile)("git", ["init", "-q"], { cwd: dir });
      configureSandbox({});
      await checkSandbox();
      configureSandbox(MODES.public);
      await checkSandbox();

      const trivial = await compare("true", dir, n, ["none", "bwrap", "public"]);
      const testRuns = Math.max(5, Math.floor(n / 4));
      const tests = await compare("npm test", dir, testRuns, [
        "none",
        "bwrap",
        "noDiskWatch",
        "hostPath",
      ]);
      const mounts = await compare("true", dir, n, ["bwrap", "hostPath"]);
      // The kernel's budget: the same files on a volume (where this host allows one).
      configureWorkdirVolumes("auto");
      const volumeWork = path.join(dir, "..", `${path.basename(dir)}-volume`, "work");
      const volumeMade = (await prepareWorkdir(volumeWork, 2048)) === "volume";
      let onVolume:
        | {
            tests: Record<"volume" | "hostPath", number[]>;
            trivial: Record<"volume" | "hostPath", number[]>;
          }
        | undefined;
      if (volumeMade) {
        volumeCopy = volumeWork;
        await promisify(execFile)("cp", ["-a", `${dir}/.`, volumeWork]);
        onVolume = {
          tests: await compare("npm test", dir, testRuns, ["volume", "hostPath"]),
          trivial: await compare("true", dir, n, ["volume", "hostPath"]),
        };
      }
      await removeWorkdir(volumeWork);
      await rm(path.dirname(volumeWork), { recursive: true, force: true });
      const repo = process.env.BENCH_SANDBOX_REPO?.trim() || undefined;
      const repoRuns = Math.max(3, Math.floor(n / 10));
      const repoTests = repo
        ? await compare("npm test", repo, repoRuns, ["none", "bwrap", "noDiskWatch", "hostPath"])
        : undefined;
      configureSandbox({});

      const perCommand = median(trivial.bwrap) - median(trivial.none);
      const publicPerCommand = median(trivial.public) - median(trivial.none);
      const testRatio = median(tests.bwrap) / median(tests.none) - 1;
      const diskWatchRatio = median(tests.bwrap) / median(tests.noDiskWatch) - 1;
      const mountRatio = median(tests.bwrap) / median(tests.hostPath) - 1;
      const mountPerCommand = median(mounts.bwrap) - median(mounts.hostPath);
      console.log(
        `  npm test: disk watcher on ${ms(median(tests.bwrap))}, off ${ms(median(tests.noDiskWatch))} ` +
          `(${(diskWatchRatio * 100).toFixed(1)}%); at /workspace ${ms(median(tests.bwrap))}, ` +
          `at the host path ${ms(median(tests.hostPath))} (${(mountRatio * 100).toFixed(1)}%)`,
      );
      for (const [what, entry] of Object.entries(watcherBusy))
        console.log(
          `  disk watcher in ${what}: ${(entry.busyMs / entry.runs).toFixed(1)} ms busy and ` +
            `${(entry.walks / entry.runs).toFixed(2)} walks per command (${entry.runs} commands)`,
        );
      console.log(
        `  true:     at /workspace (overlay) ${ms(median(mounts.bwrap))}, at the host path ` +
          `${ms(median(mounts.hostPath))} (${mountPerCommand >= 0 ? "+" : ""}${ms(mountPerCommand)})`,
      );
      const volumeRatio = onVolume
        ? median(onVolume.tests.volume) / median(onVolume.tests.hostPath) - 1
        : undefined;
      if (onVolume && volumeRatio !== undefined)
        console.log(
          `  on a volume (TASK_DISK_VOLUMES=auto): npm test ${ms(median(onVolume.tests.volume))} vs ` +
            `${ms(median(onVolume.tests.hostPath))} at the host path (${(volumeRatio * 100).toFixed(1)}%); ` +
            `true ${ms(median(onVolume.trivial.volume))} vs ${ms(median(onVolume.trivial.hostPath))}`,
        );
      else console.log("  (no loop-mounted volume on this host: TASK_DISK_VOLUMES not measured)");
      console.log(
        `  true:     none ${ms(median(trivial.none))}, bwrap ${ms(median(trivial.bwrap))} ` +
          `(+${ms(perCommand)}, medians of ${n})`,
      );
      console.log(
        `  true:     SANDBOX_NETWORK=public ${ms(median(trivial.public))} ` +
          `(+${ms(publicPerCommand)} over none, +${ms(median(trivial.public) - median(trivial.bwrap))} over bwrap)`,
      );
      console.log(
        `  npm test: none ${ms(median(tests.none))}, bwrap ${ms(median(tests.bwrap))} ` +
          `(+${(testRatio * 100).toFixed(1)}%, medians of ${testRuns})`,
      );
      const repoRatio = repoTests
        ? median(repoTests.bwrap) / median(repoTests.none) - 1
        : undefined;
      if (repoTests && repoRatio !== undefined)
        console.log(
          `  npm test of ${repo}: none ${ms(median(repoTests.none))}, bwrap ` +
            `${ms(median(repoTests.bwrap))} (+${(repoRatio * 100).toFixed(1)}%, medians of ${repoRuns}); ` +
            `disk watcher off ${ms(median(repoTests.noDiskWatch))}, at the host path ${ms(median(repoTests.hostPath))}`,
        );
      else console.log("  (BENCH_SANDBOX_REPO not set: no real repository's npm test measured)");
      return {
        subjects: [],
        latencies: [
          summariseLatencies("true, SANDBOX=none", [Float64Array.from(trivial.none)]),
          summariseLatencies("true, SANDBOX=bwrap", [Float64Array.from(trivial.bwrap)]),
          summariseLatencies("true, SANDBOX=bwrap, SANDBOX_NETWORK=public", [
            Float64Array.from(trivial.public),
          ]),
          summariseLatencies("npm test, SANDBOX=none", [Float64Array.from(tests.none)]),
          summariseLatencies("npm test, SANDBOX=bwrap", [Float64Array.from(tests.bwrap)]),
        ],
        checks: [
          {
            name: "sandbox cost per command",
            value: perCommand,
            target: TARGET_PER_COMMAND_MS,
            atMost: true,
            pass: perCommand <= TARGET_PER_COMMAND_MS,
            detail: `median \`true\` ${ms(median(trivial.bwrap))} in bwrap vs ${ms(median(trivial.none))} without`,
          },
          {
            name: "sandbox cost on npm test",
            value: testRatio,
            target: TARGET_TEST_RATIO,
            atMost: true,
            pass: testRatio <= TARGET_TEST_RATIO,
            detail: `median \`npm test\` ${ms(median(tests.bwrap))} in bwrap vs ${ms(median(tests.none))} without (the calc fixture, ~0.2 s)`,
          },
          {
            name: "disk budget watcher cost on npm test",
            value: diskWatchRatio,
            target: TARGET_DISK_WATCH_RATIO,
            atMost: true,
            pass: diskWatchRatio <= TARGET_DISK_WATCH_RATIO,
            detail: `median \`npm test\` ${ms(median(tests.bwrap))} with TASK_DISK_LIMIT_MB watched vs ${ms(median(tests.noDiskWatch))} without`,
          },
          {
            name: "/workspace (overlay) cost on npm test",
            value: mountRatio,
            target: TARGET_MOUNT_RATIO,
            atMost: true,
            pass: mountRatio <= TARGET_MOUNT_RATIO,
            detail: `median \`npm test\` ${ms(median(tests.bwrap))} at /workspace vs ${ms(median(tests.hostPath))} at the host path; \`true\` ${ms(median(mounts.bwrap))} vs ${ms(median(mounts.hostPath))}`,
          },
          ...(onVolume && volumeRatio !== undefined
            ? [
                {
                  name: "working copy on a volume (kernel disk budget, neutral /workspace) cost on npm test",
                  value: volumeRatio,
                  target: TARGET_MOUNT_RATIO,
                  atMost: true,
                  pass: volumeRatio <= TARGET_MOUNT_RATIO,
                  detail: `median \`npm test\` ${ms(median(onVolume.tests.volume))} on a volume vs ${ms(median(onVolume.tests.hostPath))} in a folder at the host path; \`true\` ${ms(median(onVolume.trivial.volume))} vs ${ms(median(onVolume.trivial.hostPath))}`,
                },
              ]
            : []),
          ...(repoTests && repoRatio !== undefined
            ? [
                {
                  name: `sandbox cost on ${path.basename(repo!)}'s npm test`,
                  value: repoRatio,
                  target: TARGET_TEST_RATIO,
                  atMost: true,
                  pass: repoRatio <= TARGET_TEST_RATIO,
                  detail: `median \`npm test\` ${ms(median(repoTests.bwrap))} in bwrap vs ${ms(median(repoTests.none))} without`,
                },
              ]
            : []),
        ],
        info: {
          runs: n,
          testRuns,
          trueMs: trivial,
          publicNetworkPerCommandMs: publicPerCommand,
          npmTestMs: tests,
          workspaceMountTrueMs: mounts,
          diskWatcherBusy: watcherBusy,
          diskWatchRatio,
          mountRatio,
          ...(onVolume
            ? { volumeNpmTestMs: onVolume.tests, volumeTrueMs: onVolume.trivial, volumeRatio }
            : {}),
          ...(repoTests ? { repo, repoNpmTestMs: repoTests } : {}),
          cpus: os.availableParallelism(),
          load: os.loadavg(),
        },
      };
    } finally {
      configureSandbox({});
      await rm(dir, { recursive: true, force: true });
    }
  },
};
