import { writeFile, rm } from "node:fs/promises";
import path from "node:path";
import type { ApiClient, TaskView } from "./api.js";
import { isTestFile } from "./ecosystems.js";
import { detectEcosystem } from "./ecosystems.js";
import { addWorktree, git, overlayFiles, removeWorktree } from "./git.js";
import { runTests, setupTree, type RunSettings } from "./tests.js";
import type { BacktestCase, CaseResult } from "./types.js";
import { existing } from "./validate.js";

const TERMINAL = new Set(["completed", "failed", "cancelled"]);

export interface RunCaseOptions {
  client: ApiClient;
  workspaceId: string;
  /** The repository's id or owner/name in that workspace. */
  repoId: string;
  /** The harness's clone, where the scoring worktrees are made. */
  mirror: string;
  scratch: string;
  settings: RunSettings;
  /** Spending left under the cap: the task is cancelled when it goes past (null: no cap). */
  usdLeft: number | null;
  pollMs?: number;
}

/**
 * Runs one valid case as a real task (pinned to the parent, auto-approved; the commit's test
 * changes do not exist there, so the agent never sees them) and scores its diff.
 */
export async function runCase(c: BacktestCase, options: RunCaseOptions): Promise<CaseResult> {
  const started = performance.now();
  const { client } = options;
  const task = await client.call<TaskView>("POST", "/tasks", {
    workspace_id: options.workspaceId,
    repo_id: options.repoId,
    description: c.message || `Make the change of commit ${c.id}.`,
    auto_approve: true,
    base_sha: c.parent,
  });
  let view = task;
  let capped = false;
  while (!TERMINAL.has(view.status)) {
    await new Promise((r) => setTimeout(r, options.pollMs ?? 500));
    view = await client.call<TaskView>("GET", `/tasks/${task.id}`);
    if (
      !capped &&
      options.usdLeft !== null &&
      view.cost.usd > options.usdLeft &&
      !TERMINAL.has(view.status)
    ) {
      capped = true;
      await client.call("POST", `/tasks/${task.id}/cancel`).catch(() => undefined);
    }
  }
  const seconds = (performance.now() - started) / 1000;
  const trajectory = await client.text(`/tasks/${task.id}/trajectory`).catch(() => "");
  const modelCalls = trajectory.split("\n").filter((l) => l.trim()).length;
  // Whatever the task ended with is scored (a task that failed its checks keeps its diff):
  // resolved is about the commit's tests, `status` says how the task itself ended.
  const diff = view.diff ?? "";
  const score = await scoreDiff(c, diff, options);
  const changed = diffFiles(diff);
  return {
    id: c.id,
    repo: c.repo,
    commit: c.commit,
    parent: c.parent,
    task_id: task.id,
    status: capped ? "cancelled_by_cap" : view.status,
    resolved: score.resolved,
    fail_to_pass: score.fail_to_pass,
    pass_to_pass: score.pass_to_pass,
    fix_rounds: view.checks?.fix_attempts ?? 0,
    model_calls: modelCalls,
    input_tokens: view.cost.input_tokens,
    output_tokens: view.cost.output_tokens,
    usd: view.cost.usd,
    seconds: Math.round(seconds * 10) / 10,
    touched_gold: changed.some((f) => c.source_files.includes(f)),
    edited_tests: changed.some(isTestFile),
    leaky_message: c.leaky_message,
    trajectory_url: `${client.url}/tasks/${task.id}/trajectory`,
    error: score.error ?? view.error,
    scoring_ms: score.ms,
    scoring_test_ms: score.testMs,
  };
}

/** The paths a unified diff changes. */
export function diffFiles(diff: string): string[] {
  const files = new Set<string>();
  for (const m of diff.matchAll(/^diff --git a\/(\S+) b\/(\S+)$/gm)) {
    files.add(m[1]!);
    files.add(m[2]!);
  }
  return [...files];
}

export interface Score {
  resolved: boolean;
  fail_to_pass: { passed: number; total: number };
  pass_to_pass: { passed: number; total: number };
  error: string | null;
  ms: number;
  testMs: number;
}

/**
 * Scoring (docs/operations.md, "Backtest"): `diff` applied to a fresh worktree at the parent, the
 * commit's test files laid over it (whatever the diff did to them), fail-to-pass and pass-to-pass
 * run; resolved when all pass.
 */
export async function scoreDiff(
  c: BacktestCase,
  diff: string,
  options: Pick<RunCaseOptions, "mirror" | "scratch" | "settings">,
): Promise<Score> {
  const started = performance.now();
  const dir = path.join(options.scratch, `${c.id}-score`);
  const totals = {
    fail_to_pass: { passed: 0, total: c.fail_to_pass.length },
    pass_to_pass: { passed: 0, total: c.pass_to_pass.length },
  };
  const result = (rest: Partial<Score>): Score => ({
    resolved: false,
    ...totals,
    error: null,
    ms: Math.round(performance.now() - started),
    testMs: 0,
    ...rest,
  });
  try {
    await addWorktree(options.mirror, dir, c.parent);
    if (diff.trim()) {
      const patch = `${dir}.patch`;
      await writeFile(patch, diff.endsWith("\n") ? diff : `${diff}\n`);
      try {
        await git(dir, ["apply", "--whitespace=nowarn", patch]);
      } catch {
        return result({ error: "the task's diff does not apply to the parent" });
      } finally {
        await rm(patch, { force: true });
      }
    }
    await overlayFiles(dir, c.commit, c.test_files);
    const ecosystem = await detectEcosystem(dir);
    if (!ecosystem) return result({ error: "no known ecosystem after the diff" });
    let testMs = await setupTree(dir, options.settings);
    const files = await existing(dir, c.test_files);
    const run = await runTests(dir, ecosystem, files, options.settings);
    testMs += run.ms;
    const passed = (ids: string[]) => ids.filter((id) => run.results.get(id) === "pass").length;
    totals.fail_to_pass.passed = passed(c.fail_to_pass);
    totals.pass_to_pass.passed = passed(c.pass_to_pass);
    const resolved =
      totals.fail_to_pass.passed === totals.fail_to_pass.total &&
      totals.pass_to_pass.passed === totals.pass_to_pass.total;
    return result({ resolved, testMs: Math.round(testMs) });
  } finally {
    await removeWorktree(options.mirror, dir);
  }
}
