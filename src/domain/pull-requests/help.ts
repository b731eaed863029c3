import { z } from "zod";
import { errors } from "../../errors.js";
import { sanitizeUntrusted } from "../../text/sanitize.js";
import { holdsSecrets, looksBinary, mayHoldSecrets } from "../../indexer/skip.js";
import type { ExecutableTool } from "../../llm/types.js";
import {
  ASK_RULES,
  DESCRIBE_RULES,
  IMPROVE_RULES,
  submitAnswerTool,
  submitDescriptionTool,
  submitSuggestionsTool,
  type AnswerResult,
  type DescribeResult,
  type Suggestion,
  type SuggestionsResult,
} from "../../tools/pr-help-tools.js";
import { redactText } from "../../util/redact.js";
import {
  costView,
  cut,
  github,
  githubMessage,
  normalizePath,
  openPullRequest,
  reviewPullRequest,
  rightSideHunks,
  runPrModel,
  statusOf,
  timeout,
  type OpenedPullRequest,
  type PrReviewDeps,
  type PrReviewView,
} from "./review.js";
import { claimQuota } from "../accounts/quota.js";

/*
 * Help in a pull request besides the review (docs/api.md, "Comment commands"): `/describe`
 * writes the title and description from the diff, `/ask` answers a question about the pull
 * request or its repository (reading files at the head commit, changing nothing), `/improve`
 * posts code suggestions as GitHub suggestion blocks. Each checks ownership like the review,
 * then counts one task of the account's monthly allowance (given back when it fails).
 */

const MAX_DIFF_CHARS = 60_000;
const MAX_DESCRIPTION_CHARS = 8_000;
const MAX_QUESTION_CHARS = 4_000;
/** One answer is expected; the spare steps absorb reminders and argument corrections. */
const ONE_ANSWER_STEPS = 4;
/** `/ask` may read files first. */
const ASK_STEPS = 12;
const MAX_READ_LINES = 400;
const MAX_LIST_ENTRIES = 300;
const MAX_REVIEW_BODY_CHARS = 60_000;

export interface PrHelpInput {
  pr_url: string;
}

export type PrCost = PrReviewView["cost"];

/**
 * Runs `work` with one task of the account's monthly allowance claimed (429
 * `monthly_limit_reached` when none is left); the claim is given back when `work` fails.
 */
async function counted<T>(deps: PrReviewDeps, accountId: string, work: () => Promise<T>) {
  const claim = await claimQuota(deps.models, accountId);
  try {
    return await work();
  } catch (error) {
    await claim.release().catch(() => undefined);
    throw error;
  }
}

/** The title, description and diff as the model sees them: hidden text removed, cut. */
function pullRequestText(opened: OpenedPullRequest): string {
  const { pr, diff } = opened;
  const body = sanitizeUntrusted(pr.body);
  const shown = cut(diff, MAX_DIFF_CHARS, "diff");
  const cutNote =
    shown.length < diff.length
      ? `\nThe diff was cut: only its first ${shown.length} of ${diff.length} characters are shown.`
      : "";
  return `Pull request #${opened.number} of ${opened.fullName} merges ${pr.headRef} (${pr.headSha}) into ${pr.baseRef}.

<pull-request-title>
${sanitizeUntrusted(pr.title)}
</pull-request-title>

<pull-request-description>
${body ? cut(body, MAX_DESCRIPTION_CHARS, "description") : "(no description)"}
</pull-request-description>

<diff>
${shown || "(the diff is empty)"}
</diff>
${cutNote}`;
}

// --- automatic review ----------------------------------------------------------------------

/**
 * The review of `POST /tasks/review/`, posted, for a pull request opened or marked ready
 * in a repository whose config asks for it; counted as one task of the allowance.
 */
export async function autoReviewPullRequest(
  deps: PrReviewDeps,
  accountId: string,
  input: PrHelpInput,
): Promise<PrReviewView> {
  return counted(deps, accountId, () =>
    reviewPullRequest(deps, accountId, { pr_url: input.pr_url, post: true }),
  );
}

