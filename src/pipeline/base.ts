/*
 * The task's base results (verify/baseline.ts) as the stages use them: PLANNING starts the
 * base's checks beside the model (startBaseRun), VERIFYING takes that run over, or reads the
 * kept results, or runs what is missing (baseFor). The base's commands count against the
 * task's disk and time budgets (TASK_DISK_LIMIT_MB, TASK_COMMAND_TIME_LIMIT_S): past either,
 * the task fails naming it.
 */
import { z } from "zod";
import type { ExecutableTool } from "../llm/types.js";
import { redactText } from "../util/redact.js";
import type { BaseCheck } from "../verify/compare.js";
import {
  baselineResults,
  keptBaselines,
  removeStaleBases,
  type BaseRunOptions,
} from "../verify/baseline.js";
import { configNames, detectChecks, type Check } from "../verify/index.js";
import { hasEnded } from "../domain/tasks/endings.js";
import { CommandTimeError } from "../sandbox/command-time.js";
import { DiskBudgetError } from "../sandbox/disk.js";
import type { SandboxCache } from "../sandbox/index.js";
import { taskCache } from "./agent.js";
import type { StageContext } from "./stage.js";
import { setupOutputs } from "./stages/setup.js";

/** What a base run needs from the stage; `cache` when the stage has it at hand already. */
export async function baseOptions(
  ctx: StageContext,
  cache?: SandboxCache,
): Promise<BaseRunOptions> {
  const [outputs, found] = await Promise.all([
    setupOutputs(ctx),
    cache ? Promise.resolve(cache) : taskCache(ctx),
  ]);
  return {
    models: ctx.models,
    scope: { accountId: ctx.task.account_id, repoId: ctx.task.repo_id, commit: ctx.task.base_sha! },
    workdir: ctx.workdir,
    outputs,
    timeoutMs: ctx.config.pipeline.commandTimeoutS * 1000,
    signal: ctx.signal,
    cache: found,
    timeBudget: ctx.commandTime,
    log: (line) => ctx.log(line),
  };
}

/**
 * Starts the base's checks for the task in the background (once per process and task; none
 * without a base commit or checks), so they run while the model plans. The promise is kept
 * in ctx.baseRuns for VERIFYING; a failure is logged and left for VERIFYING to meet again.
 */
export async function startBaseRun(
  ctx: StageContext,
): Promise<{ run?: Promise<Map<string, BaseCheck>> }> {
  if (!ctx.task.base_sha || !ctx.baseRuns) return {};
  const going = ctx.baseRuns.get(ctx.task._id);
  if (going) return { run: going };
  const plan = await detectChecks(ctx.workdir, {
    configNames: configNames(ctx.config.github?.slug),
  });
  if (plan.checks.length === 0) return {};
  await removeStaleBases(ctx.workdir);
  const options = await baseOptions(ctx);
  const run = ctx.baseRuns.start(ctx.task._id, (stopped) =>
    untilEnded(ctx, stopped, (signal) => baselineResults(plan.checks, { ...options, signal })),
  );
  run.catch((error: unknown) =>
    ctx.log(`The checks on the unchanged code stopped: ${describe(error)}`).catch(() => undefined),
  );
  return { run };
}

/** How often a base run outliving its stage looks whether the task ended. */
const ENDED_CHECK_MS = 2_000;

/**
 * Runs `work` with a signal of its own, aborted when the task ends or `stopped` is: the base
 * run outlives the stage that started it (the plan gate may wait), so the stage's signal does
 * not stop it, but a task cancelled meanwhile (in any process) does.
 */
async function untilEnded<T>(
  ctx: StageContext,
  stopped: AbortSignal,
  work: (signal: AbortSignal) => Promise<T>,
) {
  const controller = new AbortController();
  const stop = () => controller.abort(stopped.reason);
  stopped.addEventListener("abort", stop, { once: true });
  const check = setInterval(() => {
    hasEnded(ctx.models, ctx.task._id).then(
      (ended) => ended && controller.abort(new Error("task ended")),
      () => undefined,
    );
  }, ENDED_CHECK_MS);
  check.unref();
  try {
    return await work(controller.signal);
  } finally {
    clearInterval(check);
    stopped.removeEventListener("abort", stop);
  }
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * The base's results of `checks` for VERIFYING, by command: the run PLANNING started (if this
 * process has it), then the kept ones; with `runMissing`, the missing ones are run now. A
 * base past the disk or time budget fails the task (DiskBudgetError, CommandTimeError); any
 * other failure of the base is logged and leaves those checks without base results (every
 * failure of theirs is new).
 */
