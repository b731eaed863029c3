import { z } from "zod";
import {
  cancelTask,
  createTask,
  decide,
  getTask,
  listTasks,
  toTaskView,
  type Decision,
  type TaskView,
} from "../../../domain/tasks.js";
import type { Principal } from "../../../domain/keys.js";
import { reviewPullRequest } from "../../../domain/pr-review.js";
import { route, tasksOf, type AnyRoute } from "../../route.js";
import {
  createTaskBody,
  listTasksQuery,
  pullRequestReview,
  reviewPullRequestBody,
  task,
  taskParams,
} from "./schema.js";

function who(principal: Principal): string {
  return `API key "${principal.keyName}"`;
}

const DECISIONS: Array<{ decision: Decision; summary: string; operationId: string }> = [
  { decision: "approve", operationId: "approvePlan", summary: "Approve the plan" },
  { decision: "reject", operationId: "rejectPlan", summary: "Reject the plan (cancels the task)" },
  { decision: "approve-diff", operationId: "approveDiff", summary: "Approve the diff" },
  {
    decision: "reject-diff",
    operationId: "rejectDiff",
    summary: "Reject the diff (cancels the task, nothing is pushed)",
  },
];

export const taskRoutes: AnyRoute[] = [
  route({
    method: "post",
    path: "/tasks",
    operationId: "createTask",
    tag: "tasks",
    summary: "Create a task",
    description:
      "Claims one task of the account's monthly allowance and queues the task: it starts in phase QUEUED, status queued. Watch it on /tasks/{id}/ws.",
    auth: "key",
    body: createTaskBody,
    status: 201,
    response: { description: "The new task", schema: task },
    errors: [404, 429, 503],
    location: (t: TaskView) => `/tasks/${t.id}`,
    async handler(_ctx, { body, principal, deps }) {
      return toTaskView(await createTask(tasksOf(deps), principal.accountId, body));
    },
  }),
  route({
    method: "get",
    path: "/tasks",
    operationId: "listTasks",
    tag: "tasks",
    summary: "The account's tasks, newest first",
    description:
      "Paged (see Paging: `limit`, `cursor`, the `Link` and `X-Next-Cursor` headers); `before` (the last id of the previous page) still works.",
    auth: "key",
    query: listTasksQuery,
    status: 200,
    response: { description: "Tasks", schema: z.array(task) },
    page: { key: (t: TaskView) => [t.created_at, t.id] },
    async handler(_ctx, { query, principal, deps, page }) {
      const filter = { ...query, limit: page.limit + 1, after: page.after };
      return (await listTasks(deps.models, principal.accountId, filter)).map(toTaskView);
    },
  }),
  // Before the /tasks/:id routes, so "review" is never taken for a task id.
  route({
    method: "post",
    path: "/tasks/review",
    operationId: "reviewPullRequest",
    tag: "tasks",
    summary: "Review an existing pull request",
    description:
      "An AI review of a pull request of one of the account's GitHub repositories; creates no task. With `post: true` the review is posted on the pull request. 404 for a repository outside the account's workspaces (nothing is fetched then); 502 when GitHub or the model fails; 503 when the GitHub App or the model is not configured.",
    auth: "key",
    body: reviewPullRequestBody,
    status: 200,
    response: { description: "The review", schema: pullRequestReview },
    errors: [404, 409, 502, 503],
    async handler(_ctx, { body, principal, deps }) {
      return reviewPullRequest(deps, principal.accountId, body);
    },
  }),
  route({
    method: "get",
    path: "/tasks/:id",
    operationId: "getTask",
    tag: "tasks",
    summary: "One task",
    auth: "key",
    params: taskParams,
    status: 200,
    response: { description: "The task", schema: task },
    errors: [404],
    async handler(_ctx, { params, principal, deps }) {
      return toTaskView(await getTask(deps.models, principal.accountId, params.id));
    },
  }),
  ...DECISIONS.map(({ decision, summary, operationId }) =>
    route({
      method: "post",
      path: `/tasks/:id/${decision}`,
      operationId,
      tag: "tasks",
      summary,
      description: `409 invalid_state when the task is not waiting at this gate, or when the gate was already decided.`,
      auth: "key",
      params: taskParams,
      status: 200,
      response: { description: "The updated task", schema: task },
      errors: [404, 409],
      async handler(_ctx, { params, principal, deps }) {
        return toTaskView(
          await decide(tasksOf(deps), principal.accountId, params.id, decision, who(principal)),
        );
      },
    }),
  ),
  route({
    method: "post",
    path: "/tasks/:id/cancel",
    operationId: "cancelTask",
    tag: "tasks",
    summary: "Cancel a task (extension)",
    description:
      "Stops a task at any point before it ends: status cancelled, phase FAILED, an error naming who cancelled it. 409 invalid_state when it has already ended.",
    auth: "key",
    params: taskParams,
    status: 200,
    response: { description: "The cancelled task", schema: task },
    errors: [404, 409],
    async handler(_ctx, { params, principal, deps }) {
      return toTaskView(
        await cancelTask(tasksOf(deps), principal.accountId, params.id, who(principal)),
      );
    },
  }),
];
