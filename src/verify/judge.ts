/*
 * One verification round judged test by test (docs/api.md, "Verification baseline"): each check's outcome compared with
 * the base (verify/compare.ts), which tests the task is about, the round's line for the task
 * log, and what the fix round's model reads: the new failures by id with their messages and
 * output first, the tests red before, raw output tails after.
 */
import { redactText } from "../util/redact.js";
import type { Check } from "./checks.js";
import {
  compareCheck,
  nameIds,
  normalizeOutput,
  type BaseCheck,
  type CheckComparison,
  type ComparedRun,
  type ComparedTest,
} from "./compare.js";
import { testSignature, testsOf } from "./baseline.js";
import { failureReport, type CheckOutcome, type VerifyOutcome } from "./run.js";

export interface JudgedCheck {
  outcome: CheckOutcome;
  run: ComparedRun | null;
  comparison: CheckComparison;
}

export interface JudgeOptions {
  /** The working copy's folders as its output names them (the host path, /workspace). */
  roots: readonly string[];
  /** Test ids the task is about (the plan's targets, the change's tests): they must pass. */
  mustPass: (id: string) => boolean;
  /**
   * Nothing is set aside as pre-existing: a task made to fix a failing check (CI failure),
   * or a working copy still unchanged (the fix round is where its work happens).
   */
  strict: boolean;
}

/** Compares each check's outcome with its base (by command); base results may be missing. */
export function judgeChecks(
  results: readonly CheckOutcome[],
  base: ReadonlyMap<string, BaseCheck>,
  options: JudgeOptions,
): JudgedCheck[] {
  const mustPass = options.strict ? () => true : options.mustPass;
  return results.map((outcome) => {
    const run = testsOf(outcome);
    const comparison = compareCheck(
      {
        ok: outcome.result.ok,
        tests: run,
        output: outcome.result.ok ? "" : normalizeOutput(outcome.result.output, options.roots),
      },
      base.get(outcome.check.command),
      (test) => testSignature(test, options.roots),
      mustPass,
    );
    if (options.strict && comparison.preExisting) {
      comparison.blocking = true;
      comparison.preExisting = false;
    }
    return { outcome, run, comparison };
  });
}

/** The checks a fix round is for (failing in a way the change owns, or the task is about). */
export function blockingChecks(judged: readonly JudgedCheck[]): Check[] {
  return judged.filter((j) => j.comparison.blocking).map((j) => j.outcome.check);
}

function unique(ids: Iterable<string>): string[] {
  return [...new Set(ids)];
}

/** The ids of a kind across checks, each once. */
export function idsOf(
  judged: readonly JudgedCheck[],
  kind: "newFailures" | "fixed" | "stillFailing" | "added",
): string[] {
  return unique(
    judged.flatMap((j) =>
      kind === "newFailures" ? j.comparison.newFailures.map((t) => t.id) : j.comparison[kind],
    ),
  );
}

/**
 * The round's line for the task log, by test id (the first 10 of each, with counts): the new
 * failures, the tests fixed and the tests still failing as on the base. "" when no check was
 * read per test.
 */
export function roundLine(judged: readonly JudgedCheck[]): string {
  if (!judged.some((j) => j.comparison.unit === "tests")) return "";
  const part = (count: number, what: string, ids: string[]) =>
    count === 0 ? "" : `${count} ${what}: ${redactText(nameIds(ids))}`;
  const fresh = idsOf(judged, "newFailures");
  const mustPass = unique(judged.flatMap((j) => j.comparison.mustPassFailing.map((t) => t.id)));
  const fixed = idsOf(judged, "fixed");
  const still = idsOf(judged, "stillFailing");
  const total = judged.reduce((sum, j) => sum + j.comparison.total, 0);
  const passed = judged.reduce((sum, j) => sum + j.comparison.passed, 0);
  const parts = [
    part(fresh.length, fresh.length === 1 ? "new failure" : "new failures", fresh),
    part(mustPass.length, "failing as on the base but the task is about them", mustPass),
    part(fixed.length, "fixed", fixed),
    part(still.length, "still failing as on the base", still),
  ].filter(Boolean);
  return `Tests: ${passed} of ${total} passed${parts.length ? `; ${parts.join("; ")}` : ""}.`;
}

