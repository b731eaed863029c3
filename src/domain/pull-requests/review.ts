import type { Config } from "../../config/env.js";
import type { Models, RepositoryDoc } from "../../db/models.js";
import { errors, isAppError } from "../../errors.js";
import type { GithubClient, InstallationOctokit } from "../../github-api/client.js";
import { LlmError, LlmNotConfiguredError, LlmProtocolError } from "../../llm/errors.js";
import type { ModelClient } from "../../llm/provider.js";
import { runToolLoop } from "../../llm/tool-loop.js";
import type { ExecutableTool, PricedUsage, ToolSpec } from "../../llm/types.js";
import { REVIEW_RULES, submitReviewTool, type ReviewResult } from "../../tools/review-tool.js";
import { sanitizeUntrusted } from "../../text/sanitize.js";
import type { Logger } from "../../util/logger.js";
import { redactText, registerSecret } from "../../util/redact.js";
import type { WorkspaceRecord } from "../workspaces/workspaces.js";

/*
 * `POST /tasks/review/` (docs/api.md, "POST /tasks/review/"): an AI review of an existing pull
 * request of one of the caller's GitHub workspaces, optionally posted back as a pull-request
 * review. No task is created; the only URLs fetched are the GitHub API's, for a repository the
 * account owns.
 */

export interface PrReviewDeps {
  config: Config;
  models: Models;
  logger?: Logger | undefined;
  /** The App's clients; `configured: false` without an App (reviews then answer 503). */
  githubClient: GithubClient;
  /** The configured model, or the "missing" client that explains what to set. */
  modelClient: ModelClient;
}

export interface PrReviewInput {
  pr_url: string;
  post: boolean;
}

export type ReviewComment = ReviewResult["comments"][number];

export interface PrReviewView {
  pr_url: string;
  verdict: ReviewResult["verdict"];
  summary: string;
  comments: ReviewComment[];
  posted: boolean;
  review_url: string | null;
  cost: { input_tokens: number; output_tokens: number; usd: number };
}

/** The model sees at most this much of the diff; the rest is cut, and it is told so. */
const MAX_DIFF_CHARS = 60_000;
const MAX_DESCRIPTION_CHARS = 8_000;
/** One answer is expected; the spare steps absorb reminders and argument corrections. */
const MAX_STEPS = 4;
/** GitHub refuses review bodies over 65,536 characters. */
const MAX_REVIEW_BODY_CHARS = 60_000;
const GITHUB_TIMEOUT_MS = 30_000;

const GITHUB_APP_MISSING =
  "The GitHub App is not configured on this server, so pull requests cannot be read: set APP_ID, PRIVATE_KEY (or PRIVATE_KEY_PATH) and WEBHOOK_SECRET.";

interface PullRef {
  owner: string;
  repo: string;
  number: number;
}

/** A pull request of one of the account's repositories, read through the App's installation. */
export interface OpenedPullRequest {
  /** The repository's full name as the workspace holds it. */
  fullName: string;
  number: number;
  octokit: InstallationOctokit;
  target: { owner: string; repo: string; pull_number: number };
  pr: {
    /** Title and description as GitHub has them (untrusted: see `sanitizeUntrusted`). */
    title: string;
    body: string;
    headSha: string;
    headRef: string;
    baseRef: string;
    url: string;
  };
  /** The unified diff, as GitHub answers it with the diff media type. */
  diff: string;
  model: ModelClient;
}

/**
 * Checks ownership (404 for a repository of no workspace of the account, before anything
 * else), that the App and a model are configured, then reads the pull request and its
 * diff. Shared by the review and the other pull-request helpers (help.ts).
 */
