import { z } from "zod";
import { readTrajectory } from "../../../domain/tasks/trajectories.js";
import { route, type AnyRoute } from "../../route.js";
import { timestamp } from "../../schemas.js";
import { taskParams } from "./schema.js";

/** One line of the trajectory (docs/api.md, "GET /tasks/{id}/trajectory"): one model call of the
 * task. */
export const trajectoryLine = z
  .object({
    stage: z
      .string()
      .describe("the part of the pipeline that called: plan, implement, fix, review"),
    step: z.number().int().describe("the call's number within its stage's conversation, from 1"),
    at: timestamp,
    model: z.string(),
    messages: z
      .array(z.unknown())
      .describe("the request's messages after context bounding, the system prompt first"),
    response: z.object({
      text: z.string(),
      tool_calls: z.array(z.object({ id: z.string(), name: z.string(), input: z.unknown() })),
    }),
    tool_results: z
      .array(
        z.object({
          tool_call_id: z.string(),
          name: z.string(),
          output: z.string().describe("the result as the model saw it"),
          is_error: z.boolean(),
        }),
      )
      .describe("what each tool call of the answer gave back"),
    usage: z.object({
      input_tokens: z.number().int(),
      output_tokens: z.number().int(),
      cache_read_tokens: z.number().int(),
      cache_write_tokens: z.number().int(),
    }),
    usd: z.number(),
    priced: z
      .boolean()
      .describe("false when no price is known for the model: `usd` is 0 then, not a free call"),
    ms: z.number().int().describe("the model call's wall time"),
  })
  .meta({ id: "TrajectoryLine" });

export const trajectoryRoutes: AnyRoute[] = [
  route({
    method: "get",
    path: "/tasks/:id/trajectory",
    operationId: "getTaskTrajectory",
    tag: "tasks",
    summary: "The task's model transcript (NDJSON)",
    description:
      "Every model call of the task in order, one JSON object per line (`application/x-ndjson`), redacted like logs. Kept TRAJECTORY_RETENTION_DAYS: 410 after that (extension).",
    auth: "key",
    params: taskParams,
    status: 200,
    response: {
      description: "One TrajectoryLine per line",
      schema: trajectoryLine,
      contentType: "application/x-ndjson",
    },
    errors: [404, 410],
    async handler(_ctx, { params, principal, deps }) {
      const lines = await readTrajectory(
        deps.models,
        principal.accountId,
        params.id,
        deps.config.trajectoryRetentionDays,
      );
      // The body is NDJSON text; the schema above describes each of its lines.
      return lines.map((line) => `${JSON.stringify(line)}\n`).join("") as never;
    },
  }),
];
