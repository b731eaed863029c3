import type { CheckRecord, VerifiedRecord } from "../../db/models.js";
import {
  configNames,
  detectChecks,
  failureReport,
  runChecks,
  summarizeChecks,
  type VerifyOutcome,
  type VerifyPlan,
} from "../../verify/index.js";
import { runGit } from "../../util/git.js";
import { describeResult, heartbeatLine, type SandboxCache } from "../../sandbox/index.js";
import { baseCheckOf, runOnBase, testsOf } from "../../verify/baseline.js";
import type { BaseCheck } from "../../verify/compare.js";
import { nameIds, testsRecord } from "../../verify/compare.js";
import {
  blockingChecks,
  fixFailures,
  idsOf,
  judgeChecks,
  roundLine,
  testFiles,
  touchedTests,
  type JudgedCheck,
} from "../../verify/judge.js";
import { agentContext, runAgent, taskCache } from "../agent.js";
import { baseFor } from "../base.js";
import { diffForPrompt, excludeBuildOutput, stagedTree, workingCopyDiff } from "../diff.js";
import { fixUserPrompt } from "../prompts.js";
import type { Stage, StageContext } from "../stage.js";
import { setupOutputs } from "./setup.js";
import { ensureWorkingCopy, saveWork } from "./working-copy.js";

/** Lines of a failing check's output copied into the task log (the model gets more). */
const LOGGED_OUTPUT_LINES = 30;

function tail(text: string, lines: number): string {
  const all = text.trimEnd().split("\n");
  return all.slice(-lines).join("\n");
}

/** A task made to fix a failing check (the CI-failure door and automations). */
function startedFromFailure(task: { origin?: unknown }): boolean {
  const origin = task.origin as { kind?: unknown; trigger?: unknown } | null | undefined;
  return origin?.kind === "ci_failure" || origin?.trigger === "ci_failure";
}

/** The paths the change touches, repository-relative (one `git status`, nothing staged). */
async function changedFiles(ctx: StageContext): Promise<string[]> {
  const status = await runGit(
    ["status", "--porcelain", "-z", "--no-renames", "--untracked-files=all"],
    { cwd: ctx.workdir, signal: ctx.signal },
  );
  return status
    .split("\0")
    .filter((entry) => entry.length > 3)
    .map((entry) => entry.slice(3));
}

/** The working copy's folders as check output names them. */
function rootsOf(ctx: StageContext): string[] {
  return [ctx.workdir, "/workspace"];
}

/**
 * A passing verification as PUBLISH keeps it for the commit it pushes (verify/baseline.ts,
 * keepBaselines): the tree the checks ran on, and each command's result per test. Null when
 * the tree cannot be read: nothing is kept then.
 */
async function verifiedRecord(
  ctx: StageContext,
  results: VerifyOutcome["results"],
): Promise<VerifiedRecord | null> {
  const tree = await stagedTree(ctx.workdir, ctx.signal).catch(() => null);
  if (!tree) return null;
  const byCommand = new Map<string, VerifiedRecord["results"][number]>();
  for (const outcome of results)
    if (!byCommand.has(outcome.check.command))
      byCommand.set(outcome.check.command, {
        command: outcome.check.command,
        ...baseCheckOf(outcome.result, testsOf(outcome), rootsOf(ctx)),
      });
  return { tree, results: [...byCommand.values()] };
}

/**
 * The tests the change adds or edits that fail on the base and pass now (reproduced:
 * docs/api.md, "Verification baseline"): the checks holding them run once more on the base, with
 * the change's test files copied over it. Run at a passing verification only; [] without a base.
 */
