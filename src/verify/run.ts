/*
 * Runs a VerifyPlan through the sandbox and turns the results into text for the model (what
 * failed and why) and for the task log (one line).
 */
import type { CommandTimeBudget } from "../sandbox/command-time.js";
import { redactText } from "../util/redact.js";
import {
  describeResult,
  diskBudgetFailure,
  runSandboxed,
  type SandboxCache,
  type SandboxOptions,
  type SandboxResult,
} from "../sandbox/index.js";
import type { Check, VerifyPlan } from "./checks.js";
import { runWithTests, type TestRun } from "./tests/index.js";

export interface CheckOutcome {
  check: Check;
  result: SandboxResult;
  /**
   * What the check did test by test, from its runner's report or output (verify/tests/);
   * null for an install step and for a check whose output cannot be read per test.
   */
  tests: TestRun | null;
}

export interface VerifyOutcome {
  install: CheckOutcome[];
  results: CheckOutcome[];
  passed: Check[];
  failed: Check[];
  /** Checks never started because an install step failed. */
  skipped: Check[];
  /** True when every install step and check passed (also true when there were no checks). */
  ok: boolean;
  durationMs: number;
}

export type CheckKind = "install" | "check";

export interface RunChecksOptions {
  cwd: string;
  timeoutMs: number;
  signal?: AbortSignal;
  onStart?(check: Check, kind: CheckKind): void | Promise<void>;
  onResult?(outcome: CheckOutcome, kind: CheckKind): void | Promise<void>;
  /** Installs download and build; they may need longer than a check. Defaults to timeoutMs. */
  installTimeoutMs?: number;
  /** The package cache of the task's account and repository (sandbox/cache.ts). */
  cache?: SandboxCache | undefined;
  /** Every SANDBOX_HEARTBEAT_S while a check runs, with how long it has run. */
  onHeartbeat?(check: Check, elapsedMs: number): void;
  /** The folder whose whole tree the disk budget counts, when cwd is inside it (SandboxOptions). */
  budgetRoot?: string;
  /** The task's TASK_COMMAND_TIME_LIMIT_S (sandbox/command-time.ts). */
  timeBudget?: CommandTimeBudget | undefined;
}

/** Throws the abort reason: a cancelled task stops here rather than reporting a failure. */
function stopIfAborted(signal: AbortSignal | undefined): void {
  signal?.throwIfAborted();
}

/**
 * Runs the install steps (stopping at the first failure, since checks without dependencies
 * only fail noisily) and then every check, even after one fails, so the model sees every
 * failure in one round. Throws DiskBudgetError (a StageError) when a command went past
 * TASK_DISK_LIMIT_MB.
 */
export async function runChecks(
  plan: VerifyPlan,
  options: RunChecksOptions,
): Promise<VerifyOutcome> {
  const started = performance.now();
  const outcome: VerifyOutcome = {
    install: [],
    results: [],
    passed: [],
    failed: [],
    skipped: [],
    ok: true,
    durationMs: 0,
  };

  async function runOne(check: Check, kind: CheckKind): Promise<CheckOutcome> {
    stopIfAborted(options.signal);
    await options.onStart?.(check, kind);
    const sandbox: SandboxOptions = {
      cwd: options.cwd,
      timeoutMs:
        kind === "install" ? (options.installTimeoutMs ?? options.timeoutMs) : options.timeoutMs,
      ...(options.signal ? { signal: options.signal } : {}),
      ...(options.cache ? { cache: options.cache } : {}),
      ...(options.budgetRoot ? { budgetRoot: options.budgetRoot } : {}),
      ...(options.timeBudget ? { timeBudget: options.timeBudget } : {}),
      ...(options.onHeartbeat
        ? { onHeartbeat: (ms: number) => options.onHeartbeat?.(check, ms) }
        : {}),
    };
    // A check runs with its test runner's report; an install step has no tests to read.
    const { result, tests } =
      kind === "check"
        ? await runWithTests(check.command, sandbox)
        : { result: await runSandboxed(check.command, sandbox), tests: null };
    if (result.aborted) {
      stopIfAborted(options.signal);
      // The sandbox only reports an abort for an aborted signal; this is a safety net.
      throw new Error(`verification was cancelled during ${check.name}`);
    }
    const done: CheckOutcome = { check, result, tests };
    (result.ok ? outcome.passed : outcome.failed).push(check);
    await options.onResult?.(done, kind);
    // Past TASK_DISK_LIMIT_MB: the task fails here; it is not a failure for the model to fix.
    const overBudget = diskBudgetFailure(result, "task");
    if (overBudget) throw overBudget;
    return done;
  }

  for (const [index, check] of plan.install.entries()) {
    const done = await runOne(check, "install");
    outcome.install.push(done);
    if (!done.result.ok) {
      outcome.skipped = [...plan.install.slice(index + 1), ...plan.checks];
      break;
    }
  }
  if (outcome.failed.length === 0) {
    for (const check of plan.checks) outcome.results.push(await runOne(check, "check"));
  }

  outcome.ok = outcome.failed.length === 0;
  outcome.durationMs = Math.round(performance.now() - started);
  return outcome;
}