export async function openPullRequest(
  deps: PrReviewDeps,
  accountId: string,
  prUrl: string,
): Promise<OpenedPullRequest> {
  const { webUrl } = deps.githubClient;
  const ref = parsePullRequestUrl(prUrl, webUrl);
  // Ownership is decided before anything is configured or fetched, so a foreign or unknown
  // repository answers the same 404 on every server.
  const { repo, installationId } = await findRepository(deps.models, accountId, ref);
  if (!deps.githubClient.configured) throw errors.upstream(GITHUB_APP_MISSING, 503);
  const model = deps.modelClient;
  if (!model.configured) {
    throw errors.upstream(model.reason, 503);
  }

  const owner = repo.full_name.split("/")[0] ?? ref.owner;
  const name = repo.full_name.split("/").slice(1).join("/") || ref.repo;
  const target = { owner, repo: name, pull_number: ref.number };
  const octokit = await installationClient(deps.githubClient, installationId);
  const [pull, diff] = await Promise.all([
    github("reading the pull request", () =>
      octokit.rest.pulls.get({ ...target, request: { signal: timeout() } }),
    ),
    github("reading the pull request's diff", () =>
      octokit.rest.pulls.get({
        ...target,
        mediaType: { format: "diff" },
        request: { signal: timeout() },
      }),
    ),
  ]);
  // With the diff media type GitHub answers text, whatever the JSON-shaped typings say.
  const diffText: unknown = diff.data;
  if (typeof diffText !== "string") {
    throw errors.upstream("GitHub did not answer the pull request's diff as text.");
  }
  return {
    fullName: repo.full_name,
    number: ref.number,
    octokit,
    target,
    pr: {
      title: pull.data.title,
      body: pull.data.body ?? "",
      headSha: pull.data.head.sha,
      headRef: pull.data.head.ref,
      baseRef: pull.data.base.ref,
      url: pull.data.html_url || `${webUrl}/${repo.full_name}/pull/${ref.number}`,
    },
    diff: diffText,
    model,
  };
}

/** What `runPrModel` needs besides the deps. */
export interface PrModelCall<F> {
  system: string;
  prompt: string;
  tools?: ExecutableTool[];
  finishTool: ToolSpec<F>;
  maxSteps: number;
  /** "review", "description", …: named in the errors. */
  what: string;
}

/**
 * One model conversation about a pull request, stopped when its cost reaches
 * MAX_TASK_COST_USD; model-layer failures become readable 502/503 errors.
 */
export async function runPrModel<F>(
  deps: Pick<PrReviewDeps, "config">,
  model: ModelClient,
  call: PrModelCall<F>,
): Promise<{ input: F; usage: PricedUsage }> {
  const limit = deps.config.llm.maxTaskCostUsd;
  let spentUsd = 0;
  try {
    const result = await runToolLoop({
      client: model,
      system: call.system,
      prompt: call.prompt,
      tools: call.tools ?? [],
      finishTools: [call.finishTool],
      maxSteps: call.maxSteps,
      async onUsage(step) {
        spentUsd += step.usd;
        if (spentUsd >= limit) {
          throw errors.upstream(
            `The ${call.what}'s model cost reached $${spentUsd.toFixed(4)} of the $${limit.toFixed(2)} limit (MAX_TASK_COST_USD) before the model submitted its ${call.what}. Raise MAX_TASK_COST_USD or try a smaller pull request.`,
          );
        }
      },
    });
    return { input: result.input, usage: result.usage };
  } catch (error) {
    throw modelFailure(error, call.what);
  }
}

/** The `cost` of an answer: tokens and price of the model calls. */
export function costView(usage: PricedUsage): PrReviewView["cost"] {
  return {
    input_tokens: usage.inputTokens,
    output_tokens: usage.outputTokens,
    usd: Number(usage.usd.toFixed(6)),
  };
}