async function reproducedTests(
  ctx: StageContext,
  judged: readonly JudgedCheck[],
  files: readonly string[],
  cache: SandboxCache | undefined,
): Promise<Map<string, string[]>> {
  const found = new Map<string, string[]>();
  if (!ctx.task.base_sha) return found;
  const touched = touchedTests(
    judged.map((j) => j.run),
    files,
  );
  const holding = judged.filter((j) => j.run?.tests.some((t) => touched.has(t.id)));
  if (holding.length === 0) return found;
  await ctx.log(
    `Running the change's tests on the unchanged code to see them fail there: ${nameIds([...touched])}.`,
  );
  const base = await runOnBase(
    holding.map((j) => j.outcome.check),
    {
      models: ctx.models,
      scope: {
        accountId: ctx.task.account_id,
        repoId: ctx.task.repo_id,
        commit: ctx.task.base_sha,
      },
      workdir: ctx.workdir,
      outputs: await setupOutputs(ctx),
      timeoutMs: ctx.config.pipeline.commandTimeoutS * 1000,
      signal: ctx.signal,
      cache,
      log: (line) => ctx.log(line),
      // The change's test files only: the tests must meet the base's code, not the fix.
      overlay: testFiles(
        holding.map((j) => j.run),
        files,
      ),
    },
  );
  for (const j of holding) {
    const before = base.get(j.outcome.check.command);
    const failedThere = new Set(
      (before?.tests ?? []).filter((t) => t.status === "failed").map((t) => t.id),
    );
    // Not read per test there (a test file that does not even load on the base): its tests
    // count as failing there when the check failed.
    const all = before && before.tests === null && !before.ok;
    found.set(
      j.outcome.check.command,
      (j.run?.tests ?? [])
        .filter((t) => touched.has(t.id) && t.status === "passed")
        .filter((t) => all || failedThere.has(t.id))
        .map((t) => t.id),
    );
  }
  return found;
}

/** The record of a round (`checks` on the task). */
function checkRecord(
  ctx: StageContext,
  source: string | null,
  attempt: number,
  judged: readonly JudgedCheck[],
  base: ReadonlyMap<string, BaseCheck>,
  reproduced: ReadonlyMap<string, string[]> = new Map(),
): CheckRecord {
  return {
    source,
    fix_attempts: attempt,
    base_commit: base.size > 0 ? (ctx.task.base_sha ?? null) : null,
    targets: ctx.task.plan_targets ?? [],
    results: judged.map(({ outcome: { check, result }, run, comparison }) => {
      const before = base.get(check.command);
      return {
        name: check.name,
        command: check.command,
        ok: result.ok,
        duration_ms: Math.round(result.durationMs),
        before: before ? (before.ok ? "passed" : "failed") : null,
        pre_existing: comparison.preExisting,
        tests: testsRecord(comparison, run?.runner ?? null, reproduced.get(check.command)),
      };
    }),
  };
}

/**
 * VERIFYING ⇄ FIXING: the repository's own checks run in the sandbox and are judged test by
 * test against the base commit (docs/api.md, "Verification baseline"): new failures, tests failing
 * differently than on the base, and failing tests the task is about go back to an agent with
 * the same tools, at most MAX_FIX_ATTEMPTS times; tests failing the same way as on the base
 * are named, not chased. The count of finished rounds is kept on the task, so a resumed stage
 * does not get extra rounds; a round cut short by a crash (the worker died in FIXING) is not
 * counted, and the resumed stage runs it again (STAGE_MAX_ATTEMPTS still bounds how often a
 * stage is resumed).
 */
