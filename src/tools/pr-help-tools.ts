import { z } from "zod";
import type { ToolSpec } from "../llm/types.js";
import { loadPrompt } from "../util/prompt-file.js";

/*
 * The finish tools of the pull-request helpers (docs/api.md, "Comment commands": `/describe`,
 * `/ask`, `/improve`) and the rules each one's model works under. Like `submit_review`, each
 * is called once and ends the conversation.
 */

const describeInput = z.strictObject({
  title: z.string().trim().min(1).max(200).describe("the pull request's new title, one line"),
  body: z
    .string()
    .trim()
    .min(1)
    .max(20_000)
    .describe("the pull request's new description, in GitHub Markdown"),
});
export type DescribeResult = z.infer<typeof describeInput>;

export const submitDescriptionTool: ToolSpec<DescribeResult> = {
  name: "submit_description",
  description:
    "Submit the pull request's title and description. Call once, with a one-line title and a Markdown description of what the change does and why.",
  input: describeInput,
};

const answerInput = z.strictObject({
  answer: z.string().trim().min(1).max(20_000).describe("the answer, in GitHub Markdown"),
});
export type AnswerResult = z.infer<typeof answerInput>;

export const submitAnswerTool: ToolSpec<AnswerResult> = {
  name: "submit_answer",
  description: "Submit the answer to the question. Call once, when you know the answer.",
  input: answerInput,
};

const suggestionsInput = z.strictObject({
  summary: z.string().trim().min(1).max(4000),
  suggestions: z
    .array(
      z.strictObject({
        path: z
          .string()
          .trim()
          .min(1)
          .max(500)
          .describe("repository-relative path of a file the diff changes"),
        start_line: z
          .number()
          .int()
          .min(1)
          .optional()
          .describe("first line replaced, in the new version; omit to replace one line"),
        line: z.number().int().min(1).describe("last line replaced, in the new version"),
        replacement: z
          .string()
          .max(8000)
          .describe("the exact new text of those lines (empty: delete them)"),
        explanation: z.string().trim().min(1).max(2000).describe("why, in one or two sentences"),
      }),
    )
    .max(30)
    .default([]),
});
export type SuggestionsResult = z.infer<typeof suggestionsInput>;
export type Suggestion = SuggestionsResult["suggestions"][number];

export const submitSuggestionsTool: ToolSpec<SuggestionsResult> = {
  name: "submit_suggestions",
  description:
    "Submit concrete code suggestions for the changed lines. Call once with a short summary and the suggestions: each replaces lines start_line..line of the new version of a file with `replacement`.",
  input: suggestionsInput,
};

/* The rules of each command's model call: prompt files beside this module (util/prompt-file.ts). */
export const PR_HELP_PROMPTS = {
  describe: loadPrompt(import.meta.url, "prompts/describe-rules.md"),
  ask: loadPrompt(import.meta.url, "prompts/ask-rules.md"),
  improve: loadPrompt(import.meta.url, "prompts/improve-rules.md"),
};
export const DESCRIBE_RULES = PR_HELP_PROMPTS.describe.fill();
export const ASK_RULES = PR_HELP_PROMPTS.ask.fill();
export const IMPROVE_RULES = PR_HELP_PROMPTS.improve.fill();