/** Reviews the pull request at `input.pr_url`; see docs/api.md for every answer it gives. */
export async function reviewPullRequest(
  deps: PrReviewDeps,
  accountId: string,
  input: PrReviewInput,
): Promise<PrReviewView> {
  const {
    fullName,
    number,
    octokit,
    target,
    pr,
    diff: diffText,
    model,
  } = await openPullRequest(deps, accountId, input.pr_url);
  const { input: review, usage } = await runPrModel<ReviewResult>(deps, model, {
    system: REVIEW_RULES,
    prompt: reviewPrompt(fullName, number, pr, diffText),
    finishTool: submitReviewTool,
    maxSteps: MAX_STEPS,
    what: "review",
  });

  const view: PrReviewView = {
    pr_url: pr.url,
    verdict: review.verdict,
    // The model saw only redacted text; scrubbing its answer too costs nothing.
    summary: redactText(review.summary),
    comments: review.comments.map((c) => ({
      ...c,
      path: normalizePath(c.path),
      body: redactText(c.body),
    })),
    posted: false,
    review_url: null,
    cost: costView(usage),
  };
  if (input.post) {
    view.review_url = await postReview(octokit, target, pr.headSha, view, diffText);
    view.posted = true;
  }
  deps.logger?.info(
    {
      pr: `${fullName}#${number}`,
      verdict: view.verdict,
      comments: view.comments.length,
      posted: view.posted,
      usd: view.cost.usd,
    },
    "pull request reviewed",
  );
  return view;
}

/**
 * `<webUrl>/<owner>/<repo>/pull/<number>`, optionally with `/files` or a trailing slash.
 * A query or fragment (`?w=1`, `#discussion_r…`, what browsers add) is ignored: only the
 * owner, repository and number are used, always against the configured GitHub API.
 */
function parsePullRequestUrl(raw: string, webUrl: string): PullRef {
  const base = new URL(webUrl);
  const invalid = () =>
    errors.validation([
      {
        path: "body.pr_url",
        message: `must be a pull request URL of the form ${base.origin}${base.pathname.replace(/\/+$/, "")}/<owner>/<repo>/pull/<number>`,
      },
    ]);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw invalid();
  }
  if (url.origin !== base.origin || url.username || url.password) throw invalid();
  const prefix = base.pathname.replace(/\/+$/, "");
  if (!url.pathname.startsWith(`${prefix}/`)) throw invalid();
  const match =
    /^\/([A-Za-z0-9][A-Za-z0-9_-]{0,99})\/([A-Za-z0-9._-]{1,100})\/pull\/([1-9][0-9]{0,9})(?:\/files)?\/?$/.exec(
      url.pathname.slice(prefix.length),
    );
  if (!match || match[2] === "." || match[2] === "..") throw invalid();
  return { owner: match[1]!, repo: match[2]!, number: Number(match[3]) };
}

/** The account's GitHub repository with this full name (case-insensitive), or 404. */
async function findRepository(
  models: Models,
  accountId: string,
  ref: PullRef,
): Promise<{ repo: RepositoryDoc; installationId: number }> {
  const fullName = `${ref.owner}/${ref.repo}`.toLowerCase();
  const workspaces = (await models.Workspace.find({
    account_id: accountId,
    kind: "github",
    "github.deleted_at": null,
  })
    .sort({ created_at: -1 })
    .lean()) as WorkspaceRecord[];
  const matches: Array<{ repo: RepositoryDoc; installationId: number; suspended: boolean }> = [];
  for (const ws of workspaces) {
    const installationId = ws.github?.installation_id;
    if (installationId == null) continue;
    const repo = ws.repos.find((r) => r.full_name.toLowerCase() === fullName);
    if (repo) matches.push({ repo, installationId, suspended: Boolean(ws.github?.suspended_at) });
  }
  const usable = matches.find((m) => !m.suspended);
  if (usable) return usable;
  if (matches[0]) {
    throw errors.invalidState(
      `The GitHub App installation for ${matches[0].repo.full_name} is suspended; unsuspend it in the installation's settings on GitHub.`,
    );
  }
  throw errors.notFound("pull request");
}

