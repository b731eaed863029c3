import type { CheckRecord } from "../../db/models.js";
import {
  configNames,
  detectChecks,
  failureReport,
  runChecks,
  summarizeChecks,
} from "../../verify/index.js";
import { describeResult, heartbeatLine } from "../../util/sandbox.js";
import { agentContext, runAgent, taskCache } from "../agent.js";
import { diffForPrompt, excludeBuildOutput, workingCopyDiff } from "../diff.js";
import { fixUserPrompt } from "../prompts.js";
import type { Stage } from "../stage.js";
import { ensureWorkingCopy, saveWork } from "./working-copy.js";

/** Lines of a failing check's output copied into the task log (the model gets more). */
const LOGGED_OUTPUT_LINES = 30;

function tail(text: string, lines: number): string {
  const all = text.trimEnd().split("\n");
  return all.slice(-lines).join("\n");
}

/**
 * VERIFYING ⇄ FIXING: the repository's own checks run in the sandbox; failures go back to
 * an agent with the same tools, at most MAX_FIX_ATTEMPTS times. The count of finished
 * rounds is kept on the task, so a resumed stage does not get extra rounds; a round cut
 * short by a crash (the worker died in FIXING) is not counted, and the resumed stage runs
 * it again (STAGE_MAX_ATTEMPTS still bounds how often a stage is resumed).
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
      await ctx.update({ checks: { source: plan.source, results: [], fix_attempts: 0 } });
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
      // Dependencies are in place after the first successful install.
      if (outcome.install.every((o) => o.result.ok)) install = [];
      const record: CheckRecord = {
        source: plan.source,
        fix_attempts: attempt,
        results: outcome.results.map(({ check, result }) => ({
          name: check.name,
          command: check.command,
          ok: result.ok,
          duration_ms: Math.round(result.durationMs),
        })),
      };
      if (outcome.ok) {
        await ctx.update({ checks: record });
        await ctx.log(`Verification passed: ${summarizeChecks(outcome)}.`);
        return { next: "review" };
      }
      if (attempt >= maxAttempts) {
        const { diff } = await workingCopyDiff(ctx.workdir, { signal: ctx.signal });
        await ctx.update({ checks: record, diff });
        if (diff) await ctx.emit({ event_type: "diff", diff });
        const failing = outcome.failed.map((c) => c.name).join(", ");
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
        `Fix attempt ${attempt} of ${maxAttempts}: ${outcome.failed.map((c) => c.name).join(", ")} failed.`,
      );
      shared ??= await agentContext(ctx);
      const { diff } = await workingCopyDiff(ctx.workdir, { signal: ctx.signal });
      const run = await runAgent(ctx, shared, {
        role: "fix",
        prompt: fixUserPrompt(
          ctx.task,
          { attempt, maxAttempts, failures: failureReport(outcome), diff: diffForPrompt(diff) },
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
