import { z } from "zod";
import { trajectoryRecorder } from "../trajectory.js";
import { planningContext } from "../../indexer/planning-context.js";
import { createReadTools } from "../../tools/read-tools.js";
import { memoryScopeOf, recall } from "../../domain/agents/memory.js";
import { recordRevisionResult } from "../../domain/tasks/revisions.js";
import type { PlanStep } from "../../db/models.js";
import { runToolLoop } from "../../llm/tool-loop.js";
import type { ToolSpec } from "../../llm/types.js";
import { redactText } from "../../util/redact.js";
import { agentContext } from "../agent.js";
import { instructionNote, planningSystemPrompt, planningUserPrompt } from "../prompts.js";
import type { Stage } from "../stage.js";
import { describeCall, firstLine, progressLog } from "../progress.js";
import { ensureWorkingCopy } from "./working-copy.js";
import { openStageMcpTools } from "../mcp.js";
import { baseTestResultsTool, startBaseRun } from "../base.js";
import { nameIds } from "../../verify/compare.js";

const relativePath = z
  .string()
  .trim()
  .min(1)
  .max(500)
  .refine((p) => !p.startsWith("/") && !p.split(/[\\/]/).includes(".."), {
    message: "must be a path relative to the repository root, without '..'",
  });

/** Test ids a plan may name as its targets, at most. */
const MAX_TARGETS = 100;

/** `submit_plan` (docs/architecture.md, "Model tool protocol"). */
export const submitPlanTool: ToolSpec<{
  summary: string;
  steps: Array<{ title: string; description: string; files: string[] }>;
  targets: string[];
}> = {
  name: "submit_plan",
  description:
    "Submit the implementation plan. Call once, after exploring, with a summary and ordered steps; each step lists the repository-relative files it creates or changes. `targets` optionally names the tests (ids as base_test_results gives them) this change will make pass: they must pass for the task to complete.",
  input: z.strictObject({
    targets: z.array(z.string().trim().min(1).max(500)).max(MAX_TARGETS).default([]),
    summary: z.string().trim().min(1).max(4000),
    steps: z
      .array(
        z.strictObject({
          title: z.string().trim().min(1).max(200),
          description: z.string().trim().max(8000).default(""),
          files: z.array(relativePath).max(200).default([]),
        }),
      )
      .min(1)
      .max(50),
  }),
};

/** PLANNING: the model explores with the read tools and answers with submit_plan. */
export const planStage: Stage = {
  name: "plan",
  phase: "PLANNING",
  async run(ctx) {
    const client = ctx.model();
    await ensureWorkingCopy(ctx);
    const index = await ctx.index();
    const memories = await recall(ctx.models, memoryScopeOf(ctx.task));
    if (memories.length > 0) {
      await ctx.update({ memories_used: memories });
      await ctx.log(
        `Using ${memories.length} item${memories.length === 1 ? "" : "s"} of repository memory from earlier tasks.`,
      );
    }
    // Read after recall: the memory block comes from `memories_used`.
    const { instructions, memory, skill } = await agentContext(ctx);
    if (instructions) await ctx.log("Using the repository's instructions for coding agents.");
    if (ctx.task.skill_name && !skill)
      await ctx.log(`The skill "${ctx.task.skill_name}" no longer exists; planning without it.`);
    // A revision of the plan: the plan it revises and the feedback on it (domain/tasks/revisions.ts).
    const { instruction } = ctx.task;
    const revision =
      instruction?.kind === "feedback" &&
      instruction.round === (ctx.task.round ?? 0) &&
      ctx.task.plan
        ? {
            by: instruction.by,
            feedback: instruction.text,
            plan: ctx.task.plan as PlanStep[],
            summary: ctx.task.plan_summary,
          }
        : null;
    // A retried PLANNING with a hint.
    const retried = instruction?.kind === "retry" && instruction.round === (ctx.task.round ?? 0);
    if (revision) await ctx.log(`Planning again for the feedback of ${revision.by}.`);
    await ctx.log(`Planning with ${client.provider} model ${client.modelId}.`);
    const progress = progressLog(ctx);
    // The base commit's checks run while the model explores (pipeline/base.ts); the planner
    // reads what is red there with base_test_results, and VERIFYING reuses the results.
    const baseRun = await startBaseRun(ctx);
    // The task's MCP servers, read-only tools only (pipeline/mcp.ts).
    const mcp = await openStageMcpTools(ctx, "plan", (line) => progress.note(line));
    const result = await runToolLoop({
      client,
      system: planningSystemPrompt({ ...ctx.task, skill }, instructions, memory),
      prompt: `${planningUserPrompt(
        ctx.task,
        planningContext(index, ctx.task.description),
        revision ?? undefined,
      )}${retried ? instructionNote(instruction) : ""}`,
      tools: [
        ...createReadTools(ctx.workdir, () => index),
        baseTestResultsTool(baseRun.run, ctx.signal),
        ...mcp.tools,
      ],
      finishTools: [submitPlanTool],
      maxSteps: ctx.config.llm.planMaxSteps,
      onUsage: (usage) => ctx.addUsage(usage),
      onCall: trajectoryRecorder(ctx, "plan"),
      onToolCall: (call) => progress.note(`Planning: ${describeCall(call.name, call.input)}`),
      onText: (text) => {
        const line = firstLine(text);
        if (line) progress.note(`Model: ${line}`);
      },
      signal: ctx.signal,
    }).finally(() => mcp.close());
    await progress.flush();
    const { input } = result;
    const plan = input.steps.map((s, i) => ({
      step: i + 1,
      title: redactText(s.title),
      description: redactText(s.description),
      files: s.files,
    }));
    const summary = redactText(input.summary);
    const targets = [...new Set(input.targets.map((t) => redactText(t)))];
    await ctx.update({ plan, plan_summary: summary, plan_targets: targets });
    await ctx.emit({ event_type: "plan", plan, summary, targets });
    if (revision) await recordRevisionResult(ctx.models, ctx.task, { plan });
    const files = new Set(plan.flatMap((s) => s.files)).size;
    await ctx.log(
      `Plan ready: ${plan.length} step${plan.length === 1 ? "" : "s"} touching ${files} file${files === 1 ? "" : "s"} (${result.steps} model call${result.steps === 1 ? "" : "s"}).${targets.length ? ` Targets (tests it will make pass): ${nameIds(targets)}.` : ""}`,
    );
    if (ctx.task.auto_approve) {
      await ctx.log("Plan approved automatically (auto_approve).");
      return { next: "implement" };
    }
    return { wait: { phase: "AWAITING_APPROVAL", status: "awaiting_approval" } };
  },
};