export async function baseFor(
  ctx: StageContext,
  checks: readonly Check[],
  runMissing: boolean,
  cache?: SandboxCache,
): Promise<Map<string, BaseCheck>> {
  if (!ctx.task.base_sha) return new Map();
  const going = ctx.baseRuns?.get(ctx.task._id);
  if (going) {
    // The run PLANNING started: its results are kept by now; past the budget, the task fails.
    const failure = await going.then(
      () => undefined,
      (error: unknown) => error,
    );
    ctx.baseRuns?.forget(ctx.task._id);
    if (failure instanceof DiskBudgetError || failure instanceof CommandTimeError) throw failure;
  }
  const scope = {
    accountId: ctx.task.account_id,
    repoId: ctx.task.repo_id,
    commit: ctx.task.base_sha,
  };
  try {
    const kept = await keptBaselines(
      ctx.models,
      scope,
      checks.map((c) => c.command),
    );
    if (!runMissing || checks.every((c) => kept.has(c.command))) return kept;
    return await baselineResults(checks, await baseOptions(ctx, cache));
  } catch (error) {
    ctx.signal.throwIfAborted();
    if (error instanceof DiskBudgetError || error instanceof CommandTimeError) throw error;
    await ctx.log(
      `Could not run the checks on the unchanged code (${describe(error)}): every failure counts as new.`,
    );
    return new Map();
  }
}

/** Failing test ids the planner's tool names per check, at most. */
const MAX_NAMED_FAILING = 50;

/** What base_test_results answers: per command, its tests and the ones failing. */
export function describeBase(results: ReadonlyMap<string, BaseCheck>): string {
  if (results.size === 0) return "No checks ran on the unchanged code.";
  const parts = [...results].map(([command, check]) => {
    if (!check.tests)
      return `\`${command}\`: ${check.ok ? "passed" : "failed"} (its output is not read per test).`;
    const failing = check.tests.filter((t) => t.status === "failed").map((t) => t.id);
    const listed = failing.slice(0, MAX_NAMED_FAILING).map((id) => `\n  - ${id}`);
    const more =
      failing.length > MAX_NAMED_FAILING
        ? `\n  … and ${failing.length - MAX_NAMED_FAILING} more`
        : "";
    return `\`${command}\`: ${check.tests.length} tests, ${failing.length} failing${failing.length ? `:${listed.join("")}${more}` : "."}`;
  });
  return `On the unchanged code (the task's base commit):\n${parts.join("\n")}`;
}

/**
 * `base_test_results`: the planner's view of the base run PLANNING started, waiting for it
 * to finish (it runs while the model explores).
 */
export function baseTestResultsTool(
  run: Promise<Map<string, BaseCheck>> | undefined,
  signal: AbortSignal,
): ExecutableTool<Record<string, never>> {
  return {
    name: "base_test_results",
    description:
      "The repository's own checks on the unchanged code, per test: which tests fail before any change (ids as the runner names them). They run while you explore; this waits for them. Use it to see what is red already and to name `targets` in submit_plan.",
    input: z.strictObject({}),
    async execute() {
      if (!run)
        return "No checks run on the unchanged code (none were found, or the task has no base commit).";
      const aborted = new Promise<never>((_, reject) => {
        if (signal.aborted) reject(signal.reason as Error);
        signal.addEventListener("abort", () => reject(signal.reason as Error), { once: true });
      });
      try {
        return redactText(describeBase(await Promise.race([run, aborted])));
      } catch (error) {
        signal.throwIfAborted();
        return `Error: the checks on the unchanged code did not finish: ${describe(error)}`;
      }
    },
  };
}
