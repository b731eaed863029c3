import { redactText } from "../../util/redact.js";
import { agentContext, runAgent } from "../agent.js";
import { diffForPrompt, workingCopyDiff } from "../diff.js";
import { StageError } from "../errors.js";
import { reworkUserPrompt } from "../prompts.js";
import type { Stage } from "../stage.js";
import { ensureWorkingCopy, saveWork } from "./working-copy.js";

/**
 * FIXING for feedback (docs/api.md, "Revisions"): one round of changes on the current diff
 * for what a person asked at the diff gate, or what the AI review asked (REVIEWING's one
 * self-review round), with the same tools as a fix round. VERIFYING and REVIEWING follow.
 */
export const reworkStage: Stage = {
  name: "rework",
  phase: "FIXING",
  async run(ctx) {
    ctx.model();
    const { instruction } = ctx.task;
    const round = ctx.task.round ?? 0;
    if (!instruction || instruction.round !== round)
      throw new StageError("The task has no feedback for this round of changes.");
    await ensureWorkingCopy(ctx);
    const shared = await agentContext(ctx);
    const { diff } = await workingCopyDiff(ctx.workdir, { signal: ctx.signal });
    await ctx.log(
      instruction.kind === "review"
        ? "Changing the diff for the review's comments."
        : `Changing the diff for the feedback of ${instruction.by}.`,
    );
    const run = await runAgent(ctx, shared, {
      role: "fix",
      prompt: reworkUserPrompt(ctx.task, { round, instruction, diff: diffForPrompt(diff) }),
      label: instruction.kind === "review" ? "Review round" : "Revision",
    });
    const learned = [...(ctx.task.learned ?? []), ...run.notes];
    await ctx.update({ ...(run.notes.length ? { learned } : {}) });
    await ctx.log(`Round of changes done: ${redactText(run.summary)}`);
    await saveWork(ctx);
    return { next: "verify" };
  },
};
