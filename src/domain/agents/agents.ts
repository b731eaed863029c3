import type { TaskRecord } from "../../db/models.js";
import { errors } from "../../errors.js";
import type { AgentDefinition } from "./types.js";
import { findAgent } from "./catalog.js";
import { createTask, type CreateTaskInput } from "../tasks/create.js";
import { type TaskDeps } from "../tasks/model.js";

/*
 * Built-in agents: ready-made task templates (docs/api.md, "Agents"). The catalogue is
 * data (catalog.ts); running an agent creates an ordinary task whose description is
 * the agent's template, so it claims quota and runs the pipeline like any other task.
 */

export { AGENT_CATEGORIES, type AgentCategory, type AgentDefinition } from "./types.js";
export { BUILTIN_AGENTS, findAgent, listAgents } from "./catalog.js";

/** An agent by name; an unknown name is `not_found`. */
export function getAgent(name: string): AgentDefinition {
  const agent = findAgent(name);
  if (!agent) throw errors.notFound("agent");
  return agent;
}

/** The agent as listings show it: without its template. */
export function toAgentSummary(agent: AgentDefinition) {
  return { name: agent.name, description: agent.description, category: agent.category };
}

/** The description of a task an agent run creates: the template, then the caller's words. */
export function agentTaskDescription(agent: AgentDefinition, instructions?: string): string {
  const extra = instructions?.trim();
  return extra
    ? `${agent.task_template}\n\nAdditional instructions from the requester:\n${extra}`
    : agent.task_template;
}

export type RunAgentInput = Omit<CreateTaskInput, "description" | "agent_name"> & {
  /** Extra instructions appended to the template (extension). */
  instructions?: string | undefined;
};

/**
 * Runs an agent: creates a task with the agent's template as its description and
 * `agent_name` set, claiming one task of the monthly allowance (429 when none is left).
 */
export async function runAgentTask(
  deps: TaskDeps,
  accountId: string,
  name: string,
  input: RunAgentInput,
): Promise<TaskRecord> {
  const agent = getAgent(name);
  const { instructions, ...rest } = input;
  return createTask(deps, accountId, {
    ...rest,
    description: agentTaskDescription(agent, instructions),
    agent_name: agent.name,
    source: rest.source ?? "agent",
    origin: rest.origin ?? { agent: agent.name },
  });
}
