/*
 * Built-in agents: ready-made task templates (interface "Agents", SPEC §6). The catalogue of
 * twenty is added by the agents issue (#6); tasks already validate `agent_name` against it.
 */

export const AGENT_CATEGORIES = [
  "security",
  "quality",
  "testing",
  "docs",
  "performance",
  "infra",
  "architecture",
] as const;
export type AgentCategory = (typeof AGENT_CATEGORIES)[number];

export interface AgentDefinition {
  name: string;
  description: string;
  category: AgentCategory;
  task_template: string;
}

export const BUILTIN_AGENTS: readonly AgentDefinition[] = [];

/** A built-in agent by name, or undefined. */
export function findAgent(name: string): AgentDefinition | undefined {
  return BUILTIN_AGENTS.find((a) => a.name === name);
}
