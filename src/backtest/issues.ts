/*
 * The task text of a case whose commit closes an issue (docs/operations.md,
 * "Backtest"): a message that says `Fixes #12` (or closes, resolves) on a GitHub
 * repository names the issue a person wrote before the fix, a fairer task than the commit
 * message, which was written after it. The issue is read from GitHub's REST API (a token in
 * GITHUB_TOKEN raises the rate limit and reaches private repositories); an issue that cannot
 * be read, or that is a pull request, leaves the commit message as the task text.
 */

/** GitHub's closing keywords (docs.github.com, "Linking a pull request to an issue"). */
const CLOSES = /\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\s*:?\s+#(\d+)\b/gi;

/** The issue numbers a commit message says it closes, in order, once each. */
export function closedIssues(message: string): number[] {
  const numbers = [...message.matchAll(CLOSES)].map((m) => Number(m[1]));
  return [...new Set(numbers)].filter((n) => Number.isSafeInteger(n) && n > 0);
}

/** owner/name of a GitHub clone URL (https, ssh or scp-like), or null for any other host. */
export function githubRepository(url: string): { owner: string; name: string } | null {
  const m =
    /^(?:https?:\/\/(?:[^@/]+@)?github\.com\/|ssh:\/\/git@github\.com\/|git@github\.com:)([A-Za-z0-9_.-]+)\/([A-Za-z0-9_.-]+?)(?:\.git)?\/?$/.exec(
      url.trim(),
    );
  return m ? { owner: m[1]!, name: m[2]! } : null;
}

export interface IssueSource {
  owner: string;
  name: string;
  /** The REST API's base URL (default https://api.github.com). */
  apiUrl?: string;
  token?: string;
  /** At most this long for one issue (default 10 s). */
  timeoutMs?: number;
}

/** The text of issue `number` ("title\n\nbody"), or null when it cannot be read or is a PR. */
export async function issueText(source: IssueSource, number: number): Promise<string | null> {
  const api = (source.apiUrl ?? "https://api.github.com").replace(/\/+$/, "");
  const url = `${api}/repos/${encodeURIComponent(source.owner)}/${encodeURIComponent(source.name)}/issues/${number}`;
  try {
    const res = await fetch(url, {
      headers: {
        accept: "application/vnd.github+json",
        "user-agent": "foreman-backtest",
        ...(source.token ? { authorization: `Bearer ${source.token}` } : {}),
      },
      redirect: "error",
      signal: AbortSignal.timeout(source.timeoutMs ?? 10_000),
    });
    if (!res.ok) return null;
    const issue = (await res.json()) as { title?: unknown; body?: unknown; pull_request?: unknown };
    if (issue.pull_request || typeof issue.title !== "string") return null;
    const body = typeof issue.body === "string" ? issue.body.trim() : "";
    return body ? `${issue.title.trim()}\n\n${body}` : issue.title.trim();
  } catch {
    return null;
  }
}

/**
 * For mineCases: the task text of a commit message from the first issue it closes, with the
 * issue's number, or null to keep the message.
 */
export function issueTexts(
  source: IssueSource,
): (message: string) => Promise<{ issue: number; text: string } | null> {
  const seen = new Map<number, Promise<string | null>>();
  return async (message) => {
    for (const number of closedIssues(message)) {
      if (!seen.has(number)) seen.set(number, issueText(source, number));
      const text = await seen.get(number)!;
      if (text) return { issue: number, text };
    }
    return null;
  };
}
