import { findAgent } from "../domain/agents/agents.js";
import type { SkillDefinition } from "../domain/agents/skills.js";
import { loadPrompt } from "../util/prompt-file.js";
import { readText } from "../workcopy/fs.js";

/*
 * Prompt assembly. What goes in, in order: the stage's rules, the repository's own
 * instructions (AGENTS.md and the like), the agent's template and the skill's addition, then
 * the task. runToolLoop redacts the assembled prompts, so no registered secret reaches a model.
 * The texts are the files of prompts/ (util/prompt-file.ts), read when this module loads.
 */

export const PROMPTS = {
  planningSystem: loadPrompt(import.meta.url, "prompts/planning-system.md"),
  planningUser: loadPrompt(import.meta.url, "prompts/planning-user.md"),
  agentRules: loadPrompt(import.meta.url, "prompts/agent-rules.md"),
  implementLead: loadPrompt(import.meta.url, "prompts/implement-lead.md"),
  fixLead: loadPrompt(import.meta.url, "prompts/fix-lead.md"),
  implementUser: loadPrompt(import.meta.url, "prompts/implement-user.md"),
  implementWorkerUser: loadPrompt(import.meta.url, "prompts/implement-worker-user.md"),
  fixUser: loadPrompt(import.meta.url, "prompts/fix-user.md"),
  reviewUser: loadPrompt(import.meta.url, "prompts/review-user.md"),
  reworkUser: loadPrompt(import.meta.url, "prompts/rework-user.md"),
  planningRevision: loadPrompt(import.meta.url, "prompts/planning-revision.md"),
  followUpNote: loadPrompt(import.meta.url, "prompts/follow-up-note.md"),
  fixFeedback: loadPrompt(import.meta.url, "prompts/fix-feedback.md"),
};

/**
 * What a round after the first works on (the task's `instruction`): a person's feedback, the
 * AI review's comments, or a retry's hint. The text was cleaned when it was given
 * (domain/tasks/revisions.ts).
 */
export interface PromptInstruction {
  kind: "feedback" | "review" | "retry";
  text: string;
  by: string;
}

function instructionSource(instruction: PromptInstruction): string {
  if (instruction.kind === "review") return "the review of the change";
  return instruction.kind === "retry" ? `${instruction.by}, retrying the task,` : instruction.by;
}

/** Instruction files agents conventionally read, most specific first. */
const INSTRUCTION_FILES = [
  "AGENTS.md",
  "CLAUDE.md",
  ".github/copilot-instructions.md",
  ".cursorrules",
  ".windsurfrules",
  "CONVENTIONS.md",
];

const MAX_INSTRUCTION_BYTES = 12_000;

/**
 * The repository's instruction files, each capped, as one block (empty when none). Read
 * through workcopy/fs.ts: an instruction file that is a symbolic link (committed as one,
 * or swapped for one by a command) is left out, never followed to the host's files.
 */
export async function readRepositoryInstructions(workdir: string): Promise<string> {
  const parts: string[] = [];
  let budget = MAX_INSTRUCTION_BYTES * 2;
  for (const file of INSTRUCTION_FILES) {
    if (budget <= 0) break;
    // Up to 4 bytes a character: enough bytes for the character cap below.
    const text = await readText(workdir, file, {
      maxBytes: MAX_INSTRUCTION_BYTES * 4,
      partial: true,
    });
    if (!text?.trim()) continue;
    const capped = text.slice(0, Math.min(MAX_INSTRUCTION_BYTES, budget));
    budget -= capped.length;
    parts.push(`<file path="${file}">\n${capped.trim()}\n</file>`);
  }
  return parts.join("\n\n");
}

export interface PromptTask {
  description: string;
  skill_name?: string | null | undefined;
  /** The skill resolved for the task's account (skillForTask), built-in or the account's own. */
  skill?: SkillDefinition | null | undefined;
  agent_name?: string | null | undefined;
  repo: { full_name: string; default_branch: string };
}

function extras(task: PromptTask, instructions: string, memory = ""): string {
  const blocks: string[] = [];
  if (memory) blocks.push(memory);
  if (instructions) {
    blocks.push(
      `The repository's own instructions for coding agents follow. Follow them where they do not conflict with the rules above.\n<repository-instructions>\n${instructions}\n</repository-instructions>`,
    );
  }
  const agent = task.agent_name ? findAgent(task.agent_name) : undefined;
  if (agent) {
    // An agent run's task description is the template itself: name the role, don't repeat it.
    blocks.push(
      task.description.includes(agent.task_template)
        ? `You are acting as the "${agent.name}" agent (${agent.category}): ${agent.description} Its instructions are the task below.`
        : `You are acting as the "${agent.name}" agent.\n${agent.task_template}`,
    );
  }
  const skill = task.skill;
  if (skill) blocks.push(`Skill "${skill.name}":\n${skill.system_prompt_addition}`);
  return blocks.join("\n\n");
}

/** The system prompt of PLANNING; `memory` is the repository memory block, if any. */
export function planningSystemPrompt(task: PromptTask, instructions: string, memory = ""): string {
  const rules = PROMPTS.planningSystem.fill({
    repo: task.repo.full_name,
    branch: task.repo.default_branch,
  });
  const more = extras(task, instructions, memory);
  return more ? `${rules}\n\n${more}` : rules;
}

