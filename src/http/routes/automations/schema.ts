import { z } from "zod";
import { AUTOMATION_TRIGGERS } from "../../../domain/vocabulary.js";
import { scheduleProblem, timezoneProblem } from "../../../domain/automations/cron.js";
import { DOT_PATH, isValidGlob } from "../../../domain/automations/templates.js";
import { SECRET_PLACEHOLDER, TEMPLATE_MAX_CHARS } from "../../../domain/automations/automations.js";
import { jsonValue, opaqueId, timestamp } from "../../schemas.js";

const repoRef = z
  .string()
  .trim()
  .min(1)
  .max(200)
  .regex(/^[A-Za-z0-9_.:-]+(\/[A-Za-z0-9_.-]+)?$/, "must be a repository id or owner/name")
  .describe("repo_id, or the repository's full name owner/name");

const taskTemplate = z
  .string()
  .max(TEMPLATE_MAX_CHARS)
  .refine((v) => v.trim() !== "", "must not be empty")
  .describe(
    "text of the task to create; {{dot.path}} is replaced by that value of the trigger data (payload.*, check.*, now, date)",
  );

const schedule = z
  .string()
  .trim()
  .min(1)
  .max(200)
  .superRefine((value, ctx) => {
    const problem = scheduleProblem(value);
    if (problem) ctx.addIssue({ code: "custom", message: problem });
  })
  .describe("five-field cron expression: minute hour day-of-month month day-of-week");

const timezone = z
  .string()
  .trim()
  .min(1)
  .max(100)
  .superRefine((value, ctx) => {
    const problem = timezoneProblem(value);
    if (problem) ctx.addIssue({ code: "custom", message: problem });
  })
  .describe("IANA time zone of the schedule");

const glob = z.string().trim().min(1).max(255).refine(isValidGlob, "is not a valid glob pattern");

export const cronConfig = z.strictObject({ schedule, timezone: timezone.default("UTC") });

export const webhookConfig = z.strictObject({
  match: z
    .record(z.string().max(200), jsonValue)
    .superRefine((match, ctx) => {
      const keys = Object.keys(match);
      if (keys.length > 50) ctx.addIssue({ code: "custom", message: "at most 50 entries" });
      for (const key of keys)
        if (!DOT_PATH.test(key))
          ctx.addIssue({
            code: "custom",
            path: [key],
            message: "must be a dot-path such as pull_request.base.ref",
          });
    })
    .default({})
    .describe(
      "dot-path of the payload → expected value; an array means any of its items; empty matches every payload",
    ),
  secret: z
    .string()
    .min(8)
    .max(256)
    .refine((v) => v !== SECRET_PLACEHOLDER, "send the secret itself, not the placeholder")
    .nullable()
    .optional()
    .describe(
      `HMAC-SHA256 key: only payloads signed X-Hub-Signature-256: sha256=<hex> match; shown as "${SECRET_PLACEHOLDER}"`,
    ),
});

export const ciFailureConfig = z.strictObject({
  workflow: glob
    .nullable()
    .optional()
    .describe("glob on the workflow name (the check name when there is no workflow)"),
  branch: glob.nullable().optional().describe("glob on the failing head branch"),
});

const common = {
  workspace_id: opaqueId
    .optional()
    .describe("the workspace of the repository; optional when only one workspace holds it"),
  repo_id: repoRef,
  task_template: taskTemplate,
  enabled: z.boolean().default(true),
  auto_approve: z.boolean().default(false).describe("tasks created pass both approval gates"),
};

/** An automation as written by POST, and by PATCH once laid over the current automation. */
export const automationBody = z.discriminatedUnion("trigger_type", [
  z.strictObject({ ...common, trigger_type: z.literal("cron"), trigger_config: cronConfig }),
  z.strictObject({ ...common, trigger_type: z.literal("webhook"), trigger_config: webhookConfig }),
  z.strictObject({
    ...common,
    trigger_type: z.literal("ci_failure"),
    trigger_config: ciFailureConfig,
  }),
]);

export const patchAutomationBody = z
  .strictObject({
    workspace_id: opaqueId.optional(),
    repo_id: repoRef.optional(),
    trigger_type: z.enum(AUTOMATION_TRIGGERS).optional(),
    trigger_config: z
      .record(z.string(), z.unknown())
      .optional()
      .describe("replaces the whole trigger_config"),
    task_template: z.string().optional(),
    enabled: z.boolean().optional(),
    auto_approve: z.boolean().optional(),
  })
  .describe("Any fields of the automation; the result is validated as a whole, like a POST body.");

export const automationParams = z.strictObject({ id: opaqueId });

export const automation = z
  .object({
    id: z.string(),
    repo_id: z.string(),
    workspace_id: z.string(),
    trigger_type: z.enum(AUTOMATION_TRIGGERS),
    trigger_config: z.record(z.string(), z.unknown()),
    task_template: z.string(),
    enabled: z.boolean(),
    auto_approve: z.boolean(),
    last_triggered_at: timestamp.nullable(),
    last_task_id: z.string().nullable(),
    last_refusal: z
      .object({
        at: timestamp,
        code: z.string().describe("monthly_limit_reached, not_found, empty_description, …"),
        reason: z.string(),
      })
      .nullable()
      .describe("the last firing that created no task, and why (extension)"),
    next_run_at: timestamp
      .nullable()
      .describe("cron: the next slot, null when disabled or not cron (extension)"),
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: "Automation" });

export const webhookPayload = z
  .unknown()
  .describe("any JSON payload; matched against every enabled webhook automation");

export const webhookResult = z
  .object({
    matched: z.number().int().describe("automations whose rules matched the payload"),
    tasks_created: z.array(z.string()).describe("ids of the tasks created"),
  })
  .meta({ id: "AutomationWebhookResult" });
