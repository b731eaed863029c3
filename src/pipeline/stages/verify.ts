import type { CheckRecord, VerifiedRecord } from "../../db/models.js";
import {
  configNames,
  detectChecks,
  failureReport,
  runChecks,
  summarizeChecks,
} from "../../verify/index.js";
import { runGit } from "../../util/git.js";
import { describeResult, heartbeatLine } from "../../util/sandbox.js";
import {
  baselineResults,
  failureLines,
  preExisting,
  type BaselineResult,
} from "../../verify/baseline.js";
import { agentContext, runAgent, taskCache } from "../agent.js";
import { diffForPrompt, excludeBuildOutput, stagedTree, workingCopyDiff } from "../diff.js";
import { fixUserPrompt } from "../prompts.js";
import type { Stage, StageContext } from "../stage.js";
import { ensureWorkingCopy, saveWork } from "./working-copy.js";

/** Lines of a failing check's output copied into the task log (the model gets more). */
const LOGGED_OUTPUT_LINES = 30;

function tail(text: string, lines: number): string {
  const all = text.trimEnd().split("\n");
  return all.slice(-lines).join("\n");
}

/**
 * The failure lines a failing check already had on the unchanged code, for the fix round's
 * prompt: those are not the change's to fix. "" when none.
 */
function knownFailures(
  results: readonly { check: { name: string; command: string }; result: { ok: boolean } }[],
  baseline: ReadonlyMap<string, BaselineResult>,
): string {
  const parts = results
    .filter((o) => !o.result.ok && baseline.get(o.check.command)?.ok === false)
    .map(
      (o) =>
        `${o.check.name}: ${baseline
          .get(o.check.command)!
          .failures.slice(0, 20)
          .map((l) => `\n  ${l}`)
          .join("")}`,
    );
  return parts.length
    ? `\n\nThese failures were already there before the change (the same check on the unchanged code); leave them unless the task is about them:\n${parts.join("\n")}`
    : "";
}

/**
 * VERIFYING ⇄ FIXING: the repository's own checks run in the sandbox; failures go back to
 * an agent with the same tools, at most MAX_FIX_ATTEMPTS times. A failure the unchanged code
 * had the same way (verify/baseline.ts) is pre-existing: it uses no round and fails nothing. The count of finished
 * rounds is kept on the task, so a resumed stage does not get extra rounds; a round cut
 * short by a crash (the worker died in FIXING) is not counted, and the resumed stage runs
 * it again (STAGE_MAX_ATTEMPTS still bounds how often a stage is resumed).
 */
/** A task made to fix a failing check (the CI-failure door and automations). */
function startedFromFailure(task: { origin?: unknown }): boolean {
  const origin = task.origin as { kind?: unknown; trigger?: unknown } | null | undefined;
  return origin?.kind === "ci_failure" || origin?.trigger === "ci_failure";
}

/**
 * A passing verification as PUBLISH keeps it for the commit it pushes (verify/baseline.ts,
 * keepBaselines): the tree the checks ran on, and each command's result with its failure
 * lines (a pre-existing failure's). Null when the tree cannot be read: nothing is kept then.
 */
async function verifiedRecord(
  ctx: StageContext,
  results: readonly { check: { command: string }; result: { ok: boolean; output: string } }[],
): Promise<VerifiedRecord | null> {
  const tree = await stagedTree(ctx.workdir, ctx.signal).catch(() => null);
  if (!tree) return null;
  const byCommand = new Map<string, VerifiedRecord["results"][number]>();
  for (const { check, result } of results)
    if (!byCommand.has(check.command))
      byCommand.set(check.command, {
        command: check.command,
        ok: result.ok,
        failures: result.ok ? [] : failureLines(result.output, [ctx.workdir]),
      });
  return { tree, results: [...byCommand.values()] };
}

