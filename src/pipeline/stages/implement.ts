import type { PlanStep } from "../../db/models.js";
import { runGit } from "../../util/git.js";
import { redactText } from "../../util/redact.js";
import { agentContext, runAgent, type AgentRun } from "../agent.js";
import { StageError } from "../errors.js";
import { implementUserPrompt, instructionNote } from "../prompts.js";
import type { Stage, StageContext } from "../stage.js";
import { ensureWorkingCopy, saveWork } from "./working-copy.js";

/** One parallel worker's share of the plan: whole steps, and the files they touch. */
export interface PlanPart {
  steps: PlanStep[];
  files: string[];
}

/**
 * Splits a plan for parallel workers, or returns null when one agent should do it: fewer
 * than `threshold` files, or steps so intertwined they cannot be split. Steps that share a
 * file stay together (so file sets are disjoint), and the groups are packed, largest
 * first, into at most `maxWorkers` parts of similar size.
 */
export function partitionPlan(
  steps: PlanStep[],
  threshold: number,
  maxWorkers: number,
): PlanPart[] | null {
  const allFiles = new Set(steps.flatMap((s) => s.files));
  if (allFiles.size < threshold || maxWorkers < 2) return null;
  // Union-find over steps, joined through the files they share.
  const parent = steps.map((_, i) => i);
  const find = (i: number): number => {
    while (parent[i] !== i) i = parent[i] = parent[parent[i]!]!;
    return i;
  };
  const owner = new Map<string, number>();
  steps.forEach((step, i) => {
    for (const file of step.files) {
      const first = owner.get(file);
      if (first === undefined) owner.set(file, i);
      else parent[find(i)] = find(first);
    }
  });
  const groups = new Map<number, PlanPart>();
  const fileless: PlanStep[] = [];
  steps.forEach((step, i) => {
    if (step.files.length === 0) return fileless.push(step);
    const root = find(i);
    const group = groups.get(root) ?? { steps: [], files: [] };
    group.steps.push(step);
    for (const f of step.files) if (!group.files.includes(f)) group.files.push(f);
    groups.set(root, group);
  });
  if (groups.size < 2) return null;
  const parts: PlanPart[] = Array.from({ length: Math.min(maxWorkers, groups.size) }, () => ({
    steps: [],
    files: [],
  }));
  for (const group of [...groups.values()].sort((a, b) => b.files.length - a.files.length)) {
    const smallest = parts.reduce((a, b) => (b.files.length < a.files.length ? b : a));
    smallest.steps.push(...group.steps);
    smallest.files.push(...group.files);
  }
  // Steps without files (e.g. "run the tests") go with the first part; keep plan order.
  parts[0]!.steps.push(...fileless);
  for (const part of parts) part.steps.sort((a, b) => a.step - b.step);
  return parts;
}

async function resetWorkingCopy(ctx: StageContext): Promise<void> {
  await runGit(["reset", "--hard", "-q"], { cwd: ctx.workdir });
  await runGit(["clean", "-fdq"], { cwd: ctx.workdir });
}

/** A retry's hint for this round (domain/tasks/revisions.ts), as a note for the prompt. */
function retryNote(ctx: StageContext): string {
  const { instruction } = ctx.task;
  return instruction?.round === (ctx.task.round ?? 0) ? instructionNote(instruction) : "";
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

/** IMPLEMENTING: one agent, or parallel workers on disjoint file sets, carry out the plan. */
export const implementStage: Stage = {
  name: "implement",
  phase: "IMPLEMENTING",
  async run(ctx) {
    const steps = (ctx.task.plan ?? []) as PlanStep[];
    if (steps.length === 0) throw new StageError("The task has no plan to implement.");
    ctx.model();
    await ensureWorkingCopy(ctx);
    if (ctx.attempt > 0) {
      // A worker died half-way: start again from the cloned commit, not from its leftovers.
      await resetWorkingCopy(ctx);
      await ctx.log("Starting the implementation again from the cloned commit.");
    }
    const shared = await agentContext(ctx);
    const plan = { summary: ctx.task.plan_summary, steps };
    const { pipeline } = ctx.config;
    const parts = partitionPlan(steps, pipeline.parallelThreshold, pipeline.maxParallelWorkers);
    const note = retryNote(ctx);
    let runs: AgentRun[];
    if (!parts) {
      await ctx.log(`Implementing ${plural(steps.length, "step")} with one agent.`);
      runs = [
        await runAgent(ctx, shared, {
          role: "implement",
          prompt: `${implementUserPrompt(ctx.task, plan)}${note}`,
          label: "Agent",
        }),
      ];
    } else {
      runs = await runWorkers(ctx, shared, plan, parts);
    }
    const summary = redactText(runs.map((r) => r.summary).join("\n"));
    const learned = [...(ctx.task.learned ?? []), ...runs.flatMap((r) => r.notes)];
    await ctx.update({ implement_summary: summary, ...(learned.length ? { learned } : {}) });
    const changed = new Set(runs.flatMap((r) => r.changes.map((c) => c.path)));
    await ctx.log(`Implementation finished: ${plural(changed.size, "file")} changed. ${summary}`);
    await saveWork(ctx);
    return { next: "verify" };
  },
};

/**
 * Runs the parts at once (at most MAX_PARALLEL_WORKERS, one part each) in the same working
 * copy; the file sets are disjoint and each worker's writes are confined to its own, so
 * the merge is the working copy itself. One worker failing stops the others.
 */
async function runWorkers(
  ctx: StageContext,
  shared: { instructions: string; memory: string },
  plan: { summary: string | null | undefined; steps: PlanStep[] },
  parts: PlanPart[],
): Promise<AgentRun[]> {
  const total = parts.length;
  await ctx.log(
    `The plan touches ${plural(new Set(plan.steps.flatMap((s) => s.files)).size, "file")}: implementing it with ${total} parallel workers on disjoint file sets.`,
  );
  const stop = new AbortController();
  const signal = AbortSignal.any([ctx.signal, stop.signal]);
  const runs = await Promise.all(
    parts.map(async (part, i) => {
      const label = `Worker ${i + 1}/${total}`;
      await ctx.log(
        `${label}: started on steps ${part.steps.map((s) => s.step).join(", ")} (${part.files.join(", ")}).`,
      );
      try {
        const run = await runAgent(ctx, shared, {
          role: "implement",
          prompt: `${implementUserPrompt(ctx.task, plan, {
            worker: i + 1,
            workers: total,
            steps: part.steps,
            files: part.files,
          })}${retryNote(ctx)}`,
          label,
          allowedFiles: new Set(part.files),
          signal,
        });
        await ctx.log(
          `${label}: finished after ${plural(run.steps, "model call")}, ${plural(new Set(run.changes.map((c) => c.path)).size, "file")} changed.`,
        );
        return run;
      } catch (error) {
        stop.abort(error);
        throw error;
      }
    }),
  );
  await ctx.log(`All ${total} workers finished; their changes are merged in the working copy.`);
  return runs;
}
