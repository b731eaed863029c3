import { loadPrompt } from "../../util/prompt-file.js";

/* The spec planner's prompts (POST /prism/parse, domain/prism/prism.ts): the files of prompts/. */

export const PROMPTS = {
  system: loadPrompt(import.meta.url, "prompts/spec-planner-system.md"),
  user: loadPrompt(import.meta.url, "prompts/spec-planner-user.md"),
};

/** The system prompt of the spec planner (`POST /prism/parse`); `skills` are the usable ones. */
export function specPlannerSystemPrompt(
  skills: Array<{ name: string; description: string }>,
  maxTasks: number,
): string {
  const skillList = skills.length
    ? skills.map((s) => `- ${s.name}: ${s.description}`).join("\n")
    : "(none)";
  return PROMPTS.system.fill({ max_tasks: String(maxTasks), skills: skillList });
}

/** The first user message of the spec planner: the specification. */
export function specPlannerUserPrompt(spec: string): string {
  return PROMPTS.user.fill({ spec });
}
