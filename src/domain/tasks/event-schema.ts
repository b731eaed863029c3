import { z } from "zod";
import { TASK_PHASES, TASK_STATUSES } from "../../db/task-states.js";

/*
 * The messages of the task WebSocket (/tasks/{id}/ws), as zod schemas. The event log's types
 * (events.ts) are inferred from them, so what the pipeline emits and the stream sends is
 * what these say, and GET /asyncapi.json (http/asyncapi.ts) is generated from them.
 */

const common = {
  seq: z
    .number()
    .int()
    .min(1)
    .describe("rises by one per event of the task, from 1, with no gaps; resume with ?since="),
  ts: z.iso.datetime().describe("when the event was stored, ISO 8601 UTC"),
};

export const taskEventPlanItem = z
  .object({
    step: z.number().int().min(1),
    title: z.string(),
    description: z.string(),
    files: z.array(z.string()).describe("paths the step changes, relative to the repository"),
  })
  .meta({ id: "PlanStep" });

export const taskEventPayloads = {
  phase: z
    .object({
      event_type: z.literal("phase"),
      phase: z.enum(TASK_PHASES),
      status: z.enum(TASK_STATUSES),
    })
    .describe("every phase change; seq 1 is always QUEUED"),
  log: z
    .object({ event_type: z.literal("log"), message: z.string() })
    .describe("progress: clone, index figures, each model tool call"),
  plan: z
    .object({
      event_type: z.literal("plan"),
      plan: z.array(taskEventPlanItem),
      summary: z.string().nullable().optional(),
      targets: z
        .array(z.string())
        .optional()
        .describe("test ids the plan says the change will make pass (submit_plan targets)"),
    })
    .describe("the plan is stored"),
  diff: z
    .object({ event_type: z.literal("diff"), diff: z.string() })
    .describe("the diff is computed (agent stages)"),
  done: z
    .object({
      event_type: z.literal("done"),
      pr_url: z
        .string()
        .nullable()
        .describe(
          "the pull request's URL; null when there is none: on a plain git workspace (the pushed branch, the task's `branch`, is the result) and when the implementation changed nothing",
        ),
    })
    .describe("the task completed; the server then closes with 1000"),
  error: z
    .object({ event_type: z.literal("error"), error: z.string() })
    .describe("the task failed or was cancelled or rejected; the server then closes with 1000"),
} as const;

export type TaskEventName = keyof typeof taskEventPayloads;

const message = <T extends z.ZodObject>(schema: T, id: string) =>
  schema.extend(common).meta({ id, description: schema.description ?? "" });

/** One WebSocket message per event type: `{event_type, ...payload, seq, ts}`. */
export const taskEventMessages = {
  phase: message(taskEventPayloads.phase, "TaskEventPhase"),
  log: message(taskEventPayloads.log, "TaskEventLog"),
  plan: message(taskEventPayloads.plan, "TaskEventPlan"),
  diff: message(taskEventPayloads.diff, "TaskEventDiff"),
  done: message(taskEventPayloads.done, "TaskEventDone"),
  error: message(taskEventPayloads.error, "TaskEventError"),
} satisfies Record<TaskEventName, z.ZodObject>;

/** What the pipeline emits (events.ts `append`): one of the payloads. */
export const taskEventPayload = z.discriminatedUnion("event_type", [
  taskEventPayloads.phase,
  taskEventPayloads.log,
  taskEventPayloads.plan,
  taskEventPayloads.diff,
  taskEventPayloads.done,
  taskEventPayloads.error,
]);
