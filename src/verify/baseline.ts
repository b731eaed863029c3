/*
 * The verification baseline (docs/api.md, "Verification baseline"): the task's
 * checks on its base commit, per test, to tell what the change did (verify/compare.ts) from
 * what was there before.
 *
 * The base is checked out inside the working copy's own `.git` (`git worktree add --detach`,
 * removed afterwards), so it is on the task's volume and inside the folder its disk watcher
 * measures: what a base run writes counts against TASK_DISK_LIMIT_MB with everything else the
 * task has, and a run past it fails the task naming the limit. The working copy's setup
 * outputs (node_modules, .venv) are linked in, not installed again. The base's results are
 * kept per account, repository, commit and command (verify_baselines), so a round, a retry or
 * another task on the same commit does not run them again; a task that pushes a commit keeps
 * its last verification as that commit's results (stages/publish.ts).
 */
import { execFileAsync } from "../util/launcher.js";
import { createHash, randomBytes } from "node:crypto";
import { mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import type { Collection, Document } from "mongodb";
import type { KeptCheckResult, Models } from "../db/models.js";
import { runGit } from "../util/git.js";
import { entryInfo, listDir, readBytes } from "../workcopy/fs.js";
import type { CommandTimeBudget } from "../sandbox/command-time.js";
import { removeTree } from "../sandbox/cache.js";
import { DiskBudgetError } from "../sandbox/disk.js";
import type { SandboxCache } from "../sandbox/index.js";
import type { Check, VerifyPlan } from "./checks.js";
import {
  hashSignature,
  normalizeOutput,
  type BaseCheck,
  type BaseTest,
  type ComparedRun,
  type ComparedTest,
} from "./compare.js";
import { runChecks, type CheckOutcome } from "./run.js";
import { failureSignature } from "./tests/index.js";

/** What identifies a base: whose, which repository, which commit. */
export interface BaselineScope {
  accountId: string;
  repoId: string;
  commit: string;
}

/** One check's result on a commit, by command, as kept. */
export type KeptResult = KeptCheckResult;

interface BaselineDoc extends Document {
  _id: string;
  account_id: string;
  repo_id: string;
  commit: string;
  command: string;
  ok: boolean;
  /**
   * Per test, compact (short keys: a suite's thousands of tests stay small): id, status
   * ("p", "f", "s"), a failed test's signature. Null: not read per test. Objects, not
   * tuples: FerretDB stores no nested arrays.
   */
  tests: Array<{ i: string; s: "p" | "f" | "s"; g?: string }> | null;
  output: string;
  created_at: Date;
}

/** Where base results are kept: one small document per account, repository, commit, command. */
const COLLECTION = "verify_baselines";
/** Tests kept per check (failing ones first), and the longest id kept. */
const MAX_KEPT_TESTS = 10_000;
const MAX_ID_CHARS = 500;
/** The kept documents' layout: older ones (failure lines) are not read. */
const LAYOUT = 2;
/** Where base checkouts go, inside the working copy's `.git`. */
const BASE_PREFIX = "foreman-base-";

function baselines(models: Models): Collection<BaselineDoc> {
  return models.Task.db.collection<BaselineDoc>(COLLECTION);
}

function baselineId(scope: BaselineScope, command: string): string {
  return createHash("sha256")
    .update(JSON.stringify([LAYOUT, scope.accountId, scope.repoId, scope.commit, command]))
    .digest("base64url");
}

const STATUS = { passed: "p", failed: "f", skipped: "s" } as const;
const FROM_STATUS = { p: "passed", f: "failed", s: "skipped" } as const;

/**
 * The failure signature of a test as compared between two runs (the base's and now): its
 * message (or, without one, its output) normalized (verify/tests failureSignature), hashed
 * short to be kept compactly.
 */
export function testSignature(test: ComparedTest, roots: readonly string[]): string {
  return hashSignature(failureSignature({ ...test, status: "failed" }, roots));
}

/** What one check did, as kept and compared: per test when it could be read so. */
export function baseCheckOf(
  result: { ok: boolean; output: string },
  tests: ComparedRun | null,
  roots: readonly string[],
): BaseCheck {
  return {
    ok: result.ok,
    tests:
      tests?.tests.map((t): BaseTest =>
        t.status === "failed"
          ? { id: t.id, status: t.status, signature: testSignature(t, roots) }
          : { id: t.id, status: t.status },
      ) ?? null,
    output: result.ok ? "" : normalizeOutput(result.output, roots),
  };
}

function compactTests(tests: readonly BaseTest[] | null): BaselineDoc["tests"] {
  if (!tests) return null;
  // Failing tests first: past the cap, a test missing from the base counts as new, so the
  // failures are what must not be lost.
  const ordered = [
    ...tests.filter((t) => t.status === "failed"),
    ...tests.filter((t) => t.status !== "failed"),
  ].slice(0, MAX_KEPT_TESTS);
  return ordered.map((t) => {
    const kept = { i: t.id.slice(0, MAX_ID_CHARS), s: STATUS[t.status] };
    return t.signature ? { ...kept, g: t.signature } : kept;
  });
}

function expandTests(tests: BaselineDoc["tests"]): BaseTest[] | null {
  if (!tests) return null;
  return tests.map(({ i, s, g }) =>
    g ? { id: i, status: FROM_STATUS[s], signature: g } : { id: i, status: FROM_STATUS[s] },
  );
}

/**
 * Keeps results of checks on a commit as that commit's baseline: base runs, and a finished
 * task's last verification of the commit it pushed (stages/publish.ts), so a follow-up
 * starting there does not run them again.
 */
export async function keepBaselines(
  models: Models,
  scope: BaselineScope,
  results: readonly KeptResult[],
): Promise<void> {
  const now = new Date();
  for (const result of results) {
    await baselines(models).updateOne(
      { _id: baselineId(scope, result.command) },
      {
        $set: {
          account_id: scope.accountId,
          repo_id: scope.repoId,
          commit: scope.commit,
          command: result.command,
          ok: result.ok,
          tests: compactTests(result.tests),
          output: result.output,
          created_at: now,
        },
      },
      { upsert: true },
    );
  }
}

/** The kept base results of `commands` on the scope's commit, by command. */
export async function keptBaselines(
  models: Models,
  scope: BaselineScope,
  commands: readonly string[],
): Promise<Map<string, BaseCheck>> {
  const docs = await baselines(models)
    .find({ _id: { $in: [...new Set(commands)].map((c) => baselineId(scope, c)) } })
    .toArray();
  return new Map(
    docs.map((d) => [d.command, { ok: d.ok, tests: expandTests(d.tests), output: d.output }]),
  );
}

/** The per-test results of a check's outcome (verify/tests, through runChecks), if read. */
export function testsOf(outcome: CheckOutcome): ComparedRun | null {
  return outcome.tests ?? null;
}

export interface BaseRunOptions {
  models: Models;
  scope: BaselineScope;
  /** The working copy: the base is checked out inside its `.git`. */
  workdir: string;
  /** Its setup's output folders (node_modules, .venv), linked into the checkout. */
  outputs: readonly string[];
  timeoutMs: number;
  signal?: AbortSignal | undefined;
  cache?: SandboxCache | undefined;
  log(line: string): Promise<void>;
  /**
   * Files of the working copy (repository-relative) copied over the base before it runs:
   * the change's tests, to see them fail on the base (reproduced). Results are then not kept.
   */
  overlay?: readonly string[];
  /** The task's TASK_COMMAND_TIME_LIMIT_S: the base's commands count against it. */
  timeBudget?: CommandTimeBudget | undefined;
}

/**
 * The base commit's results of `checks` (by command): kept ones read, the others run once in
 * a checkout of the base. Throws DiskBudgetError (a StageError naming TASK_DISK_LIMIT_MB) when
 * a base run went past the task's disk budget.
 */
export async function baselineResults(
  checks: readonly Check[],
  options: BaseRunOptions,
): Promise<Map<string, BaseCheck>> {
  const results = await keptBaselines(
    options.models,
    options.scope,
    checks.map((c) => c.command),
  );
  const missing = checks.filter(
    (c, i) => !results.has(c.command) && checks.findIndex((d) => d.command === c.command) === i,
  );
  if (missing.length === 0) return results;
  await options.log(
    `Running ${missing.map((c) => c.name).join(", ")} on the unchanged code (${options.scope.commit.slice(0, 12)}) to tell pre-existing failures from new ones.`,
  );
  for (const [command, result] of await runOnBase(missing, options)) results.set(command, result);
  return results;
}

/**
 * Runs `checks` on the base commit in a checkout inside the working copy's `.git` (its
 * budget's folder, `budgetRoot` of the sandbox), with the overlay's files of the working copy
 * on top. Kept as the commit's baseline unless there was an overlay.
 */
export async function runOnBase(
  checks: readonly Check[],
  options: BaseRunOptions,
): Promise<Map<string, BaseCheck>> {
  const results = new Map<string, BaseCheck>();
  const gitDir = path.join(options.workdir, ".git");
  const dir = path.join(gitDir, `${BASE_PREFIX}${randomBytes(4).toString("hex")}`);
  const signal = options.signal ? { signal: options.signal } : {};
  try {
    await runGit(["worktree", "add", "--detach", "--quiet", dir, options.scope.commit], {
      cwd: options.workdir,
      ...signal,
    });
    await linkOutputs(options.workdir, dir, options.outputs);
    await copyOverlay(options.workdir, dir, options.overlay ?? []);
    const plan: VerifyPlan = { source: null, install: [], checks: [...checks], notes: [] };
    const outcome = await runChecks(plan, {
      cwd: dir,
      budgetRoot: options.workdir,
      timeoutMs: options.timeoutMs,
      ...signal,
      ...(options.cache ? { cache: options.cache } : {}),
      timeBudget: options.timeBudget,
    });
    const ran: KeptResult[] = [];
    for (const done of outcome.results) {
      const base = baseCheckOf(done.result, testsOf(done), [dir, "/workspace"]);
      results.set(done.check.command, base);
      ran.push({ command: done.check.command, ...base });
    }
    if (!options.overlay?.length) await keepBaselines(options.models, options.scope, ran);
    return results;
  } finally {
    // The checkout goes, and so does its entry in the working copy's .git.
    await removeCheckout(dir);
    await runGit(["worktree", "prune"], { cwd: options.workdir }).catch(() => undefined);
  }
}

/** Tries to remove the base's checkout for about 2 s, looking again after each failed try. */
const REMOVE_TRIES = 10;
const REMOVE_PAUSE_MS = 200;

/**
 * Removes the base's checkout. A command past the disk budget is reported while the sandbox
 * is still killing it, and it may write another file meanwhile (rm then meets a folder that is
 * not empty), so the removal is tried again until the folder is gone.
 */
async function removeCheckout(dir: string): Promise<void> {
  for (let tries = 0; tries < REMOVE_TRIES; tries++) {
    await removeTree(dir).catch(() => undefined);
    if (!(await entryInfo(path.dirname(dir), path.basename(dir)))) return;
    await new Promise((resolve) => setTimeout(resolve, REMOVE_PAUSE_MS));
  }
}

/**
 * The setup's outputs of the working copy, hard-linked into the base checkout (the same
 * file system: the working copy's): the base runs with the dependencies the checks will
 * have, at the cost of a directory walk, not an install.
 */
async function linkOutputs(workdir: string, dir: string, outputs: readonly string[]) {
  for (const output of outputs) {
    // A folder of the working copy's own (never a link the model left there).
    if ((await entryInfo(workdir, output))?.type !== "directory") continue;
    if (await entryInfo(dir, output)) continue;
    await execFileAsync("cp", ["-al", "--", path.join(workdir, output), path.join(dir, output)]);
  }
}

/** The longest file of the change copied over the base. */
const MAX_OVERLAY_BYTES = 4 * 1024 * 1024;

/**
 * The change's files (`files`, repository-relative) copied from the working copy over the
 * base checkout: regular files only, never through a link (a link the model made could
 * point at any file of the host).
 */
async function copyOverlay(workdir: string, dir: string, files: readonly string[]) {
  for (const file of files) {
    const bytes = await readBytes(workdir, file, { maxBytes: MAX_OVERLAY_BYTES });
    if (typeof bytes === "string") continue;
    await mkdir(path.dirname(path.join(dir, file)), { recursive: true });
    await writeFile(path.join(dir, file), bytes);
  }
}

/** Removes base checkouts a stopped run left in the working copy's `.git`. */
export async function removeStaleBases(workdir: string): Promise<void> {
  const entries = await listDir(workdir, ".git");
  if (typeof entries === "string") return;
  for (const entry of entries.filter((e) => e.name.startsWith(BASE_PREFIX)))
    await removeTree(path.join(workdir, ".git", entry.name)).catch(() => undefined);
}

/** Base runs a process keeps for their tasks, at most (the oldest go first). */
const MAX_BASE_RUNS = 64;

/**
 * The base runs a process has started, by task: PLANNING starts one beside the model
 * (pipeline/base.ts) and VERIFYING takes it over, so the base's checks run once and out of
 * the model's way, and a run that failed (past the disk budget) is met by VERIFYING. Another
 * process finds the results kept (or runs them itself).
 */
export class BaseRuns {
  private readonly runs = new Map<string, Promise<Map<string, BaseCheck>>>();
  private readonly controllers = new Map<string, AbortController>();

  /**
   * Starts `run` for `taskId` unless one was started; the same promise either way. `run`'s
   * signal is aborted by stop().
   */
  start(taskId: string, run: (signal: AbortSignal) => Promise<Map<string, BaseCheck>>) {
    const going = this.runs.get(taskId);
    if (going) return going;
    const controller = new AbortController();
    const started = run(controller.signal);
    // Observed here so a run nobody awaits yet is not an unhandled rejection.
    started.catch(() => undefined);
    if (this.runs.size >= MAX_BASE_RUNS) this.forget(this.runs.keys().next().value!);
    this.runs.set(taskId, started);
    this.controllers.set(taskId, controller);
    return started;
  }

  /**
   * Stops the run of `taskId` (if one is going) and resolves once it has ended, its checkout
   * removed: a task failing beside its base run ends with nothing of the run left on disk.
   */
  async stop(taskId: string): Promise<void> {
    const going = this.runs.get(taskId);
    this.controllers.get(taskId)?.abort(new Error("task ended"));
    this.forget(taskId);
    await going?.catch(() => undefined);
  }

  /** The run started for `taskId`, if any, left for a later look. */
  get(taskId: string): Promise<Map<string, BaseCheck>> | undefined {
    return this.runs.get(taskId);
  }

  /** Forgets the run of `taskId` (its results are kept in the database). */
  forget(taskId: string): void {
    this.runs.delete(taskId);
    this.controllers.delete(taskId);
  }

  /**
   * The DiskBudgetError the run of `taskId` ended with, once it ends; undefined when there is
   * no run or it ended otherwise. A stage that ran out of space beside it (the base's checkout
   * is on the task's volume) failed because of the base, and says so with this.
   */
  async overBudget(taskId: string): Promise<DiskBudgetError | undefined> {
    const failure = await this.runs.get(taskId)?.then(
      () => undefined,
      (error: unknown) => error,
    );
    return failure instanceof DiskBudgetError ? failure : undefined;
  }
}