// --- /describe -----------------------------------------------------------------------------

export interface PrDescriptionView {
  pr_url: string;
  title: string;
  body: string;
  cost: PrCost;
}

export const DESCRIBE_FOOTER = "_Title and description written from the diff by `/describe`._";

/** Writes the pull request's title and description from its diff (PATCH on GitHub). */
export async function describePullRequest(
  deps: PrReviewDeps,
  accountId: string,
  input: PrHelpInput,
): Promise<PrDescriptionView> {
  const opened = await openPullRequest(deps, accountId, input.pr_url);
  return counted(deps, accountId, async () => {
    const { input: result, usage } = await runPrModel<DescribeResult>(deps, opened.model, {
      system: DESCRIBE_RULES,
      prompt: redactText(
        `${pullRequestText(opened)}\nWrite this pull request's title and description. Call submit_description.`,
      ),
      finishTool: submitDescriptionTool,
      maxSteps: ONE_ANSWER_STEPS,
      what: "description",
    });
    const title = redactText(result.title).replace(/\s+/g, " ").trim().slice(0, 256);
    const body = `${redactText(result.body)}\n\n${DESCRIBE_FOOTER}`;
    await github("updating the pull request", () =>
      opened.octokit.rest.pulls.update({
        ...opened.target,
        title,
        body,
        request: { signal: timeout() },
      }),
    );
    deps.logger?.info(
      { pr: `${opened.fullName}#${opened.number}`, usd: usage.usd },
      "pull request described",
    );
    return { pr_url: opened.pr.url, title, body, cost: costView(usage) };
  });
}

// --- /ask ----------------------------------------------------------------------------------

export interface PrAnswerView {
  pr_url: string;
  answer: string;
  cost: PrCost;
}

/** Answers a question about the pull request or its repository; changes nothing. */
export async function askAboutPullRequest(
  deps: PrReviewDeps,
  accountId: string,
  input: PrHelpInput & { question: string },
): Promise<PrAnswerView> {
  const question = sanitizeUntrusted(input.question).slice(0, MAX_QUESTION_CHARS);
  if (!question) throw errors.validation([{ path: "question", message: "must not be empty" }]);
  const opened = await openPullRequest(deps, accountId, input.pr_url);
  return counted(deps, accountId, async () => {
    const { input: result, usage } = await runPrModel<AnswerResult>(deps, opened.model, {
      system: ASK_RULES,
      prompt: redactText(
        `${pullRequestText(opened)}\n<question>\n${question}\n</question>\n\nAnswer the question. Files are read at the head commit ${opened.pr.headSha}. Call submit_answer.`,
      ),
      tools: headReadTools(opened),
      finishTool: submitAnswerTool,
      maxSteps: ASK_STEPS,
      what: "answer",
    });
    deps.logger?.info(
      { pr: `${opened.fullName}#${opened.number}`, usd: usage.usd },
      "question about a pull request answered",
    );
    return { pr_url: opened.pr.url, answer: redactText(result.answer), cost: costView(usage) };
  });
}

const readFileInput = z.strictObject({
  path: z.string().min(1).max(1000).describe("file path relative to the repository root"),
  start_line: z.number().int().min(1).optional().describe("first line to show (1-based)"),
  end_line: z.number().int().min(1).optional().describe("last line to show (inclusive)"),
});
const listFilesInput = z.strictObject({
  path: z
    .string()
    .max(1000)
    .optional()
    .describe("directory relative to the repository root; omit for the root"),
});

/** A repository path the model gave, or null when it tries to leave the repository. */
function repoPath(raw: string): string | null {
  const parts = raw
    .trim()
    .replace(/^\.?\/+/, "")
    .split("/")
    .filter(Boolean);
  if (parts.some((p) => p === ".." || p === ".")) return null;
  return parts.join("/");
}

/**
 * Read-only tools over the repository at the pull request's head commit, through GitHub's
 * contents API: nothing is cloned, and files that may hold credentials are not shown.
 */
