import { z } from "zod";
import { timestamp } from "../../schemas.js";

export const periodQuery = z.strictObject({
  period: z
    .enum(["7", "30", "90"], { message: "must be 7, 30 or 90" })
    .default("30")
    .transform((v) => Number(v) as 7 | 30 | 90)
    .describe("days: 7, 30 or 90 (default 30)"),
});

const rate = z.number().min(0).max(1).nullable();

const figures = {
  tasks: z.object({
    total: z.number().int(),
    completed: z.number().int(),
    failed: z.number().int(),
    cancelled: z.number().int(),
    in_progress: z.number().int().describe("queued, running or waiting at a gate"),
  }),
  success_rate: rate.describe(
    "completed / (completed + failed + cancelled); null when none finished",
  ),
  duration_seconds: z
    .object({
      median: z.number().nullable(),
      p90: z.number().nullable(),
      count: z.number().int().describe("finished tasks measured"),
    })
    .describe("finished_at − created_at of the finished tasks"),
  pull_requests: z.object({
    opened: z.number().int(),
    merged: z.number().int(),
    merge_rate: rate.describe("merged / opened; null when none opened"),
  }),
  cost_usd: z.object({
    total: z.number(),
    per_successful_task: z
      .number()
      .nullable()
      .describe("total / completed; null when none completed"),
  }),
};

export const velocityReport = z
  .object({
    period_days: z.number().int(),
    from: timestamp.describe("00:00 UTC of the first day of the period"),
    to: timestamp.describe("when the figures were computed"),
    ...figures,
    tokens: z
      .object({
        input: z.number().int().describe("every prompt token of the period's tasks"),
        cached_input: z.number().int().describe("part of input read from the prompt cache"),
        cache_write: z.number().int().describe("part of input written to the prompt cache"),
        uncached_input: z.number().int().describe("input − cached_input − cache_write"),
        output: z.number().int(),
      })
      .describe("model tokens of the period's tasks, cached and uncached input apart"),
    by_agent: z.array(
      z.object({
        agent_name: z.string().nullable().describe("null: tasks not run through an agent"),
        ...figures,
      }),
    ),
  })
  .meta({ id: "VelocityReport" });

export const timelineRow = z
  .object({
    date: z.string().describe("the UTC day, YYYY-MM-DD"),
    tasks_created: z.number().int(),
    completed: z.number().int(),
    failed: z.number().int(),
    cancelled: z.number().int(),
    pull_requests_opened: z.number().int(),
    pull_requests_merged: z.number().int(),
    cost_usd: z.number(),
  })
  .meta({ id: "VelocityTimelineRow" });
