import { z } from "zod";
import { pageFields } from "../../paging.js";
import { MEMORY_KINDS, TASK_PHASES, TASK_STATUSES } from "../../../domain/vocabulary.js";
import { REVIEW_SEVERITIES, REVIEW_VERDICTS } from "../../../tools/review-tool.js";
import { opaqueId, timestamp } from "../../schemas.js";

const repoRef = z
  .string()
  .trim()
  .min(1)
  .max(200)
  .regex(/^[A-Za-z0-9_.:-]+(\/[A-Za-z0-9_.-]+)?$/, "must be a repository id or owner/name")
  .describe("repo_id, or the repository's full name owner/name");

const handle = z
  .string()
  .trim()
  .min(1)
  .max(64)
  .regex(/^[a-z0-9]+(-[a-z0-9]+)*$/, "must be a kebab-case name");

export const createTaskBody = z.strictObject({
  workspace_id: opaqueId,
  repo_id: repoRef,
  description: z.string().trim().min(1).max(20_000),
  auto_approve: z.boolean().default(false),
  skill_name: handle.nullable().optional(),
  agent_name: handle.nullable().optional(),
  base_sha: z
    .string()
    .trim()
    .toLowerCase()
    .regex(/^[0-9a-f]{7,40}$/, "must be a commit id: 7 to 40 hexadecimal characters")
    .optional()
    .describe(
      "start from this commit (full or abbreviated id, reachable in the repository) instead of the branch's head (extension)",
    ),
});

export const listTasksQuery = z.strictObject({
  ...pageFields,
  before: opaqueId
    .optional()
    .describe("a task id: the page continues after it (older form of `cursor`)"),
  workspace_id: opaqueId.optional(),
  repo_id: repoRef.optional(),
  status: z.enum(TASK_STATUSES).optional(),
  phase: z.enum(TASK_PHASES).optional(),
});

export const taskParams = z.strictObject({ id: opaqueId });

export const planStep = z
  .object({
    step: z.number().int().min(1),
    title: z.string(),
    description: z.string(),
    files: z.array(z.string()),
  })
  .meta({ id: "PlanStep" });

export const revision = z
  .object({
    gate: z.enum(["plan", "diff"]),
    feedback: z.string(),
    by: z.string().describe("who gave the feedback"),
    at: timestamp,
    plan: z
      .array(planStep)
      .optional()
      .describe("the plan the round produced (plan gate), once it reached the gate again"),
    diff: z
      .string()
      .optional()
      .describe("the diff the round produced (diff gate), once it reached the gate again"),
  })
  .meta({ id: "Revision" });

const testIds = z
  .object({
    ids: z.array(z.string()).describe("test ids (the runner's own), the first 50"),
    count: z.number().int().describe("how many there are in all"),
  })
  .meta({ id: "TestIdList" });

export const evidence = z
  .object({
    base_commit: z
      .string()
      .nullable()
      .describe("the commit the tests were compared with; null: no results of the base"),
    commands: z
      .array(
        z.object({
          name: z.string(),
          command: z.string(),
          ok: z.boolean(),
          duration_ms: z.number().int(),
          pre_existing: z
            .boolean()
            .describe("failed the same way on the base commit: not the change's"),
        }),
      )
      .describe("the commands the last verification ran"),
    tests: z
      .object({
        total: z.number().int(),
        passed: z.number().int(),
        failed: z.number().int(),
        skipped: z.number().int(),
      })
      .nullable()
      .describe("summed over the checks read per test; null when none could be"),
    fixed: testIds.describe("red on the base commit, green now"),
    added: testIds.describe("tests the change adds or edits"),
    reproduced: testIds.describe("of the tests added or edited: red on the base commit, green now"),
    still_failing: testIds.describe("red on the base commit and now, the same way: not chased"),
    new_failures: testIds.describe(
      "green (or absent) on the base commit and red now, or red differently",
    ),
    fix_rounds: z.number().int(),
    cost: z.object({
      usd: z.number(),
      input_tokens: z.number().int(),
      output_tokens: z.number().int(),
    }),
    duration_ms: z
      .number()
      .int()
      .nullable()
      .describe(
        "from the task's start to its end (or to now while it runs); null before it started",
      ),
    command_ms: z
      .number()
      .int()
      .describe(
        "wall time of the task's finished sandboxed commands (setup, checks, the model's commands, the base commit's checks): what TASK_COMMAND_TIME_LIMIT_S bounds",
      ),
  })
  .meta({ id: "TaskEvidence" });

const checkTests = z
  .object({
    runner: z.string().optional().describe("the test runner read: node:test, vitest, pytest, …"),
    total: z.number().int(),
    passed: z.number().int(),
    failed: z.number().int(),
    skipped: z.number().int(),
    new_failures: z
      .array(z.string())
      .describe("failing now, passing (or absent) on the base or failing differently (first 50)"),
    fixed: z.array(z.string()).describe("failing on the base, passing now (first 50)"),
    still_failing: z
      .array(z.string())
      .describe("failing on the base and now the same way: named, not chased (first 50)"),
    added: z.array(z.string()).describe("tests not on the base (first 50)"),
    reproduced: z
      .array(z.string())
      .describe("tests the change adds or edits that fail on the base and pass now (first 50)"),
    new_failures_count: z.number().int().optional(),
    fixed_count: z.number().int().optional(),
    still_failing_count: z.number().int().optional(),
    added_count: z.number().int().optional(),
    reproduced_count: z.number().int().optional(),
  })
  .meta({ id: "CheckTests" });