function headReadTools(opened: OpenedPullRequest): ExecutableTool[] {
  const { octokit, target, pr } = opened;
  const contents = (path: string) =>
    octokit.rest.repos.getContent({
      owner: target.owner,
      repo: target.repo,
      path,
      ref: pr.headSha,
      request: { signal: timeout() },
    });
  const failure = (error: unknown, path: string): string => {
    const status = statusOf(error);
    if (status === 404) return `Error: no '${path}' at the head commit.`;
    throw errors.upstream(
      `GitHub answered ${status ?? "nothing"} when reading ${path}: ${githubMessage(error)}`,
    );
  };

  const readFile: ExecutableTool<z.infer<typeof readFileInput>> = {
    name: "read_file",
    description: `Read a text file of the repository at the pull request's head commit, with line numbers; at most ${MAX_READ_LINES} lines per call (use start_line and end_line).`,
    input: readFileInput,
    async execute({ path: raw, start_line: start = 1, end_line: end }) {
      const path = repoPath(raw);
      if (!path) return "Error: give a path inside the repository.";
      if (mayHoldSecrets(path)) return `Error: ${path} may hold credentials, so it is not shown.`;
      let data: Awaited<ReturnType<typeof contents>>["data"];
      try {
        ({ data } = await contents(path));
      } catch (error) {
        return failure(error, path);
      }
      if (Array.isArray(data)) return `Error: '${path}' is a directory; use list_files.`;
      if (data.type !== "file" || !("content" in data))
        return `Error: '${path}' is not a regular file.`;
      const bytes = Buffer.from(data.content, "base64");
      if (data.size > 0 && bytes.length === 0)
        return `Error: '${path}' is too large to read through the API.`;
      if (looksBinary(bytes)) return `Error: '${path}' is a binary file.`;
      if (holdsSecrets(bytes)) return `Error: ${path} appears to hold credentials; not shown.`;
      const lines = bytes.toString("utf8").split("\n");
      const last = Math.min(
        lines.length,
        end ?? start + MAX_READ_LINES - 1,
        start + MAX_READ_LINES - 1,
      );
      if (start > lines.length) return `Error: '${path}' has only ${lines.length} lines.`;
      const shown = lines.slice(start - 1, last).map((l, i) => `${start + i}: ${l}`);
      const more = last < lines.length ? `\n… ${lines.length - last} more lines` : "";
      return `${path} (lines ${start}-${last} of ${lines.length})\n${shown.join("\n")}${more}`;
    },
  };

  const listFiles: ExecutableTool<z.infer<typeof listFilesInput>> = {
    name: "list_files",
    description:
      "List a directory of the repository at the pull request's head commit (files and subdirectories, one per line, directories ending in /).",
    input: listFilesInput,
    async execute({ path: raw = "" }) {
      const path = repoPath(raw);
      if (path === null) return "Error: give a path inside the repository.";
      let data: Awaited<ReturnType<typeof contents>>["data"];
      try {
        ({ data } = await contents(path));
      } catch (error) {
        return failure(error, path || "the root");
      }
      if (!Array.isArray(data)) return `Error: '${path}' is a file; use read_file.`;
      const entries = data
        .slice(0, MAX_LIST_ENTRIES)
        .map((e) => `${e.path}${e.type === "dir" ? "/" : ""}`);
      if (data.length > entries.length) entries.push(`… ${data.length - entries.length} more`);
      return entries.join("\n") || "(empty directory)";
    },
  };
  return [listFiles, readFile] as ExecutableTool[];
}

// --- /improve ------------------------------------------------------------------------------

export interface PrSuggestionsView {
  pr_url: string;
  summary: string;
  /** Suggestions posted inline, as suggestion blocks. */
  suggestions: Suggestion[];
  /** Suggestions on lines GitHub would not accept (outside the diff's hunks): not posted inline. */
  skipped: Suggestion[];
  review_url: string | null;
  cost: PrCost;
}

/**
 * Posts concrete suggestions as one pull-request review (`COMMENT`) whose inline comments
 * hold ```suggestion blocks, each on lines of one hunk of the diff's new side. Suggestions
 * elsewhere are listed in the review's body; with none at all nothing is posted.
 */