/** Characters of one test's message and output in the fix prompt, at most. */
const MAX_TEST_CHARS = 2_000;
/** Tests shown in full in the fix prompt; the others are named. */
const MAX_SHOWN_TESTS = 15;
/** What raw output tails keep at least, whatever the tests took. */
const MIN_TAIL_CHARS = 2_000;

function testBlock(test: ComparedTest, why: string): string {
  const message = (test.message ?? "").trim();
  const output = (test.output ?? "").trim();
  let body = [message, output && output !== message ? output : ""].filter(Boolean).join("\n");
  if (body.length > MAX_TEST_CHARS) body = `${body.slice(0, MAX_TEST_CHARS)}\n[… cut]`;
  return `#### ${test.id} (${why})\n${body || "(no message)"}\n`;
}

/**
 * What a fix round's model reads about the checks (the `failures` of fix-user.md), within
 * `maxChars`: per blocking check read per test, each new failure (and each test the task is
 * about that still fails) by id with its message and output lines; the tests that failed on
 * the base the same way (not the change's to fix); then the raw output tails of the blocking
 * checks in what is left.
 */
export function fixFailures(
  judged: readonly JudgedCheck[],
  outcome: VerifyOutcome,
  maxChars = 12_000,
): string {
  const blocking = judged.filter((j) => j.comparison.blocking);
  const blocks: string[] = [];
  const named: string[] = [];
  for (const j of blocking) {
    const tests = [
      ...j.comparison.newFailures.map((t) => [t, "new failure"] as const),
      ...j.comparison.mustPassFailing.map(
        (t) => [t, "failed on the base too, but the task is about it: it must pass"] as const,
      ),
    ];
    for (const [test, why] of tests) {
      if (blocks.length < MAX_SHOWN_TESTS) blocks.push(testBlock(test, why));
      else named.push(test.id);
    }
  }
  let text = "";
  if (blocks.length > 0)
    text += `### Failing tests\n${blocks.join("\n")}${named.length ? `\nAlso failing: ${nameIds(named, 50)}.\n` : ""}`;
  const still = unique(
    judged.flatMap((j) =>
      j.comparison.stillFailing.filter(
        (id) => !j.comparison.mustPassFailing.some((t) => t.id === id),
      ),
    ),
  );
  if (still.length > 0)
    text += `\n### Failing before the change too\nThese tests failed the same way on the unchanged code; leave them unless the task is about them: ${nameIds(still, 50)}.\n`;
  const preExisting = judged.filter(
    (j) => j.comparison.preExisting && j.comparison.unit === "check",
  );
  if (preExisting.length > 0)
    text += `\n### Failing before the change too\n${preExisting.map((j) => j.outcome.check.name).join(", ")} failed the same way on the unchanged code; leave ${preExisting.length === 1 ? "it" : "them"} unless the task is about ${preExisting.length === 1 ? "it" : "them"}.\n`;
  text = redactText(text);
  if (text.length > maxChars - MIN_TAIL_CHARS)
    text = `${text.slice(0, maxChars - MIN_TAIL_CHARS)}\n[… cut]\n`;
  const names = new Set(blocking.map((j) => j.outcome.check));
  const tails = failureReport(
    {
      ...outcome,
      results: outcome.results.filter((o) => names.has(o.check)),
      failed: outcome.failed.filter(
        (c) => names.has(c) || outcome.install.some((i) => i.check === c),
      ),
    },
    maxChars - text.length - 40,
  );
  return text ? `${text}\n### Output\n${tails}` : tails;
}

/** True when `test` belongs to the changed file `file` (by its file, or the path its id starts with). */
function inFile(test: ComparedTest, file: string): boolean {
  if (test.file?.replace(/^\.\//, "") === file) return true;
  return test.id.startsWith(file) && !/[\w.-]/.test(test.id.charAt(file.length));
}

/**
 * The tests of `runs` the change adds or edits: those whose file (or the path their id starts
 * with) is among the changed `files`.
 */
export function touchedTests(runs: readonly (ComparedRun | null)[], files: readonly string[]) {
  const touched = new Set<string>();
  for (const run of runs)
    for (const test of run?.tests ?? [])
      if (files.some((f) => inFile(test, f))) touched.add(test.id);
  return touched;
}

/** Of the changed `files`, those holding tests of `runs` (the change's test files). */
export function testFiles(
  runs: readonly (ComparedRun | null)[],
  files: readonly string[],
): string[] {
  const tests = runs.flatMap((run) => run?.tests ?? []);
  return files.filter((f) => tests.some((t) => inFile(t, f)));
}
