import { z } from "zod";
import { cancelTask, decide, type Decision } from "../../../domain/tasks/gates.js";
import { createTask } from "../../../domain/tasks/create.js";
import { getTask, listTasks } from "../../../domain/tasks/store.js";
import { toTaskView, type TaskView } from "../../../domain/tasks/views.js";
import type { Principal } from "../../../domain/accounts/keys.js";
import { reviewPullRequest } from "../../../domain/pull-requests/review.js";
import { followUpTask, retryTask, reviseTask } from "../../../domain/tasks/revisions.js";
import { route, tasksOf, type AnyRoute } from "../../route.js";
import {
  createTaskBody,
  followUpTaskBody,
  rejectBody,
  retryTaskBody,
  reviseTaskBody,
  listTasksQuery,
  pullRequestReview,
  reviewPullRequestBody,
  task,
  taskParams,
} from "./schema.js";

function who(principal: Principal): string {
  return `API key "${principal.keyName}"`;
}

const APPROVALS: Array<{ decision: Decision; summary: string; operationId: string }> = [
  { decision: "approve", operationId: "approvePlan", summary: "Approve the plan" },
  { decision: "approve-diff", operationId: "approveDiff", summary: "Approve the diff" },
];

const REJECTIONS: Array<{ decision: Decision; summary: string; operationId: string }> = [
  { decision: "reject", operationId: "rejectPlan", summary: "Reject the plan (cancels the task)" },
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
  ...APPROVALS.map(({ decision, summary, operationId }) =>
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
  ...REJECTIONS.map(({ decision, summary, operationId }) =>
    route({
      method: "post",
      path: `/tasks/:id/${decision}`,
      operationId,
      tag: "tasks",
      summary,
      description: `The body is optional: \`{reason}\` is kept in the task's \`error\` and in the repository's memory, so later tasks learn it. 409 invalid_state when the task is not waiting at this gate, or when the gate was already decided.`,
      auth: "key",
      params: taskParams,
      body: rejectBody,
      status: 200,
      response: { description: "The updated task", schema: task },
      errors: [404, 409],
      async handler(_ctx, { params, body, principal, deps }) {
        return toTaskView(
          await decide(tasksOf(deps), principal.accountId, params.id, decision, who(principal), {
            reason: body?.reason,
          }),
        );
      },
    }),
  ),
  route({
    method: "post",
    path: "/tasks/:id/revise",
    operationId: "reviseTask",
    tag: "tasks",
    summary: "Send the plan or diff waiting at its gate back with feedback (extension)",
    description:
      "At the plan gate: PLANNING again with the feedback and the earlier plan, then the plan gate. At the diff gate: a round of changes for the feedback on the current diff (FIXING), VERIFYING, REVIEWING, then the diff gate again. The task's `revisions` records each; the round's plan or diff is added when it reaches the gate. 409 invalid_state when the task is not waiting at a gate, or after MAX_REVISIONS revisions.",
    auth: "key",
    params: taskParams,
    body: reviseTaskBody,
    status: 200,
    response: { description: "The task, working on the revision", schema: task },
    errors: [404, 409],
    async handler(_ctx, { params, body, principal, deps }) {
      return toTaskView(
        await reviseTask(tasksOf(deps), principal.accountId, params.id, {
          feedback: body.feedback,
          by: who(principal),
        }),
      );
    },
  }),
  route({
    method: "post",
    path: "/tasks/:id/retry",
    operationId: "retryTask",
    tag: "tasks",
    summary: "Restart a failed task where it failed (extension)",
    description:
      "Restarts the stage that failed, keeping the approved plan and the work done (the working copy, or the task's diff re-applied on the commit it started from). The optional `feedback` is given to the restarted stage. A retry is part of its task: no quota is used. 409 invalid_state unless the task failed.",
    auth: "key",
    params: taskParams,
    body: retryTaskBody,
    status: 200,
    response: { description: "The task, running again", schema: task },
    errors: [404, 409],
    async handler(_ctx, { params, body, principal, deps }) {
      return toTaskView(
        await retryTask(tasksOf(deps), principal.accountId, params.id, {
          feedback: body?.feedback,
          by: who(principal),
        }),
      );
    },
  }),
  route({
    method: "post",
    path: "/tasks/:id/follow-up",
    operationId: "followUpTask",
    tag: "tasks",
    summary: "Continue a finished task's work in a new task (extension)",
    description:
      "A new task (`parent_task_id`) that starts from the head of the finished task's branch, pushes its commits to that same branch and updates the same pull request (never a new one). Counts once against the monthly quota. 409 invalid_state unless the task ended DONE with a branch.",
    auth: "key",
    params: taskParams,
    body: followUpTaskBody,
    status: 201,
    response: { description: "The new task", schema: task },
    errors: [404, 409, 429],
    location: (t: TaskView) => `/tasks/${t.id}`,
    async handler(_ctx, { params, body, principal, deps }) {
      return toTaskView(await followUpTask(tasksOf(deps), principal.accountId, params.id, body));
    },
  }),
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