export const verifyStage: Stage = {
  name: "verify",
  phase: "VERIFYING",
  async run(ctx) {
    await ensureWorkingCopy(ctx);
    await excludeBuildOutput(ctx.workdir);
    const plan = await detectChecks(ctx.workdir, {
      configNames: configNames(ctx.config.github?.slug),
    });
    for (const note of plan.notes) await ctx.log(note);
    if (plan.checks.length === 0) {
      await ctx.update({
        checks: { source: plan.source, results: [], fix_attempts: 0 },
        verified: null,
      });
      await ctx.log("No checks to run: verification passes.");
      return { next: "review" };
    }
    await ctx.log(
      `Checks from ${plan.source}: ${plan.checks.map((c) => `${c.name} (\`${c.command}\`)`).join(", ")}.`,
    );
    await baseRunEnded(ctx);
    const maxAttempts = ctx.config.pipeline.maxFixAttempts;
    let attempt = ctx.task.fix_attempts ?? 0;
    let install = plan.install;
    let shared: { instructions: string; memory: string } | undefined;
    const learned = [...(ctx.task.learned ?? [])];
    const cache = await taskCache(ctx);
    for (;;) {
      const outcome = await runPlanChecks(ctx, { ...plan, install }, cache);
      const installed = outcome.install.every((o) => o.result.ok);
      // Dependencies are in place after the first successful install.
      if (installed) install = [];
      const { base, files, judged } = await judgeRound(ctx, plan, outcome, installed, cache);
      const line = roundLine(judged);
      if (line) await ctx.log(line);
      const blocking = installed ? blockingChecks(judged) : outcome.failed;
      if (blocking.length === 0) {
        const reproduced = await reproducedTests(ctx, judged, files, cache);
        const record = checkRecord(ctx, plan.source, attempt, judged, base, reproduced);
        await ctx.update({ checks: record, verified: await verifiedRecord(ctx, outcome.results) });
        await ctx.log(passedLine(judged, outcome));
        return { next: "review" };
      }
      const record = checkRecord(ctx, plan.source, attempt, judged, base);
      if (attempt >= maxAttempts) {
        const { diff } = await workingCopyDiff(ctx.workdir, { signal: ctx.signal });
        await ctx.update({ checks: record, diff });
        if (diff) await ctx.emit({ event_type: "diff", diff });
        return {
          end: {
            status: "failed",
            error: failedLine(judged, blocking, attempt, maxAttempts, outcome),
          },
        };
      }
      attempt += 1;
      await ctx.update({ checks: record });
      await ctx.setPhase("FIXING");
      const fresh = idsOf(judged, "newFailures");
      await ctx.log(
        `Fix attempt ${attempt} of ${maxAttempts}: ${blocking.map((c) => c.name).join(", ")} failed${fresh.length ? ` (${fresh.length} new failure${fresh.length === 1 ? "" : "s"}: ${nameIds(fresh)})` : ""}.`,
      );
      shared ??= await agentContext(ctx);
      await fixRound(ctx, shared, learned, {
        attempt,
        maxAttempts,
        failures: installed ? fixFailures(judged, outcome) : failureReport(outcome),
      });
    }
  },
};

/** A wait for the base's checks this long is logged. */
const WAIT_NOTICE_MS = 200;

/**
 * Waits for the base's checks PLANNING started beside the model (pipeline/base.ts), if they
 * still run: their checkout and overlay are inside the working copy's `.git`, where a test
 * runner walking the working copy (`node --test`) would meet them, and both runs would count
 * against one disk budget. How the run ended is for judgeRound (baseFor) to read.
 */
async function baseRunEnded(ctx: StageContext): Promise<void> {
  const going = ctx.baseRuns?.get(ctx.task._id);
  if (!going) return;
  const ended = going.then(
    () => true,
    () => true,
  );
  // Said only when the wait is long enough to notice (kept results answer in a few ms).
  let timer: NodeJS.Timeout | undefined;
  const noticeable = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), WAIT_NOTICE_MS);
  });
  const done = await Promise.race([ended, noticeable]);
  clearTimeout(timer);
  if (done) return;
  await ctx.log("Waiting for the checks on the unchanged code to finish.");
  await ended;
}

/** Runs the plan's install steps (when it has any left) and checks, logging each. */
function runPlanChecks(
  ctx: StageContext,
  plan: VerifyPlan,
  cache: SandboxCache,
): Promise<VerifyOutcome> {
  return runChecks(plan, {
    cwd: ctx.workdir,
    timeoutMs: ctx.config.pipeline.commandTimeoutS * 1000,
    signal: ctx.signal,
    cache,
    timeBudget: ctx.commandTime,
    onStart: (check, kind) =>
      ctx.log(
        `${kind === "install" ? "Installing" : "Running"} ${check.name}: \`${check.command}\``,
      ),
    onHeartbeat: (check, ms) =>
      void ctx.log(heartbeatLine(check.command, ms)).catch(() => undefined),
    onResult: async ({ check, result }) => {
      const line = `${check.name}: ${describeResult(result)}`;
      await ctx.log(result.ok ? line : `${line}\n${tail(result.output, LOGGED_OUTPUT_LINES)}`);
    },
  });
}

/**
 * Judges a round's results test by test against the base's: the base's results (the run
 * PLANNING started, or kept ones; run now only when a check failed: a passing verification
 * needs them only for its evidence), and what changed.
 */