async function installationClient(
  client: GithubClient,
  installationId: number,
): Promise<InstallationOctokit> {
  try {
    const octokit = await client.octokit(installationId);
    // Fetching the token up front registers it for redaction before any text could carry
    // it, and keeps a token failure apart from a missing pull request.
    const { token } = (await octokit.auth({ type: "installation" })) as { token: string };
    registerSecret(token);
    return octokit;
  } catch (error) {
    const status = statusOf(error);
    throw errors.upstream(
      status === undefined
        ? `GitHub could not be reached for an installation token: ${githubMessage(error)}`
        : `GitHub did not issue a token for the App's installation (${status}): ${githubMessage(error)}. The App may have been uninstalled or lost access to the repository.`,
    );
  }
}

/** Runs one GitHub call; a 404 is the caller's missing pull request, the rest are 502. */
export async function github<T>(what: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    const status = statusOf(error);
    if (status === 404 || status === 410) throw errors.notFound("pull request");
    throw errors.upstream(
      status === undefined
        ? `GitHub could not be reached when ${what}: ${githubMessage(error)}`
        : `GitHub answered ${status} when ${what}: ${githubMessage(error)}`,
    );
  }
}

export function timeout(): AbortSignal {
  return AbortSignal.timeout(GITHUB_TIMEOUT_MS);
}

export function statusOf(error: unknown): number | undefined {
  const status = (error as { status?: unknown } | null)?.status;
  return typeof status === "number" ? status : undefined;
}

/** GitHub's own explanation of a failure, short and without secrets. */
export function githubMessage(error: unknown): string {
  const data = (error as { response?: { data?: unknown } } | null)?.response?.data as
    { message?: unknown; errors?: unknown } | undefined;
  const details = Array.isArray(data?.errors)
    ? data.errors
        .map((e) => (typeof e === "string" ? e : (e as { message?: unknown })?.message))
        .filter((m): m is string => typeof m === "string")
    : [];
  const message =
    typeof data?.message === "string"
      ? data.message
      : error instanceof Error
        ? error.message
        : String(error);
  const text = details.length ? `${message} (${details.join("; ")})` : message;
  return redactText(text).replace(/\s+/g, " ").trim().slice(0, 300);
}

/**
 * Model-layer failures as readable API errors: never a 500 for what the model or its
 * provider did. Anything else is ours and is passed on unchanged.
 */
function modelFailure(error: unknown, what: string): unknown {
  if (isAppError(error)) return error;
  if (error instanceof LlmNotConfiguredError) return errors.upstream(error.message, 503);
  if (error instanceof LlmProtocolError) {
    return errors.upstream(redactText(`The model did not deliver a ${what}: ${error.message}`));
  }
  if (error instanceof LlmError) {
    return errors.upstream(redactText(`The model provider failed: ${error.message}`));
  }
  return error;
}

function reviewPrompt(
  fullName: string,
  number: number,
  pr: { title: string; body: string; headSha: string; headRef: string; baseRef: string },
  diff: string,
): string {
  const body = sanitizeUntrusted(pr.body);
  const description = body ? cut(body, MAX_DESCRIPTION_CHARS, "description") : "(no description)";
  const shown = cut(diff, MAX_DIFF_CHARS, "diff");
  const cutNote =
    shown.length < diff.length
      ? `\nThe diff was cut: only its first ${shown.length} of ${diff.length} characters are shown. Review what is shown and say in the summary that the rest was not reviewed.`
      : "";
  return redactText(`Review pull request #${number} of ${fullName}, which merges ${pr.headRef} (${pr.headSha}) into ${pr.baseRef}.

<pull-request-title>
${sanitizeUntrusted(pr.title)}
</pull-request-title>

<pull-request-description>
${description}
</pull-request-description>

<diff>
${shown || "(the diff is empty)"}
</diff>
${cutNote}
Line numbers in your comments are those of the new version of each file (the "+" side of the hunk headers). Call submit_review.`);
}

/** The first `max` characters of `text`, ending at a line break where one is near. */
export function cut(text: string, max: number, what: string): string {
  if (text.length <= max) return text;
  const head = text.slice(0, max);
  const lastBreak = head.lastIndexOf("\n");
  const kept = lastBreak > max * 0.8 ? head.slice(0, lastBreak + 1) : head;
  return what === "diff" ? kept : `${kept}\n[… the ${what} was cut here]`;
}

