import { z, type ZodType } from "zod";
import { listAgents, runAgentTask, toAgentSummary } from "../domain/agents/agents.js";
import { latestReport, requestScan, toHealthReportView } from "../domain/health/reports.js";
import type { Principal } from "../domain/accounts/keys.js";
import { reviewPullRequest } from "../domain/pull-requests/review.js";
import { listSkills } from "../domain/agents/skills.js";
import { createTask } from "../domain/tasks/create.js";
import { decide, type Decision } from "../domain/tasks/gates.js";
import { getTask, listTasks } from "../domain/tasks/store.js";
import { followUpTask, retryTask, reviseTask } from "../domain/tasks/revisions.js";
import { toTaskView } from "../domain/tasks/views.js";
// The REST door's request and response schemas are the contract of both doors
// (.dependency-cruiser.cjs lets this door read them, and nothing else of http/).
import {
  agentParams,
  agentSummary,
  listAgentsQuery,
  runAgentBody,
} from "../http/routes/agents/schema.js";
import { encodeCursor, pageRequest } from "../http/paging.js";
import { healthReport, repoPathParams, repoQuery } from "../http/routes/health-reports/schema.js";
import { skillSummary } from "../http/routes/skills/schema.js";
import {
  createTaskBody,
  followUpTaskBody,
  listTasksQuery,
  pullRequestReview,
  rejectBody,
  retryTaskBody,
  reviewPullRequestBody,
  reviseTaskBody,
  task,
  taskParams,
} from "../http/routes/tasks/schema.js";
import type { ToolCall } from "./types.js";
import { waitForTask, waitInput, waitOutput } from "./wait.js";

export interface McpTool<I extends ZodType = ZodType, O extends ZodType = ZodType> {
  name: string;
  title: string;
  description: string;
  input: I;
  output: O;
  /** MCP tool annotations: a client may run read-only tools without asking. */
  readOnly: boolean;
  run(input: z.output<I>, call: ToolCall): Promise<z.output<O>>;
}

/** Identity helper keeping the zod inference of one tool. */
function tool<I extends ZodType, O extends ZodType>(spec: McpTool<I, O>): McpTool<I, O> {
  return spec;
}

function who(principal: Principal): string {
  return `API key "${principal.keyName}" (MCP)`;
}

function gateTool(decision: Decision, name: string, title: string, description: string) {
  const rejecting = decision === "reject" || decision === "reject-diff";
  return tool({
    name,
    title,
    description,
    input: rejecting ? taskParams.extend(rejectBody.unwrap().shape) : taskParams,
    output: task,
    readOnly: false,
    async run(input, { principal, deps }) {
      const reason = (input as { reason?: string }).reason;
      return toTaskView(
        await decide(deps.tasks, principal.accountId, input.id, decision, who(principal), {
          reason,
        }),
      );
    },
  });
}

const healthInput = repoPathParams.extend(repoQuery.shape).extend({
  scan: z
    .boolean()
    .default(false)
    .describe("queue a new scan and answer its pending report instead of the latest one"),
});

/**
 * The door's tools (docs/mcp.md): each is the REST route of the same name's domain call, with
 * that route's zod schemas. Lists answer an object (MCP output schemas are objects).
 */
// Tools are collected with their own schema types.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyMcpTool = McpTool<any, any>;

