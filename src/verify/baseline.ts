/*
 * The verification baseline (SPEC §4a; docs/api.md, "Verification baseline"): a check that
 * fails after the change is run again on the unchanged code, the task's base commit, checked
 * out beside the working copy (`git worktree add --detach`, removed afterwards: the working
 * copy itself is never touched). A failure that was there before, with no failure line the
 * base did not have, is pre-existing: it uses no fix round and does not fail the task. The
 * base's results are kept per account, repository, commit and command, so a round, a retry or
 * another task on the same commit does not run them again; a task that pushes a commit keeps
 * its last verification as that commit's results, so a follow-up from it runs none either.
 */
import { createHash, randomBytes } from "node:crypto";
import path from "node:path";
import type { Collection, Document } from "mongodb";
import type { Models } from "../db/models.js";
import { runGit } from "../util/git.js";
import { removeTree } from "../util/sandbox-cache.js";
import type { SandboxCache } from "../util/sandbox.js";
import type { Check, VerifyPlan } from "./checks.js";
import { runChecks, type CheckOutcome } from "./run.js";

/** What one check did on the base commit. */
export interface BaselineResult {
  ok: boolean;
  /** Its failure lines, normalized (failureLines), when it failed. */
  failures: string[];
}

interface BaselineDoc extends Document {
  _id: string;
  account_id: string;
  repo_id: string;
  commit: string;
  command: string;
  ok: boolean;
  failures: string[];
  created_at: Date;
}

/** Where base results are kept: one small document per account, repository, commit, command. */
const COLLECTION = "verify_baselines";
/** Failure lines kept per check, and the longest kept whole. */
const MAX_FAILURE_LINES = 500;
const MAX_LINE_CHARS = 300;

function baselines(models: Models): Collection<BaselineDoc> {
  return models.Task.db.collection<BaselineDoc>(COLLECTION);
}

function baselineId(scope: BaselineScope, command: string): string {
  return createHash("sha256")
    .update(JSON.stringify([scope.accountId, scope.repoId, scope.commit, command]))
    .digest("base64url");
}

/** What identifies a base: whose, which repository, which commit. */
export interface BaselineScope {
  accountId: string;
  repoId: string;
  commit: string;
}

/** Words that mark a line of a check's output as a failure (test runners, compilers, linters). */
const FAILURE_LINE = /\b(fail(ed|ure|s|ing)?|errors?|not ok|assert(ion)?)\b|✕|✗|×|✖/i;
/** Lines after a failure line kept with it: where runners say what was expected and found. */
const FAILURE_WINDOW = 3;
/** Run times, which differ between two runs of the same failure. */
const TIMING =
  /\b(duration_ms|time|took|elapsed)\b[:=]?\s*[\d.]+\s*\w*|\(?\b\d+(\.\d+)?\s?(ms|s|sec|seconds)\b\)?/gi;

/**
 * The lines of a check's output around its failures (each failure line and the few after
 * it), normalized so two runs compare: the checkout's folder named `<root>`, run times left
 * out. Other numbers stay: "9 !== 3" is another failure than "-5 !== 0", and a count of
 * failed tests that grows is news.
 */
export function failureLines(output: string, roots: readonly string[]): string[] {
  const found = new Set<string>();
  const lines = output.split("\n");
  let until = -1;
  for (const [i, raw] of lines.entries()) {
    if (FAILURE_LINE.test(raw)) until = i + FAILURE_WINDOW;
    if (i > until) continue;
    let line = raw;
    for (const root of roots) line = line.split(root).join("<root>");
    line = line.replace(TIMING, "#").replace(/\s+/g, " ").trim().slice(0, MAX_LINE_CHARS);
    if (line) found.add(line);
    if (found.size >= MAX_FAILURE_LINES) break;
  }
  return [...found];
}

/**
 * Whether a check that failed after the change failed the same way on the base: it failed
 * there too, and every failure line it has now was there before (a newly broken test in a
 * suite that already had a failing one is a new failure).
 */
export function preExisting(after: string[], before: BaselineResult | undefined): boolean {
  if (!before || before.ok) return false;
  const known = new Set(before.failures);
  return after.every((line) => known.has(line));
}

/** One check's result on a commit, by command, as kept. */
export interface KeptResult extends BaselineResult {
  command: string;
}

/**
 * Keeps results of checks on a commit as that commit's baseline: the runs above, and a
 * finished task's last verification of the commit it pushed (stages/publish.ts), so a
 * follow-up starting there does not run them again.
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
          failures: result.failures.slice(0, MAX_FAILURE_LINES),
          created_at: now,
        },
      },
      { upsert: true },
    );
  }
}

export interface BaselineOptions {
  models: Models;
  scope: BaselineScope;
  /** The working copy; the base is checked out beside it. */
  workdir: string;
  install: Check[];
  timeoutMs: number;
  signal?: AbortSignal | undefined;
  cache?: SandboxCache | undefined;
  log(line: string): Promise<void>;
}

/**
 * The base commit's results of `checks` (by command): kept ones read, the others run once in
 * a checkout of the base (with the plan's install steps first). A base whose install fails
 * gives no results: nothing is then called pre-existing.
 */
export async function baselineResults(
  checks: readonly Check[],
  options: BaselineOptions,
): Promise<Map<string, BaselineResult>> {
  const results = new Map<string, BaselineResult>();
  const commands = [...new Set(checks.map((c) => c.command))];
  const kept = await baselines(options.models)
    .find({ _id: { $in: commands.map((c) => baselineId(options.scope, c)) } })
    .toArray();
  for (const doc of kept) results.set(doc.command, { ok: doc.ok, failures: doc.failures });
  const missing = checks.filter(
    (c, i) => !results.has(c.command) && checks.findIndex((d) => d.command === c.command) === i,
  );
  if (missing.length === 0) return results;

  const dir = `${path.resolve(options.workdir)}.base-${randomBytes(4).toString("hex")}`;
  await options.log(
    `Running ${missing.map((c) => c.name).join(", ")} on the unchanged code (${options.scope.commit.slice(0, 12)}) to tell pre-existing failures from new ones.`,
  );
  try {
    await runGit(["worktree", "add", "--detach", "--quiet", dir, options.scope.commit], {
      cwd: options.workdir,
      ...(options.signal ? { signal: options.signal } : {}),
    });
    const plan: VerifyPlan = { source: null, install: options.install, checks: missing, notes: [] };
    const outcome = await runChecks(plan, {
      cwd: dir,
      timeoutMs: options.timeoutMs,
      ...(options.signal ? { signal: options.signal } : {}),
      ...(options.cache ? { cache: options.cache } : {}),
    });
    if (outcome.install.some((o) => !o.result.ok)) {
      await options.log("The unchanged code's install step failed: no baseline to compare with.");
      return results;
    }
    const ran: KeptResult[] = [];
    for (const { check, result } of outcome.results as CheckOutcome[]) {
      const base: BaselineResult = {
        ok: result.ok,
        failures: result.ok ? [] : failureLines(result.output, [dir]),
      };
      results.set(check.command, base);
      ran.push({ command: check.command, ...base });
    }
    await keepBaselines(options.models, options.scope, ran);
    return results;
  } finally {
    // The checkout goes, and so does its entry in the working copy's .git.
    await removeTree(dir).catch(() => undefined);
    await runGit(["worktree", "prune"], { cwd: options.workdir }).catch(() => undefined);
  }
}