/** Models sometimes write `./src/a.ts` or `/src/a.ts` for the repository path `src/a.ts`. */
export function normalizePath(path: string): string {
  return path.replace(/^(\.\/|\/)+/, "");
}

/**
 * Lines a review comment may be attached to, per file of a unified diff: the new side's
 * added and context lines (GitHub answers 422 for any other line).
 */
export function commentableLines(diff: string): Map<string, Set<number>> {
  return parseDiff(diff).lines;
}

/**
 * The new side's hunks per file, as inclusive line ranges. A multi-line comment (from
 * `start_line` to `line`) must lie within one of them, or GitHub refuses the review.
 */
export function rightSideHunks(diff: string): Map<string, Array<[number, number]>> {
  return parseDiff(diff).hunks;
}

function parseDiff(diff: string): {
  lines: Map<string, Set<number>>;
  hunks: Map<string, Array<[number, number]>>;
} {
  const files = new Map<string, Set<number>>();
  const hunks = new Map<string, Array<[number, number]>>();
  let current: Set<number> | undefined;
  let currentPath: string | undefined;
  let newLine = 0;
  let oldLeft = 0;
  let newLeft = 0;
  for (const line of diff.split("\n")) {
    if (oldLeft > 0 || newLeft > 0) {
      // Inside a hunk the counts of its header decide, so a removed line that starts with
      // "-- " is never taken for a file header.
      if (line.startsWith("+")) {
        current?.add(newLine++);
        newLeft--;
      } else if (line.startsWith("-")) {
        oldLeft--;
      } else if (line.startsWith(" ") || line === "") {
        current?.add(newLine++);
        oldLeft--;
        newLeft--;
      } else if (!line.startsWith("\\")) {
        oldLeft = newLeft = 0; // a malformed hunk: stop counting it
      }
      continue;
    }
    if (line.startsWith("diff --git ")) {
      current = undefined;
      currentPath = undefined;
    } else if (line.startsWith("+++ ")) {
      const path = diffPath(line.slice(4));
      if (path === undefined) {
        current = undefined; // a deleted file has no new side
        currentPath = undefined;
      } else {
        current = files.get(path) ?? new Set<number>();
        files.set(path, current);
        currentPath = path;
      }
    } else if (line.startsWith("@@")) {
      const header = /^@@ -\d+(?:,(\d+))? \+(\d+)(?:,(\d+))? @@/.exec(line);
      if (!header) continue;
      oldLeft = header[1] === undefined ? 1 : Number(header[1]);
      newLine = Number(header[2]);
      newLeft = header[3] === undefined ? 1 : Number(header[3]);
      if (currentPath !== undefined && newLeft > 0) {
        const ranges = hunks.get(currentPath) ?? [];
        ranges.push([newLine, newLine + newLeft - 1]);
        hunks.set(currentPath, ranges);
      }
    }
  }
  return { lines: files, hunks };
}

/** The path of a `+++` line: `b/src/a.ts`, a C-quoted `"b/caf\303\251.ts"`, or /dev/null. */
function diffPath(raw: string): string | undefined {
  let text = raw.replace(/\t$/, "");
  if (text.startsWith('"') && text.endsWith('"') && text.length >= 2) text = unquote(text);
  if (text === "/dev/null") return undefined;
  return text.startsWith("b/") ? text.slice(2) : text;
}

/** git's C-style quoting of unusual file names (octal bytes, \t, \n, \", \\). */
function unquote(quoted: string): string {
  const bytes: number[] = [];
  const body = quoted.slice(1, -1);
  const simple: Record<string, string> = {
    a: "\x07",
    b: "\b",
    f: "\f",
    n: "\n",
    r: "\r",
    t: "\t",
    v: "\v",
    '"': '"',
    "\\": "\\",
  };
  for (let i = 0; i < body.length; i++) {
    const ch = body[i]!;
    if (ch !== "\\") {
      bytes.push(...Buffer.from(ch, "utf8"));
      continue;
    }
    const next = body[i + 1] ?? "";
    if (/[0-7]/.test(next)) {
      bytes.push(parseInt(body.slice(i + 1, i + 4), 8));
      i += 3;
    } else {
      bytes.push(...Buffer.from(simple[next] ?? next, "utf8"));
      i += 1;
    }
  }
  return Buffer.from(bytes).toString("utf8");
}

