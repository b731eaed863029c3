/* What a built-in agent is (domain/agents/agents.ts); the agents themselves are catalog.ts. */

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
