import { parseSpec, queuePlannedTasks } from "../../../domain/prism/prism.js";
import { route, tasksOf, type AnyRoute } from "../../route.js";
import { parseSpecBody, plannedTasks, queuedTasks, queueTasksBody } from "./schema.js";

export const prismRoutes: AnyRoute[] = [
  route({
    method: "post",
    path: "/prism/parse",
    operationId: "parseSpec",
    tag: "spec planner",
    summary: "Turn a specification into planned tasks",
    description:
      "The model breaks the specification into tasks (submit_tasks). The list is checked (ids unique, depends_on only listed ids, no cycle, priority >= 1, skill null or an existing skill); an invalid list is sent back to the model with what was wrong, at most 3 times, then 502 naming the problems. Answers the items in dependency order (level by level, ties by priority, then id). Creates nothing and claims no quota. 503 when no model is configured.",
    auth: "key",
    body: parseSpecBody,
    status: 200,
    response: { description: "Planned task items, in dependency order", schema: plannedTasks },
    errors: [502, 503],
    async handler(_ctx, { body, principal, deps }) {
      return parseSpec(deps, principal.accountId, body.spec);
    },
  }),
  route({
    method: "post",
    path: "/prism/queue",
    operationId: "queueTasks",
    tag: "spec planner",
    summary: "Create the tasks of a planned task list",
    description:
      "Checks the list (400 naming a duplicate id, an unknown dependency, a cycle such as `1 -> 3 -> 1`, or an unknown skill), claims the monthly allowance for every task at once (429 and nothing created when they do not all fit), and creates one task per item, in item order, with depends_on mapped to the created task ids. A task starts when every task it depends on is DONE; when one of them fails or is cancelled, it fails too, with an error naming that dependency.",
    auth: "key",
    body: queueTasksBody,
    status: 201,
    response: { description: "The created tasks and their execution levels", schema: queuedTasks },
    errors: [404, 429],
    // Several tasks are created; Location names the first (GET /tasks lists them all).
    location: (queued: { queued: string[] }) => `/tasks/${queued.queued[0] ?? ""}`,
    async handler(_ctx, { body, principal, deps }) {
      return queuePlannedTasks(tasksOf(deps), principal.accountId, body);
    },
  }),
];
