import { createHash } from "node:crypto";
import { mkdir, readFile, readdir, rm, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { apiClient } from "./api.js";
import { git } from "./git.js";
import { githubRepository, issueTexts } from "./issues.js";
import { mineCases } from "./mine.js";
import { buildReport, reportMarkdown } from "./report.js";
import { runCase } from "./run-case.js";
import type { RunSettings } from "./tests.js";
import type { BacktestCase, BacktestReport, CaseResult, CasesFile } from "./types.js";
import { validateCase } from "./validate.js";

/*
 * The backtest (docs/operations.md, "Backtest"): mine a repository's history for commits that
 * fixed something and tested it, validate them, run each as a real task through the API,
 * score the task's diff against the commit's tests, report.
 */

export interface BacktestOptions {
  /** A local path or a clone URL. */
  repo: string;
  /** Where cases.json, report.json and report.md go (and the harness's scratch trees). */
  out: string;
  /** Valid cases wanted (newest first); all when unset. */
  cases?: number | undefined;
  since?: string | undefined;
  until?: string | undefined;
  /** Reuse these cases instead of mining. */
  casesFile?: string | undefined;
  /** Stop cleanly once this much was spent. */
  maxUsd?: number | undefined;
  settings: RunSettings;
  /** The service to run tasks on, and a key of the account to use. */
  service: { url: string; key: string };
  /** The model id when no trajectory names it (e.g. no case ran). */
  model: string;
  progress?(line: string): void;
  pollMs?: number;
  /**
   * For a GitHub repository, where the text of an issue a commit closes is read (default
   * https://api.github.com; BACKTEST_GITHUB_API_URL), and a token for it (GITHUB_TOKEN).
   */
  githubApiUrl?: string | undefined;
  githubToken?: string | undefined;
}

export interface BacktestOutcome {
  report: BacktestReport;
  cases: BacktestCase[];
  /** Time spent by the harness per phase, and in the repository's own test runs. */
  timing: { mine_ms: number; validate_ms: number; validate_test_ms: number };
}

/** A hash of the prompt texts (src/pipeline/prompts): two runs with one hash asked alike. */
export async function promptHash(): Promise<string> {
  const dir = fileURLToPath(new URL("../pipeline/prompts/", import.meta.url));
  const hash = createHash("sha256");
  for (const name of (await readdir(dir)).filter((n) => n.endsWith(".md")).sort()) {
    hash
      .update(name)
      .update("\0")
      .update(await readFile(path.join(dir, name)))
      .update("\0");
  }
  return hash.digest("hex");
}

/** The repository's name for reports and the workspace: the last part of its path or URL. */
export function repoName(repo: string): string {
  const base = repo.replace(/\/+$/, "").split(/[/:]/).pop() ?? "repo";
  return base.replace(/\.git$/, "").replace(/[^A-Za-z0-9_.-]/g, "-") || "repo";
}

/** A bare clone of the repository under `out`, made once and refreshed after. */
export async function prepareMirror(repo: string, out: string): Promise<string> {
  const mirror = path.join(out, "mirror.git");
  const exists = await stat(mirror).then(
    () => true,
    () => false,
  );
  const source =
    /^[a-z][a-z0-9+.-]*:\/\//i.test(repo) || /^[^/]+@[^:]+:/.test(repo) ? repo : path.resolve(repo);
  if (!exists) await git(out, ["clone", "--bare", "--quiet", "--", source, mirror]);
  return mirror;
}

export async function runBacktest(options: BacktestOptions): Promise<BacktestOutcome> {
  const startedAt = new Date();
  const progress = options.progress ?? (() => {});
  await mkdir(options.out, { recursive: true });
  const scratch = path.join(options.out, "trees");
  await mkdir(scratch, { recursive: true });
  const name = repoName(options.repo);
  const mirror = await prepareMirror(options.repo, options.out);

  let cases: BacktestCase[];
  const timing = { mine_ms: 0, validate_ms: 0, validate_test_ms: 0 };
  if (options.casesFile) {
    cases = (JSON.parse(await readFile(options.casesFile, "utf8")) as CasesFile).cases;
    progress(`Read ${cases.length} cases from ${options.casesFile}.`);
  } else {
    const mineStart = performance.now();
    const github = githubRepository(options.repo);
    const mined = await mineCases(mirror, name, {
      since: options.since,
      until: options.until,
      ...(github
        ? {
            issueText: issueTexts({
              ...github,
              ...(options.githubApiUrl ? { apiUrl: options.githubApiUrl } : {}),
              ...(options.githubToken ? { token: options.githubToken } : {}),
            }),
          }
        : {}),
    });
    timing.mine_ms = Math.round(performance.now() - mineStart);
    progress(`Mined ${mined.length} candidate commits of ${name} in ${timing.mine_ms} ms.`);
    cases = [];
    let valid = 0;
    for (const m of mined) {
      if (options.cases !== undefined && valid >= options.cases) break;
      const c = await validateCase(mirror, m, scratch, options.settings);
      timing.validate_ms += c.validation_ms;
      timing.validate_test_ms += c.test_run_ms;
      cases.push(c);
      if (c.validity === "valid") valid++;
      progress(
        `Validated ${c.id}: ${c.validity}${c.reason ? ` (${c.reason})` : ""}; ${valid} valid so far.`,
      );
    }
    const file: CasesFile = { repo: name, mined_at: new Date().toISOString(), cases };
    await writeFile(path.join(options.out, "cases.json"), `${JSON.stringify(file, null, 2)}\n`);
  }

  const client = apiClient(options.service.url, options.service.key);
  const workspace = await client.call<{ id: string }>("POST", "/workspaces", {
    name: `backtest ${name}`,
    repos: [{ name: `backtest/${name}`, clone_url: mirror }],
  });
  const valid = cases.filter((c) => c.validity === "valid");
  const results: CaseResult[] = [];
  let spent = 0;
  let stopped: string | null = null;
  let model = options.model;
  for (const c of valid) {
    if (options.maxUsd !== undefined && spent >= options.maxUsd) {
      stopped ??= `the spending cap of $${options.maxUsd} was reached`;
      results.push(notRun(c));
      continue;
    }
    const result = await runCase(c, {
      client,
      workspaceId: workspace.id,
      repoId: `backtest/${name}`,
      mirror,
      scratch,
      settings: options.settings,
      usdLeft: options.maxUsd === undefined ? null : options.maxUsd - spent,
      ...(options.pollMs ? { pollMs: options.pollMs } : {}),
    });
    if (result.status === "cancelled_by_cap")
      stopped ??= `the spending cap of $${options.maxUsd} was reached`;
    spent += result.usd;
    results.push(result);
    if (result.task_id && model === options.model)
      model = (await modelOf(client, result.task_id)) ?? model;
    const resolved = results.filter((r) => r.resolved).length;
    progress(
      `[${results.length}/${valid.length}] ${c.id} ${result.resolved ? "resolved" : `not resolved (${result.status})`} in ${result.seconds} s · resolved ${resolved} · spent $${spent.toFixed(4)}`,
    );
  }
  const report = buildReport({
    model,
    promptHash: await promptHash(),
    startedAt,
    repos: [name],
    cases,
    results,
    stopped,
  });
  await writeFile(path.join(options.out, "report.json"), `${JSON.stringify(report, null, 2)}\n`);
  await writeFile(path.join(options.out, "report.md"), reportMarkdown(report, cases));
  await rm(scratch, { recursive: true, force: true });
  return { report, cases, timing };
}

async function modelOf(
  client: ReturnType<typeof apiClient>,
  taskId: string,
): Promise<string | null> {
  const text = await client.text(`/tasks/${taskId}/trajectory`).catch(() => "");
  const first = text.split("\n").find((l) => l.trim());
  if (!first) return null;
  return (JSON.parse(first) as { model?: string }).model ?? null;
}

function notRun(c: BacktestCase): CaseResult {
  return {
    id: c.id,
    repo: c.repo,
    commit: c.commit,
    parent: c.parent,
    task_id: null,
    status: "not_run",
    resolved: false,
    fail_to_pass: { passed: 0, total: c.fail_to_pass.length },
    pass_to_pass: { passed: 0, total: c.pass_to_pass.length },
    fix_rounds: 0,
    model_calls: 0,
    input_tokens: 0,
    output_tokens: 0,
    usd: 0,
    seconds: 0,
    touched_gold: false,
    edited_tests: false,
    leaky_message: c.leaky_message,
    trajectory_url: null,
    error: null,
    scoring_ms: 0,
    scoring_test_ms: 0,
  };
}