/** True while the working copy has no change of the task's (git status is empty). */
async function unchanged(workdir: string): Promise<boolean> {
  const status = await runGit(["status", "--porcelain", "--untracked-files=all"], {
    cwd: workdir,
  }).catch(() => "?");
  return status.trim() === "";
}

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
    const maxAttempts = ctx.config.pipeline.maxFixAttempts;
    let attempt = ctx.task.fix_attempts ?? 0;
    let install = plan.install;
    let shared: { instructions: string; memory: string } | undefined;
    const learned = [...(ctx.task.learned ?? [])];
    const cache = await taskCache(ctx);
    // The unchanged code's results of the checks that failed (verify/baseline.ts), by command.
    const baseline = new Map<string, BaselineResult>();
    for (;;) {
      const outcome = await runChecks(
        { ...plan, install },
        {
          cwd: ctx.workdir,
          timeoutMs: ctx.config.pipeline.commandTimeoutS * 1000,
          signal: ctx.signal,
          cache,
          onStart: (check, kind) =>
            ctx.log(
              `${kind === "install" ? "Installing" : "Running"} ${check.name}: \`${check.command}\``,
            ),
          onHeartbeat: (check, ms) =>
            void ctx.log(heartbeatLine(check.command, ms)).catch(() => undefined),
          onResult: async ({ check, result }) => {
            const line = `${check.name}: ${describeResult(result)}`;
            await ctx.log(
              result.ok ? line : `${line}\n${tail(result.output, LOGGED_OUTPUT_LINES)}`,
            );
          },
        },
      );
      const installed = outcome.install.every((o) => o.result.ok);
      // A check failing now is run on the unchanged code (once per commit and command).
      const failedNow = outcome.results.filter((o) => !o.result.ok).map((o) => o.check);
      const unknown = failedNow.filter((c) => !baseline.has(c.command));
      // Failures are set aside as pre-existing only for a task that is not about them: not
      // for one started from a failing check (a CI failure: making it pass is the task), nor
      // while the working copy is still unchanged (no change of the task's was checked yet,
      // so the fix round is where its work happens).
      const setAside =
        failedNow.length > 0 && !startedFromFailure(ctx.task) && !(await unchanged(ctx.workdir));
      if (setAside && installed && unknown.length > 0 && ctx.task.base_sha) {
        const base = await baselineResults(unknown, {
          models: ctx.models,
          scope: {
            accountId: ctx.task.account_id,
            repoId: ctx.task.repo_id,
            commit: ctx.task.base_sha,
          },
          workdir: ctx.workdir,
          install: plan.install,
          timeoutMs: ctx.config.pipeline.commandTimeoutS * 1000,
          signal: ctx.signal,
          cache,
          log: (line) => ctx.log(line),
        }).catch(async (error: unknown) => {
          ctx.signal?.throwIfAborted();
          await ctx.log(
            `Could not run the checks on the unchanged code (${error instanceof Error ? error.message : String(error)}): every failure counts as new.`,
          );
          return new Map<string, BaselineResult>();
        });
        for (const [command, result] of base) baseline.set(command, result);
      }
      const old = new Set(
        outcome.results
          .filter(
            (o) =>
              setAside &&
              !o.result.ok &&
              preExisting(
                failureLines(o.result.output, [ctx.workdir]),
                baseline.get(o.check.command),
              ),
          )
          .map((o) => o.check),
      );
      // Dependencies are in place after the first successful install.
      if (installed) install = [];
      const record: CheckRecord = {
        source: plan.source,
        fix_attempts: attempt,
        results: outcome.results.map(({ check, result }) => {
          const before = baseline.get(check.command);
          return {
            name: check.name,
            command: check.command,
            ok: result.ok,
            duration_ms: Math.round(result.durationMs),
            before: before ? (before.ok ? "passed" : "failed") : null,
            pre_existing: old.has(check),
          };
        }),
      };
      if (outcome.ok) {
        await ctx.update({ checks: record, verified: await verifiedRecord(ctx, outcome.results) });
        await ctx.log(`Verification passed: ${summarizeChecks(outcome)}.`);
        return { next: "review" };
      }
      if (installed && old.size === outcome.failed.length) {
        await ctx.update({ checks: record, verified: await verifiedRecord(ctx, outcome.results) });
        await ctx.log(
          `Verification passed apart from pre-existing failures: ${[...old].map((c) => c.name).join(", ")} failed the same way on the unchanged code. ${summarizeChecks(outcome)}.`,
        );
        return { next: "review" };
      }
      // What is left for a fix round: the failures the change brought.
      const fresh = {
        ...outcome,
        results: outcome.results.filter((o) => !old.has(o.check)),
        failed: outcome.failed.filter((c) => !old.has(c)),
      };
      if (attempt >= maxAttempts) {
        const { diff } = await workingCopyDiff(ctx.workdir, { signal: ctx.signal });
        await ctx.update({ checks: record, diff });
        if (diff) await ctx.emit({ event_type: "diff", diff });
        const failing = fresh.failed.map((c) => c.name).join(", ");
        return {
          end: {
            status: "failed",
            error: `Verification still fails after ${attempt} fix attempt${attempt === 1 ? "" : "s"} (MAX_FIX_ATTEMPTS=${maxAttempts}); failing checks: ${failing}. ${summarizeChecks(outcome)}. The diff is kept on the task.`,
          },
        };
      }
      attempt += 1;
      await ctx.update({ checks: record });
      await ctx.setPhase("FIXING");
      await ctx.log(
        `Fix attempt ${attempt} of ${maxAttempts}: ${fresh.failed.map((c) => c.name).join(", ")} failed.${old.size ? ` Pre-existing (not counted): ${[...old].map((c) => c.name).join(", ")}.` : ""}`,
      );
      shared ??= await agentContext(ctx);
      const { diff } = await workingCopyDiff(ctx.workdir, { signal: ctx.signal });
      const run = await runAgent(ctx, shared, {
        role: "fix",
        prompt: fixUserPrompt(
          ctx.task,
          {
            attempt,
            maxAttempts,
            failures: failureReport(fresh) + knownFailures(outcome.results, baseline),
            diff: diffForPrompt(diff),
          },
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
  },
};
