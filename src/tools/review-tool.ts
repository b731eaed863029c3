import { z } from "zod";
import type { ToolSpec } from "../llm/types.js";
import { loadPrompt } from "../util/prompt-file.js";

/*
 * `submit_review` (docs/architecture.md, "Model tool protocol"): how the model answers in
 * REVIEWING and in `POST /tasks/review/`. The stored review and the API's answer have this
 * shape.
 */

export const REVIEW_VERDICTS = ["approve", "comment", "request_changes"] as const;
export const REVIEW_SEVERITIES = ["error", "warning", "info"] as const;

const reviewInput = z.strictObject({
  verdict: z.enum(REVIEW_VERDICTS),
  summary: z.string().trim().min(1).max(8000),
  comments: z
    .array(
      z.strictObject({
        path: z
          .string()
          .trim()
          .min(1)
          .max(500)
          .describe("repository-relative path of the file the comment is about"),
        line: z.number().int().min(1).describe("line number in the new version of the file"),
        body: z.string().trim().min(1).max(4000),
        severity: z.enum(REVIEW_SEVERITIES).default("info"),
      }),
    )
    .max(100)
    .default([]),
});

export type ReviewResult = z.infer<typeof reviewInput>;

export const submitReviewTool: ToolSpec<ReviewResult> = {
  name: "submit_review",
  description:
    "Submit the code review. Call once with a verdict (approve, comment or request_changes), a summary, and line comments on the changed code (path and line in the new version, severity error, warning or info).",
  input: reviewInput,
};

/** The rules of a code review (prompts/review-rules.md), shared by the task pipeline and pull-request reviews. */
export const REVIEW_RULES_PROMPT = loadPrompt(import.meta.url, "prompts/review-rules.md");
export const REVIEW_RULES = REVIEW_RULES_PROMPT.fill();