export async function improvePullRequest(
  deps: PrReviewDeps,
  accountId: string,
  input: PrHelpInput,
): Promise<PrSuggestionsView> {
  const opened = await openPullRequest(deps, accountId, input.pr_url);
  return counted(deps, accountId, async () => {
    const { input: result, usage } = await runPrModel<SuggestionsResult>(deps, opened.model, {
      system: IMPROVE_RULES,
      prompt: redactText(
        `${pullRequestText(opened)}\nSuggest improvements to the changed lines. Call submit_suggestions.`,
      ),
      finishTool: submitSuggestionsTool,
      maxSteps: ONE_ANSWER_STEPS,
      what: "list of suggestions",
    });
    const { placed, skipped } = placeSuggestions(result.suggestions, opened.diff);
    const view: PrSuggestionsView = {
      pr_url: opened.pr.url,
      summary: redactText(result.summary),
      suggestions: placed,
      skipped,
      review_url: null,
      cost: costView(usage),
    };
    if (placed.length > 0 || skipped.length > 0) {
      view.review_url = await postSuggestions(opened, view);
    }
    deps.logger?.info(
      {
        pr: `${opened.fullName}#${opened.number}`,
        suggestions: placed.length,
        skipped: skipped.length,
        usd: usage.usd,
      },
      "pull request suggestions posted",
    );
    return view;
  });
}

/** Splits the suggestions into those GitHub accepts inline (one hunk's new side) and the rest. */
export function placeSuggestions(
  suggestions: Suggestion[],
  diff: string,
): { placed: Suggestion[]; skipped: Suggestion[] } {
  const hunks = rightSideHunks(diff);
  const placed: Suggestion[] = [];
  const skipped: Suggestion[] = [];
  for (const raw of suggestions) {
    const s: Suggestion = {
      ...raw,
      path: normalizePath(raw.path),
      replacement: redactText(raw.replacement),
      explanation: redactText(raw.explanation),
    };
    if (s.start_line === s.line) delete s.start_line;
    const first = s.start_line ?? s.line;
    const fits =
      first <= s.line &&
      (hunks.get(s.path) ?? []).some(([start, end]) => first >= start && s.line <= end);
    (fits ? placed : skipped).push(s);
  }
  return { placed, skipped };
}

/** A suggestion block whose fence is longer than any backtick run in the replacement. */
export function suggestionBlock(replacement: string): string {
  const longest = Math.max(2, ...[...replacement.matchAll(/`+/g)].map((m) => m[0].length));
  const fence = "`".repeat(longest + 1);
  const text = replacement.replace(/\n$/, "");
  return `${fence}suggestion\n${text}${text ? "\n" : ""}${fence}`;
}

async function postSuggestions(
  opened: OpenedPullRequest,
  view: PrSuggestionsView,
): Promise<string | null> {
  const parts = [view.summary];
  if (view.skipped.length > 0) {
    parts.push(
      "**Suggestions on lines outside the diff** (not applicable with one click)\n\n" +
        view.skipped
          .map(
            (s) =>
              `- \`${s.path}\` line${s.start_line ? `s ${s.start_line}-${s.line}` : ` ${s.line}`}: ${s.explanation}`,
          )
          .join("\n"),
    );
  }
  const body = parts.join("\n\n").slice(0, MAX_REVIEW_BODY_CHARS);
  const created = await github("posting the suggestions", () =>
    opened.octokit.rest.pulls.createReview({
      ...opened.target,
      commit_id: opened.pr.headSha,
      event: "COMMENT",
      body,
      comments: view.suggestions.map((s) => ({
        path: s.path,
        line: s.line,
        side: "RIGHT" as const,
        ...(s.start_line ? { start_line: s.start_line, start_side: "RIGHT" as const } : {}),
        body: `${s.explanation}\n\n${suggestionBlock(s.replacement)}`,
      })),
      request: { signal: timeout() },
    }),
  );
  return created.data.html_url ?? null;
}
