import type { CheckRecord, PlanStep } from "../../db/models.js";
import { trajectoryRecorder } from "../trajectory.js";
import { createReadTools } from "../../tools/read-tools.js";
import { runToolLoop } from "../../llm/tool-loop.js";
import { redactText } from "../../util/redact.js";
import { diffForPrompt, workingCopyDiff } from "../diff.js";
import { reviewUserPrompt } from "../prompts.js";
import { REVIEW_RULES, submitReviewTool, type ReviewResult } from "../../tools/review-tool.js";
import { recordRevisionResult } from "../../domain/tasks/revisions.js";
import type { Stage } from "../stage.js";
import { ensureWorkingCopy } from "./working-copy.js";

/** One line naming the checks that ran, for prompts and the pull request. */
function checksLine(checks: CheckRecord | null | undefined): string {
  if (!checks || checks.results.length === 0) return "none found in the repository";
  return checks.results
    .map((r) => `${r.name} (\`${r.command}\`) ${r.ok ? "passed" : "failed"}`)
    .join(", ");
}

function diffStat(diff: string): { added: number; removed: number } {
  let added = 0;
  let removed = 0;
  for (const line of diff.split("\n")) {
    if (line.startsWith("+") && !line.startsWith("+++")) added += 1;
    else if (line.startsWith("-") && !line.startsWith("---")) removed += 1;
  }
  return { added, removed };
}

/** The review's requests as the next round's instruction. */
function reviewInstruction(review: ReviewResult): string {
  const comments = review.comments.map((c) => `- ${c.path}:${c.line} (${c.severity}): ${c.body}`);
  return [review.summary, ...comments].join("\n");
}

/**
 * REVIEWING: the diff of the working copy (a `diff` event), a model review with
 * submit_review stored on the task, then the diff gate (or straight on with auto_approve).
 * A review that requests changes sends the work back for one round (stages/rework.ts).
 * An implementation that changed nothing skips to CLEANUP and ends without a pull request.
 */
export const reviewStage: Stage = {
  name: "review",
  phase: "REVIEWING",
  async run(ctx) {
    const client = ctx.model();
    await ensureWorkingCopy(ctx);
    const { diff, files } = await workingCopyDiff(ctx.workdir, { signal: ctx.signal });
    if (files.length === 0) {
      await ctx.update({ diff: "" });
      await ctx.log("The implementation changed nothing: there is nothing to review or push.");
      return { next: "cleanup" };
    }
    await ctx.update({ diff });
    await ctx.emit({ event_type: "diff", diff });
    const stat = diffStat(diff);
    await ctx.log(
      `Diff: ${files.length} file${files.length === 1 ? "" : "s"} changed, +${stat.added} −${stat.removed}.`,
    );
    const index = await ctx.index();
    const plan = { summary: ctx.task.plan_summary, steps: (ctx.task.plan ?? []) as PlanStep[] };
    const result = await runToolLoop({
      client,
      system: REVIEW_RULES,
      prompt: reviewUserPrompt(ctx.task, plan, diffForPrompt(diff), checksLine(ctx.task.checks)),
      tools: createReadTools(ctx.workdir, () => index),
      finishTools: [submitReviewTool],
      maxSteps: ctx.config.llm.reviewMaxSteps,
      onUsage: (usage) => ctx.addUsage(usage),
      onCall: trajectoryRecorder(ctx, "review"),
      signal: ctx.signal,
    });
    const { input } = result;
    const review = {
      verdict: input.verdict,
      summary: redactText(input.summary),
      comments: input.comments.map((c) => ({ ...c, body: redactText(c.body) })),
    };
    await ctx.update({ review });
    await ctx.log(
      `Review: ${review.verdict.replace("_", " ")}, ${review.comments.length} comment${review.comments.length === 1 ? "" : "s"}. ${review.summary}`,
    );
    // The review acts: changes it requests get one round (not after a round it asked for).
    const round = ctx.task.round ?? 0;
    const { instruction } = ctx.task;
    const reviewRound = instruction?.kind === "review" && instruction.round === round;
    if (review.verdict === "request_changes" && !reviewRound) {
      const next = round + 1;
      await ctx.update({
        instruction: {
          round: next,
          kind: "review",
          text: reviewInstruction(review),
          by: "the AI review",
        },
        fix_attempts: 0,
      });
      await ctx.log(
        "The review requested changes: one round of changes for its comments, then verification and review again.",
      );
      return { next: "rework", round: next };
    }
    await recordRevisionResult(ctx.models, ctx.task, { diff });
    if (ctx.task.auto_approve) {
      await ctx.log("Diff approved automatically (auto_approve).");
      return { next: "publish" };
    }
    await ctx.log("Waiting for the diff to be approved (approve-diff) or rejected (reject-diff).");
    return { wait: { phase: "REVIEWING", status: "awaiting_diff_approval" } };
  },
};