/**
 * The first user message of PLANNING: the task, the repository's shape, likely files and
 * their declarations (src/indexer/planning-context.ts).
 */
export function planningUserPrompt(
  task: PromptTask & { follow_up?: { branch: string } | null | undefined },
  context: { tree: string; hits: Array<{ path: string; snippet: string }>; map: string },
  /** A revision of the plan: the plan it revises and the feedback on it. */
  revision?: { by: string; feedback: string; plan: PromptPlanStep[]; summary?: string | null },
): string {
  const base = planningBasePrompt(task, context);
  const followUp = task.follow_up
    ? `\n\n${PROMPTS.followUpNote.fill({ branch: task.follow_up.branch })}`
    : "";
  const revised = revision
    ? `\n\n${PROMPTS.planningRevision.fill({
        by: revision.by,
        plan: `${revision.summary ? `${revision.summary}\n` : ""}${planText(revision.plan)}`,
        feedback: revision.feedback,
      })}`
    : "";
  return `${base}${followUp}${revised}`;
}

function planningBasePrompt(
  task: PromptTask,
  context: { tree: string; hits: Array<{ path: string; snippet: string }>; map: string },
): string {
  const likely = context.hits.length
    ? context.hits.map((h) => `- ${h.path}\n${h.snippet.replace(/^/gm, "    ")}`).join("\n")
    : "(no file matched the task's words)";
  const map = context.map
    ? `\n\nDeclarations in the likely files (best match first):\n${context.map}`
    : "";
  return PROMPTS.planningUser.fill({
    description: task.description,
    tree: context.tree,
    likely,
    map,
  });
}

export interface PromptPlanStep {
  step: number;
  title: string;
  description?: string | null;
  files: string[];
}

function planText(steps: PromptPlanStep[]): string {
  return steps
    .map(
      (s) =>
        `${s.step}. ${s.title}${s.files.length ? ` [files: ${s.files.join(", ")}]` : ""}\n${(s.description ?? "").replace(/^/gm, "   ")}`,
    )
    .join("\n");
}

/** The system prompt of IMPLEMENTING and FIXING. */
export function agentSystemPrompt(
  task: PromptTask,
  instructions: string,
  memory: string,
  role: "implement" | "fix",
): string {
  const lead = (role === "implement" ? PROMPTS.implementLead : PROMPTS.fixLead).fill({
    repo: task.repo.full_name,
  });
  const more = extras(task, instructions, memory);
  return `${lead}\n${PROMPTS.agentRules.fill()}${more ? `\n\n${more}` : ""}`;
}

/** The first user message of an implementing agent (the whole plan, or one worker's part). */
export function implementUserPrompt(
  task: PromptTask,
  plan: { summary: string | null | undefined; steps: PromptPlanStep[] },
  part?: { worker: number; workers: number; steps: PromptPlanStep[]; files: string[] },
): string {
  const shared = {
    description: task.description,
    summary: plan.summary ? `: ${plan.summary}` : "",
    plan: planText(plan.steps),
  };
  if (!part) return PROMPTS.implementUser.fill(shared);
  return PROMPTS.implementWorkerUser.fill({
    ...shared,
    worker: String(part.worker),
    workers: String(part.workers),
    steps: planText(part.steps),
    files: part.files.join(", "),
  });
}

/** The first user message of a fixing round: what failed, and the change so far. */
export function fixUserPrompt(
  task: PromptTask,
  round: { attempt: number; maxAttempts: number; failures: string; diff: string },
  /** The round's instruction (a revision's feedback, a retry's hint), kept in view. */
  instruction?: PromptInstruction | null,
): string {
  const prompt = PROMPTS.fixUser.fill({
    description: task.description,
    attempt: String(round.attempt),
    max_attempts: String(round.maxAttempts),
    failures: round.failures,
    diff: round.diff || "(no changes yet)",
  });
  if (!instruction) return prompt;
  return `${prompt}${instructionNote(instruction)}`;
}

/**
 * The round's instruction as a note appended to a stage's first user message (a retried
 * IMPLEMENTING or PLANNING with a hint); empty without one.
 */
export function instructionNote(instruction: PromptInstruction | null | undefined): string {
  if (!instruction) return "";
  return `\n\n${PROMPTS.fixFeedback.fill({
    source: instructionSource(instruction),
    feedback: instruction.text,
  })}`;
}

/** The first user message of a round of changes for feedback on the diff (stages/rework.ts). */
export function reworkUserPrompt(
  task: PromptTask,
  round: { round: number; instruction: PromptInstruction; diff: string },
): string {
  return PROMPTS.reworkUser.fill({
    description: task.description,
    source: instructionSource(round.instruction),
    round: String(round.round),
    feedback: round.instruction.text,
    diff: round.diff || "(no changes yet)",
  });
}

/** The first user message of REVIEWING. */
export function reviewUserPrompt(
  task: PromptTask,
  plan: { summary: string | null | undefined; steps: PromptPlanStep[] },
  diff: string,
  checks: string,
): string {
  return PROMPTS.reviewUser.fill({
    description: task.description,
    summary: plan.summary ? `: ${plan.summary}` : "",
    plan: planText(plan.steps),
    checks,
    diff,
  });
}