export const task = z
  .object({
    id: z.string(),
    description: z.string(),
    status: z.enum(TASK_STATUSES),
    phase: z.enum(TASK_PHASES),
    created_at: timestamp,
    updated_at: timestamp,
    repo_id: z.string(),
    workspace_id: z.string(),
    pr_url: z.string().nullable(),
    error: z.string().nullable(),
    auto_approve: z.boolean(),
    skill_name: z.string().nullable(),
    agent_name: z.string().nullable(),
    plan: z.array(planStep).nullable(),
    plan_summary: z.string().nullable().describe("the model's summary of its plan (extension)"),
    plan_targets: z
      .array(z.string())
      .describe("test ids the plan says the change will make pass; they must pass (extension)"),
    diff: z.string().nullable(),
    review: z
      .object({
        verdict: z.enum(REVIEW_VERDICTS),
        summary: z.string(),
        comments: z.array(
          z.object({
            path: z.string(),
            line: z.number().int(),
            body: z.string(),
            severity: z.enum(REVIEW_SEVERITIES),
          }),
        ),
      })
      .nullable()
      .describe("the model's review of the diff (submit_review), null before REVIEWING"),
    branch: z.string().nullable().describe("the pushed branch, null until pushed"),
    depends_on: z.array(z.string()),
    cost: z.object({
      input_tokens: z.number().int().describe("all prompt tokens, cached or not"),
      output_tokens: z.number().int(),
      usd: z.number(),
      cached_input_tokens: z
        .number()
        .int()
        .describe("part of input_tokens read from the provider's prompt cache (billed lower)"),
      cache_write_tokens: z
        .number()
        .int()
        .describe("part of input_tokens written to the prompt cache (Anthropic bills 1.25×)"),
    }),
    checks: z
      .object({
        source: z.string().nullable().describe("where the checks came from"),
        fix_attempts: z.number().int(),
        results: z.array(
          z.object({
            name: z.string(),
            command: z.string(),
            ok: z.boolean(),
            duration_ms: z.number().int(),
            before: z
              .enum(["passed", "failed"])
              .nullable()
              .optional()
              .describe(
                "the same check on the unchanged code (the base commit), run when it failed after the change; null: not run there",
              ),
            pre_existing: z
              .boolean()
              .optional()
              .describe(
                "failed the same way before the change: it used no fix round and does not fail the task",
              ),
            tests: checkTests
              .nullable()
              .optional()
              .describe(
                "what the change did in this check, test by test; null: its output could not be read per test",
              ),
          }),
        ),
        base_commit: z
          .string()
          .nullable()
          .optional()
          .describe("the commit the results were compared with; null: no results of it"),
        targets: z
          .array(z.string())
          .optional()
          .describe("the plan's targets: test ids the change was to make pass"),
      })
      .nullable()
      .describe("the last verification run (extension)"),
    evidence: evidence
      .nullable()
      .describe("what the change did, as its pull request says it; null until verification ran"),
    memories_used: z
      .array(
        z.object({
          id: z.string(),
          kind: z.enum(MEMORY_KINDS),
          text: z.string(),
          source_task_id: z.string(),
          created_at: timestamp,
        }),
      )
      .describe("repository memory read into this task's prompts (extension)"),
    revisions: z
      .array(revision)
      .describe("feedback given at the gates, oldest first (extension; POST /tasks/{id}/revise)"),
    parent_task_id: z
      .string()
      .nullable()
      .describe("for a follow-up: the task it continues (extension; POST /tasks/{id}/follow-up)"),
    base_sha: z
      .string()
      .nullable()
      .describe(
        "the commit the task starts from: as requested until CLONING, then the full id cloned (extension)",
      ),
  })
  .meta({ id: "Task" });

const feedbackText = z.string().trim().min(1).max(10_000);

export const reviseTaskBody = z
  .strictObject({
    feedback: feedbackText.describe("what to change in the plan or the diff waiting at its gate"),
  })
  .meta({ id: "ReviseTaskBody" });

export const rejectBody = z
  .strictObject({
    reason: z
      .string()
      .trim()
      .min(1)
      .max(10_000)
      .optional()
      .describe("why: kept in the task's error and in the repository's memory"),
  })
  .optional()
  .meta({ id: "RejectBody" });

export const retryTaskBody = z
  .strictObject({
    feedback: feedbackText
      .optional()
      .describe("a hint for the restarted stage (e.g. what the fix rounds missed)"),
  })
  .optional()
  .meta({ id: "RetryTaskBody" });

export const followUpTaskBody = z
  .strictObject({
    description: z.string().trim().min(1).max(20_000).describe("what to change next"),
    auto_approve: z.boolean().default(false),
  })
  .meta({ id: "FollowUpTaskBody" });

export const reviewPullRequestBody = z.strictObject({
  pr_url: z
    .url()
    .max(2000)
    .describe("URL of a pull request of one of the account's GitHub repositories"),
  post: z
    .boolean()
    .default(false)
    .describe("post the review on the pull request (a GitHub pull-request review)"),
});

export const pullRequestReview = z
  .object({
    pr_url: z.string().describe("the pull request's canonical URL"),
    verdict: z.enum(REVIEW_VERDICTS),
    summary: z.string(),
    comments: z.array(
      z.object({
        path: z.string().describe("repository-relative path"),
        line: z.number().int().describe("line number in the new version of the file"),
        body: z.string(),
        severity: z.enum(REVIEW_SEVERITIES),
      }),
    ),
    posted: z.boolean(),
    review_url: z.string().nullable().describe("the posted review's URL; null unless posted"),
    cost: z
      .object({
        input_tokens: z.number().int(),
        output_tokens: z.number().int(),
        usd: z.number(),
      })
      .describe("tokens and price of the model calls of this review (extension)"),
  })
  .meta({ id: "PullRequestReview" });
