import { z } from "zod";
import { positionKey } from "../../paging.js";
import type { TaskView } from "../../../domain/tasks/views.js";
import {
  AGENT_CATEGORIES,
  getAgent,
  listAgents,
  runAgentTask,
  toAgentSummary,
} from "../../../domain/agents/agents.js";
import { toTaskView } from "../../../domain/tasks/views.js";
import { route, tasksOf, type AnyRoute } from "../../route.js";
import { task } from "../tasks/schema.js";
import {
  agent,
  agentCategory,
  agentParams,
  agentSummary,
  listAgentsQuery,
  runAgentBody,
} from "./schema.js";

export const agentRoutes: AnyRoute[] = [
  route({
    method: "get",
    path: "/agents",
    operationId: "listAgents",
    tag: "agents",
    summary: "The built-in agents",
    description:
      "All 20, on every tier, ordered by category (in the order of GET /agents/categories), without their templates. An unknown `category` is 400.",
    auth: "key",
    query: listAgentsQuery,
    status: 200,
    response: { description: "Agents", schema: z.array(agentSummary) },
    // A fixed list, answered whole: the position is the key.
    page: { key: (_agent: unknown, index: number) => [positionKey(index)] },
    async handler(_ctx, { query }) {
      return listAgents(query.category).map(toAgentSummary);
    },
  }),
  // Before /agents/:name, so "categories" is never taken for an agent's name.
  route({
    method: "get",
    path: "/agents/categories",
    operationId: "listAgentCategories",
    tag: "agents",
    summary: "The agent categories",
    auth: "key",
    status: 200,
    response: { description: "Category names", schema: z.array(agentCategory) },
    async handler() {
      return [...AGENT_CATEGORIES];
    },
  }),
  route({
    method: "get",
    path: "/agents/:name",
    operationId: "getAgent",
    tag: "agents",
    summary: "One agent, with its task template",
    auth: "key",
    params: agentParams,
    status: 200,
    response: { description: "The agent", schema: agent },
    errors: [404],
    async handler(_ctx, { params }) {
      return getAgent(params.name);
    },
  }),
  route({
    method: "post",
    path: "/agents/:name/run",
    operationId: "runAgent",
    tag: "agents",
    summary: "Run an agent: create a task from its template",
    description:
      "Creates a task like POST /tasks/ whose description is the agent's template (followed by `instructions`, when given) and whose `agent_name` is the agent. Claims one task of the monthly allowance (429 `monthly_limit_reached` when none is left).",
    auth: "key",
    params: agentParams,
    body: runAgentBody,
    status: 201,
    response: { description: "The new task", schema: task },
    errors: [404, 429],
    location: (t: TaskView) => `/tasks/${t.id}`,
    async handler(_ctx, { params, body, principal, deps }) {
      return toTaskView(await runAgentTask(tasksOf(deps), principal.accountId, params.name, body));
    },
  }),
];
