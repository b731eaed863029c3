import { z } from "zod";
import { pageFields } from "../../paging.js";
import { AGENT_CATEGORIES } from "../../../domain/agents/agents.js";
import { opaqueId } from "../../schemas.js";
import { skillName } from "../skills/schema.js";

const repoRef = z
  .string()
  .trim()
  .min(1)
  .max(200)
  .regex(/^[A-Za-z0-9_.:-]+(\/[A-Za-z0-9_.-]+)?$/, "must be a repository id or owner/name")
  .describe("repo_id, or the repository's full name owner/name");

export const agentCategory = z.enum(AGENT_CATEGORIES);

export const listAgentsQuery = z.strictObject({
  category: agentCategory.optional().describe("only the agents of this category"),
  ...pageFields,
});

/** Any path name is looked up (404 when unknown); only a malformed one is 400. */
export const agentParams = z.strictObject({ name: opaqueId });

export const agentSummary = z
  .object({
    name: z.string(),
    description: z.string(),
    category: agentCategory,
  })
  .meta({ id: "AgentSummary" });

export const agent = agentSummary
  .extend({
    task_template: z
      .string()
      .describe("the description of the task a run creates: what to look for, change, verify"),
  })
  .meta({ id: "Agent" });

export const runAgentBody = z.strictObject({
  workspace_id: opaqueId,
  repo_id: repoRef,
  auto_approve: z.boolean().default(false),
  instructions: z
    .string()
    .trim()
    .min(1)
    .max(10_000)
    .optional()
    .describe("extension: extra instructions appended to the agent's template"),
  skill_name: skillName
    .nullable()
    .optional()
    .describe("extension: a skill (built-in or the account's own) to apply to the task"),
});