/** How a check ended, in a few words: "passed", "failed (exit 1)", "timed out". */
function status(result: SandboxResult): string {
  if (result.ok) return "passed";
  if (result.timedOut) return "timed out";
  if (result.aborted) return "cancelled";
  if (result.exitCode !== null) return `failed (exit ${result.exitCode})`;
  return `killed (${result.signal ?? "signal"})`;
}

/** Names come from repository config or are commands, so they may hold a secret too. */
function shownName(check: Check): string {
  return redactText(check.name);
}

/** One line for the task log, e.g. "3 checks: typecheck passed, lint passed, test failed (exit 1)". */
export function summarizeChecks(outcome: VerifyOutcome): string {
  const failedInstall = outcome.install.find((o) => !o.result.ok);
  if (failedInstall) {
    const notRun = outcome.skipped.map(shownName).join(", ");
    const rest = notRun === "" ? "" : `; not run: ${notRun}`;
    return `Install step \`${failedInstall.result.command}\` ${status(failedInstall.result)}${rest}`;
  }
  const count = outcome.results.length;
  if (count === 0) return "No checks run";
  const parts = outcome.results.map((o) => `${shownName(o.check)} ${status(o.result)}`);
  return `${count} ${count === 1 ? "check" : "checks"}: ${parts.join(", ")}`;
}

const OMITTED = "[… earlier output omitted …]\n";
/** How far past a cut a tail may start to begin on a whole line. */
const LINE_SNAP_CHARS = 200;

/** The last `budget` characters of `output` at most, marked when cut. */
function tail(output: string, budget: number): string {
  if (output.length <= budget) return output;
  if (budget <= OMITTED.length) return "";
  let start = output.length - (budget - OMITTED.length);
  const newline = output.indexOf("\n", start);
  if (newline !== -1 && newline - start < LINE_SNAP_CHARS && newline + 1 < output.length) {
    start = newline + 1;
  } else if (/[\udc00-\udfff]/.test(output[start] ?? "")) {
    start++; // do not begin with half of a surrogate pair
  }
  return OMITTED + output.slice(start);
}

/*
 * Shares `total` characters between outputs of the given lengths: an output shorter than its
 * equal share keeps all of itself and leaves the rest to the longer ones.
 */
function shareBudget(lengths: number[], total: number): number[] {
  const shares = lengths.map(() => 0);
  let left = Math.max(0, total);
  let open = lengths.map((_, i) => i);
  while (open.length > 0 && left > 0) {
    const even = Math.floor(left / open.length);
    const small = open.filter((i) => (lengths[i] ?? 0) <= even);
    if (small.length === 0) {
      for (const i of open) shares[i] = even;
      break;
    }
    for (const i of small) {
      shares[i] = lengths[i] ?? 0;
      left -= shares[i] ?? 0;
    }
    open = open.filter((i) => !small.includes(i));
  }
  return shares;
}

/**
 * What failed, for the model and the task log: per failed install step or check a header
 * `### name (`command`): how it ended` and the tail of its output, the tails sharing what
 * `maxChars` leaves after the headers. Never longer than `maxChars`; "" when nothing failed.
 */
export function failureReport(outcome: VerifyOutcome, maxChars = 12_000): string {
  const failures = [...outcome.install, ...outcome.results].filter((o) => !o.result.ok);
  if (failures.length === 0) return "";

  const headers = failures.map(
    (o) => `### ${shownName(o.check)} (\`${o.result.command}\`): ${describeResult(o.result)}\n`,
  );
  const footer =
    outcome.skipped.length > 0
      ? `\nNot run because an install step failed: ${outcome.skipped.map(shownName).join(", ")}.\n`
      : "";
  const bodies = failures.map((o) => {
    const text = o.result.output.trimEnd();
    return text === "" ? "(no output)" : text;
  });
  // Each part but the last is followed by a blank line; each body by its newline.
  const fixed =
    headers.reduce((sum, h) => sum + h.length, 0) + failures.length * 2 - 1 + footer.length;
  const shares = shareBudget(
    bodies.map((b) => b.length),
    maxChars - fixed,
  );
  const parts = failures.map((_, i) => `${headers[i]}${tail(bodies[i] ?? "", shares[i] ?? 0)}\n`);
  const report = parts.join("\n") + footer;
  // Only when the headers alone exceed the budget (many failures, a tiny maxChars).
  return report.length > maxChars ? report.slice(0, maxChars) : report;
}