async function judgeRound(
  ctx: StageContext,
  plan: VerifyPlan,
  outcome: VerifyOutcome,
  installed: boolean,
  cache: SandboxCache,
): Promise<{ base: Map<string, BaseCheck>; files: string[]; judged: JudgedCheck[] }> {
  const [base, files] = await Promise.all([
    baseFor(ctx, plan.checks, !outcome.ok && installed, cache),
    changedFiles(ctx),
  ]);
  const targets = new Set(ctx.task.plan_targets ?? []);
  const touched = touchedTests(
    outcome.results.map((o) => testsOf(o)),
    files,
  );
  const judged = judgeChecks(outcome.results, base, {
    roots: rootsOf(ctx),
    mustPass: (id) => targets.has(id) || touched.has(id),
    // Nothing is set aside for a task made to fix a failing check (a CI failure: making
    // it pass is the task), nor while the working copy is unchanged (no change of the
    // task's was checked yet, so the fix round is where its work happens).
    strict: startedFromFailure(ctx.task) || files.length === 0,
  });
  if (installed && base.size === 0 && !outcome.ok && ctx.task.base_sha)
    await ctx.log("No results of the unchanged code to compare with: every failure counts as new.");
  return { base, files, judged };
}

/** One fix round (FIXING): an agent works on the failures; its notes join what was learned. */
async function fixRound(
  ctx: StageContext,
  shared: Awaited<ReturnType<typeof agentContext>>,
  learned: string[],
  round: { attempt: number; maxAttempts: number; failures: string },
): Promise<void> {
  const { attempt, maxAttempts, failures } = round;
  const { diff } = await workingCopyDiff(ctx.workdir, { signal: ctx.signal });
  const run = await runAgent(ctx, shared, {
    role: "fix",
    prompt: fixUserPrompt(
      ctx.task,
      { attempt, maxAttempts, failures, diff: diffForPrompt(diff) },
      // The round's feedback (a revision's, a retry's) stays in view while fixing.
      ctx.task.instruction?.round === (ctx.task.round ?? 0) ? ctx.task.instruction : null,
    ),
    label: `Fix ${attempt}`,
  });
  if (run.notes.length) learned.push(...run.notes);
  // The round counts as used once it finished, not when it started.
  await ctx.update({ fix_attempts: attempt, ...(run.notes.length ? { learned } : {}) });
  await saveWork(ctx);
  await ctx.log(`Fix attempt ${attempt} done: ${run.summary}`);
  await ctx.setPhase("VERIFYING");
}

/** The log line of a passing verification, naming what failed as it did on the base. */
function passedLine(judged: readonly JudgedCheck[], outcome: VerifyOutcome): string {
  if (outcome.ok) return `Verification passed: ${summarizeChecks(outcome)}.`;
  const still = idsOf(judged, "stillFailing");
  const whole = judged
    .filter((j) => j.comparison.preExisting && j.comparison.unit === "check")
    .map((j) => j.outcome.check.name);
  const named = [
    still.length ? `${still.length} test${still.length === 1 ? "" : "s"} (${nameIds(still)})` : "",
    whole.length ? whole.join(", ") : "",
  ]
    .filter(Boolean)
    .join(" and ");
  return `Verification passed apart from pre-existing failures: ${named} failed the same way on the unchanged code. ${summarizeChecks(outcome)}.`;
}

/** The task's error after the last fix round: the checks, and the tests by id. */
function failedLine(
  judged: readonly JudgedCheck[],
  blocking: readonly { name: string }[],
  attempt: number,
  maxAttempts: number,
  outcome: VerifyOutcome,
): string {
  const tests = [
    ...idsOf(judged, "newFailures"),
    ...judged.flatMap((j) => j.comparison.mustPassFailing.map((t) => t.id)),
  ];
  const named = tests.length ? `; failing tests: ${nameIds([...new Set(tests)])}` : "";
  return `Verification still fails after ${attempt} fix attempt${attempt === 1 ? "" : "s"} (MAX_FIX_ATTEMPTS=${maxAttempts}); failing checks: ${blocking.map((c) => c.name).join(", ")}${named}. ${summarizeChecks(outcome)}. The diff is kept on the task.`;
}