type ReviewEvent = "APPROVE" | "COMMENT" | "REQUEST_CHANGES";

const EVENTS: Record<ReviewResult["verdict"], ReviewEvent> = {
  approve: "APPROVE",
  comment: "COMMENT",
  request_changes: "REQUEST_CHANGES",
};

const SEVERITY_LABEL: Record<ReviewComment["severity"], string> = {
  error: "Error",
  warning: "Warning",
  info: "Note",
};

/**
 * Posts the review and answers its `html_url`. Comments on lines of the diff go inline; the
 * others are listed in the body. Should GitHub still answer 422 (it refuses an approval or
 * a change request on the App's own pull request, or a line it cannot resolve), the review
 * is posted again as a plain comment, then with every comment in the body.
 */
async function postReview(
  octokit: InstallationOctokit,
  target: { owner: string; repo: string; pull_number: number },
  headSha: string,
  review: PrReviewView,
  diff: string,
): Promise<string | null> {
  const lines = commentableLines(diff);
  let inline = review.comments.filter((c) => lines.get(c.path)?.has(c.line));
  let outside = review.comments.filter((c) => !lines.get(c.path)?.has(c.line));
  let event = EVENTS[review.verdict];
  const notes: string[] = [];
  for (let attempt = 1; ; attempt++) {
    try {
      const created = await octokit.rest.pulls.createReview({
        ...target,
        commit_id: headSha,
        event,
        body: reviewBody(review.summary, outside, notes),
        comments: inline.map((c) => ({
          path: c.path,
          line: c.line,
          side: "RIGHT" as const,
          body: redactText(`**${SEVERITY_LABEL[c.severity]}:** ${c.body}`),
        })),
        request: { signal: timeout() },
      });
      return created.data.html_url ?? null;
    } catch (error) {
      const status = statusOf(error);
      if (status !== 422 || attempt >= 3) {
        if (status === 404 || status === 410) throw errors.notFound("pull request");
        throw errors.upstream(
          status === undefined
            ? `GitHub could not be reached when posting the review: ${githubMessage(error)}`
            : `GitHub answered ${status} when posting the review: ${githubMessage(error)}`,
        );
      }
      const reason = githubMessage(error);
      if (event !== "COMMENT" && (/own pull request/i.test(reason) || inline.length === 0)) {
        notes.push(
          `GitHub did not accept the verdict "${review.verdict}" from this App (${reason}); it is posted as a comment.`,
        );
        event = "COMMENT";
      } else if (inline.length > 0) {
        notes.push(`GitHub could not place the line comments (${reason}); they are listed here.`);
        outside = [...inline, ...outside];
        inline = [];
      } else {
        throw errors.upstream(`GitHub answered 422 when posting the review: ${reason}`);
      }
    }
  }
}

function reviewBody(summary: string, outside: ReviewComment[], notes: string[]): string {
  const parts = [summary];
  if (outside.length > 0) {
    parts.push(
      "**Comments on lines outside the diff**\n\n" +
        outside
          .map((c) => `- \`${c.path}\` line ${c.line} (${SEVERITY_LABEL[c.severity]}): ${c.body}`)
          .join("\n"),
    );
  }
  if (notes.length > 0) parts.push(notes.map((n) => `_${n}_`).join("\n"));
  const body = redactText(parts.join("\n\n"));
  return body.length <= MAX_REVIEW_BODY_CHARS
    ? body
    : `${body.slice(0, MAX_REVIEW_BODY_CHARS)}\n\n[… cut: the review was longer than GitHub accepts]`;
}