export const MCP_TOOLS: readonly AnyMcpTool[] = [
  tool({
    name: "create_task",
    title: "Create a task",
    description:
      "Queues a software-engineering task on one of the account's repositories (POST /tasks). It plans, stops at the plan gate (unless auto_approve), implements, verifies, reviews, stops at the diff gate, then opens a pull request. Follow it with wait_for_task.",
    input: createTaskBody,
    output: task,
    readOnly: false,
    async run(input, { principal, deps }) {
      return toTaskView(await createTask(deps.tasks, principal.accountId, input));
    },
  }),
  tool({
    name: "get_task",
    title: "Get a task",
    description:
      "One task of the account: status, phase, plan, diff, review, pull request (GET /tasks/{id}).",
    input: taskParams,
    output: task,
    readOnly: true,
    async run(input, { principal, deps }) {
      return toTaskView(await getTask(deps.models, principal.accountId, input.id));
    },
  }),
  tool({
    name: "list_tasks",
    title: "List tasks",
    description:
      "The account's tasks, newest first (GET /tasks), paged as every list of the API: `limit` and `cursor` in, `next_cursor` (the `cursor` of the next page, null on the last) out. `before`/`next_before` (a task id) are the older names, deprecated but still served.",
    input: listTasksQuery,
    output: z.object({
      tasks: z.array(task),
      next_cursor: z
        .string()
        .nullable()
        .describe("the `cursor` of the next page (GET /tasks' `X-Next-Cursor`); null on the last"),
      next_before: z
        .string()
        .nullable()
        .describe("deprecated: the `before` of the next page (a task id); use `next_cursor`"),
    }),
    readOnly: true,
    async run(input, { principal, deps }) {
      const page = pageRequest(input);
      const rows = await listTasks(deps.models, principal.accountId, {
        ...input,
        limit: page.limit + 1,
        after: page.after,
      });
      const served = rows.slice(0, page.limit).map(toTaskView);
      const last = rows.length > page.limit ? served.at(-1) : undefined;
      return {
        tasks: served,
        next_cursor: last ? encodeCursor([last.created_at, last.id]) : null,
        next_before: last?.id ?? null,
      };
    },
  }),
  tool({
    name: "wait_for_task",
    title: "Wait for a task",
    description:
      'Waits until the task reaches its next gate (plan or diff approval) or its end (`until: "gate"`, the default), or only its end (`until: "end"`), at most `timeout_s` seconds, sending a progress notification for each phase meanwhile. Answers at once when the task is already there. `reached` says why it returned.',
    input: waitInput,
    output: waitOutput,
    readOnly: true,
    run: waitForTask,
  }),
  gateTool(
    "approve",
    "approve_plan",
    "Approve the plan",
    "Approves the plan waiting at the plan gate: the task goes on to IMPLEMENTING (POST /tasks/{id}/approve). invalid_state when it is not waiting there.",
  ),
  gateTool(
    "reject",
    "reject_plan",
    "Reject the plan",
    "Rejects the plan: the task is cancelled; the optional reason is kept (POST /tasks/{id}/reject).",
  ),
  gateTool(
    "approve-diff",
    "approve_diff",
    "Approve the diff",
    "Approves the diff waiting at the diff gate: the branch is pushed and the pull request opened (POST /tasks/{id}/approve-diff).",
  ),
  gateTool(
    "reject-diff",
    "reject_diff",
    "Reject the diff",
    "Rejects the diff: the task is cancelled and nothing is pushed (POST /tasks/{id}/reject-diff).",
  ),
  tool({
    name: "revise_task",
    title: "Revise at a gate",
    description:
      "Sends the plan or diff waiting at its gate back with feedback: the task plans again, or makes a round of changes, and returns to the same gate (POST /tasks/{id}/revise).",
    input: taskParams.extend(reviseTaskBody.shape),
    output: task,
    readOnly: false,
    async run(input, { principal, deps }) {
      return toTaskView(
        await reviseTask(deps.tasks, principal.accountId, input.id, {
          feedback: input.feedback,
          by: who(principal),
        }),
      );
    },
  }),
  tool({
    name: "follow_up_task",
    title: "Follow up a finished task",
    description:
      "A new task continuing a task that ended DONE with a branch: it pushes to the same branch and pull request (POST /tasks/{id}/follow-up).",
    input: taskParams.extend(followUpTaskBody.shape),
    output: task,
    readOnly: false,
    async run({ id, ...body }, { principal, deps }) {
      return toTaskView(await followUpTask(deps.tasks, principal.accountId, id, body));
    },
  }),
  tool({
    name: "retry_task",
    title: "Retry a failed task",
    description:
      "Restarts a failed task at the stage that failed, keeping the approved plan and the work done; `feedback` is a hint for that stage (POST /tasks/{id}/retry).",
    input: taskParams.extend(retryTaskBody.unwrap().shape),
    output: task,
    readOnly: false,
    async run(input, { principal, deps }) {
      return toTaskView(
        await retryTask(deps.tasks, principal.accountId, input.id, {
          feedback: input.feedback,
          by: who(principal),
        }),
      );
    },
  }),
  tool({
    name: "list_agents",
    title: "List agents",
    description: "The built-in agents (GET /agents): ready-made tasks such as a security audit.",
    input: listAgentsQuery.pick({ category: true }),
    output: z.object({ agents: z.array(agentSummary) }),
    readOnly: true,
    async run(input) {
      return { agents: listAgents(input.category).map(toAgentSummary) };
    },
  }),
  tool({
    name: "run_agent",
    title: "Run an agent",
    description: "Creates a task from a built-in agent's template (POST /agents/{name}/run).",
    input: runAgentBody.extend(agentParams.shape),
    output: task,
    readOnly: false,
    async run({ name, ...body }, { principal, deps }) {
      return toTaskView(await runAgentTask(deps.tasks, principal.accountId, name, body));
    },
  }),
  tool({
    name: "list_skills",
    title: "List skills",
    description: "The account's skills and the built-ins (GET /skills); a task takes one by name.",
    input: z.strictObject({}),
    output: z.object({ skills: z.array(skillSummary) }),
    readOnly: true,
    async run(_input, { principal, deps }) {
      return { skills: await listSkills(deps.models, principal.accountId) };
    },
  }),
  tool({
    name: "review_pull_request",
    title: "Review a pull request",
    description:
      "An AI review of a pull request of one of the account's GitHub repositories; with post: true it is posted on the pull request (POST /tasks/review).",
    input: reviewPullRequestBody,
    output: pullRequestReview,
    readOnly: false,
    async run(input, { principal, deps }) {
      return reviewPullRequest(deps, principal.accountId, input);
    },
  }),
  tool({
    name: "health_report",
    title: "Repository health",
    description:
      "The latest completed health report of a repository (GET /health-reports/{repo_id}); with scan: true, queues a new scan and answers its pending report (POST /health-reports/{repo_id}/scan).",
    input: healthInput,
    output: healthReport,
    readOnly: false,
    async run(input, { principal, deps }) {
      if (input.scan)
        return toHealthReportView(
          await requestScan(deps.models, principal.accountId, input, deps.healthScans),
        );
      return toHealthReportView(
        await latestReport(deps.models, principal.accountId, input.repo_id, input.workspace_id),
      );
    },
  }),
];
