import { runSandboxed } from "../sandbox/index.js";
import { runWithTests, type TestRun as ReadTests } from "../verify/tests/index.js";
import type { BacktestEcosystem, TestCommand, TestOutcome } from "./ecosystems.js";

/** What one run of a case's selected tests gave. */
export interface TestRun {
  results: Map<string, TestOutcome>;
  /** Time spent in the repository's own test commands. */
  ms: number;
  /** The last lines of a failing run's output, for reports. */
  tail: string;
}

export interface RunSettings {
  timeoutMs: number;
  /** A command run once in each fresh tree before its tests (e.g. `npm ci`), in the sandbox. */
  setup?: string | undefined;
}

/** Runs the setup command (if any) in a fresh tree; throws with its output when it fails. */
export async function setupTree(dir: string, settings: RunSettings): Promise<number> {
  if (!settings.setup) return 0;
  const result = await runSandboxed(settings.setup, { cwd: dir, timeoutMs: settings.timeoutMs });
  if (!result.ok)
    throw new Error(`setup \`${settings.setup}\` failed: ${result.output.slice(-500)}`);
  return result.durationMs;
}

/** Runs the selected tests of `testFiles` in the tree at `dir`, in the sandbox. */
export async function runTests(
  dir: string,
  ecosystem: BacktestEcosystem,
  testFiles: string[],
  settings: RunSettings,
): Promise<TestRun> {
  const commands = await ecosystem.commands(dir, testFiles);
  const results = new Map<string, TestOutcome>();
  let ms = 0;
  let tail = "";
  for (const c of commands) {
    // What verification reads, the same way: each runner's report, its output as a fallback.
    const { result: run, tests } = await runWithTests(c.command, {
      cwd: dir,
      timeoutMs: settings.timeoutMs,
      env: { CI: "true" },
      // A large suite's output read as a fallback must not be cut in the middle.
      maxOutputBytes: 16 * 1024 * 1024,
    });
    ms += run.durationMs;
    for (const [id, outcome] of outcomes(c, tests, run.timedOut ? null : run.exitCode))
      results.set(id, outcome);
    if (!run.ok) tail = run.output.split("\n").slice(-20).join("\n");
  }
  return { results, ms, tail };
}

/**
 * A run's results by test id: passed and failed tests (a skipped one is neither); a
 * whole-file command that names no test stands for its file, judged by its exit status.
 */
function outcomes(
  command: TestCommand,
  tests: ReadTests | null,
  exitCode: number | null,
): Map<string, TestOutcome> {
  const read = new Map<string, TestOutcome>();
  for (const t of tests?.tests ?? [])
    if (t.status !== "skipped") read.set(t.id, t.status === "passed" ? "pass" : "fail");
  if (command.wholeFile !== undefined && read.size === 0)
    read.set(command.wholeFile, exitCode === 0 ? "pass" : "fail");
  return read;
}

/** Two runs' results are the same test for test. */
export function sameResults(a: Map<string, TestOutcome>, b: Map<string, TestOutcome>): boolean {
  if (a.size !== b.size) return false;
  for (const [id, outcome] of a) if (b.get(id) !== outcome) return false;
  return true;
}
