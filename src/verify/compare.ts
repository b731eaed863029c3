/*
 * What a change did, test by test (docs/api.md, "Verification baseline"): one check's results after the change against
 * the same check on the base commit. Pure: no I/O, no clock; verify/baseline.ts keeps the base
 * side (BaseCheck) and pipeline/stages/verify.ts acts on the answer.
 *
 * - A test failing now that passed, was skipped or did not exist on the base is a new failure.
 * - A test failing on the base and now with another failure signature (its message or values
 *   changed: the change reached it) is a new failure too.
 * - A test failing on the base and now the same way is still failing: named, not chased,
 *   unless the task is about it (`mustPass`: the plan's targets, a CI failure's tests, a test
 *   the change adds or edits), when it blocks like a new failure.
 * - Where either side cannot be read per test (or the check failed with no failing test to
 *   show for it: a crash before the tests, a compile error), the check is the unit: its
 *   failure is pre-existing only when its normalized whole output equals the base's, and an
 *   empty failure never is.
 */
import { createHash } from "node:crypto";
import type { TestsRecord } from "../db/models.js";
import { countByStatus, failureSignature } from "./tests/index.js";

/** The parts of a test result compared here (src/verify/tests' TestResult fits). */
export interface ComparedTest {
  id: string;
  status: "passed" | "failed" | "skipped";
  message?: string | undefined;
  output?: string | undefined;
  file?: string | undefined;
}

/** The parts of a test run compared here (src/verify/tests' TestRun fits). */
export interface ComparedRun {
  runner: string;
  tests: readonly ComparedTest[];
  /** The command failed but none of its tests did: compared as a whole. */
  unexplained?: boolean | undefined;
}

/** One test of the base, as kept (verify/baseline.ts): its status and failure signature. */
export interface BaseTest {
  id: string;
  status: "passed" | "failed" | "skipped";
  /** failureSignature of a failed test; absent otherwise. */
  signature?: string;
}

/** One check on the base commit, as kept. */
export interface BaseCheck {
  ok: boolean;
  /** Per test, or null when its output could not be read per test. */
  tests: BaseTest[] | null;
  /** The check's whole output, normalized (normalizeOutput) and hashed; "" when empty. */
  output: string;
}

/** One check after the change. */
export interface AfterCheck {
  ok: boolean;
  tests: ComparedRun | null;
  /** The whole output, normalized and hashed like BaseCheck.output. */
  output: string;
}

export interface CheckComparison {
  /** "tests": judged per test; "check": the check as one unit. */
  unit: "tests" | "check";
  total: number;
  passed: number;
  failed: number;
  skipped: number;
  /** Failing now, new or failing differently (full results: the fix prompt shows them). */
  newFailures: ComparedTest[];
  /** Failing before and now the same way, whether or not the task is about them. */
  stillFailing: string[];
  /** Of stillFailing, those the task is about: they must pass, like a new failure. */
  mustPassFailing: ComparedTest[];
  /** Red on the base, green now. */
  fixed: string[];
  /** Not on the base at all. */
  added: string[];
  /** The check needs a fix round (and fails the task after the last). */
  blocking: boolean;
  /** The check failed, and only the way it failed on the base (no round, no task failure). */
  preExisting: boolean;
}

/**
 * A check's whole output as compared between two runs: normalized as a test's failure is
 * (verify/tests failureSignature: the checkout's folders named `<root>`, run times, addresses
 * and process ids left out, blank space collapsed), then hashed. "" for an output with
 * nothing left: an empty failure is never "the same" as anything.
 */
export function normalizeOutput(output: string, roots: readonly string[]): string {
  return hashSignature(failureSignature({ id: "", status: "failed", message: output }, roots));
}

/** A normalized failure text hashed short, to be kept and compared compactly; "" stays "". */
export function hashSignature(text: string): string {
  return text === "" ? "" : createHash("sha256").update(text).digest("base64url").slice(0, 22);
}

/** The check as one unit: pre-existing only when it failed the same whole way before. */
function compareWhole(after: AfterCheck, base: BaseCheck | undefined): CheckComparison {
  const tally = after.tests ? countByStatus(after.tests.tests) : countByStatus([]);
  const preExisting =
    !after.ok &&
    base !== undefined &&
    !base.ok &&
    after.output !== "" &&
    after.output === base.output;
  return {
    unit: "check",
    ...tally,
    newFailures: [],
    stillFailing: [],
    mustPassFailing: [],
    fixed: [],
    added: [],
    blocking: !after.ok && !preExisting,
    preExisting,
  };
}

/**
 * Compares one check after the change with the same check on the base. `base` undefined:
 * the base's results are unknown (not run, its install failed): every failure is new.
 * `signature` is the failure signature of a test failing now (failureSignature with the
 * working copy's roots); `mustPass` says which test ids the task is about.
 */
export function compareCheck(
  after: AfterCheck,
  base: BaseCheck | undefined,
  signature: (test: ComparedTest) => string,
  mustPass: (id: string) => boolean = () => false,
): CheckComparison {
  const run = after.tests;
  // A failing check with no failing test to show: what failed is not a test (a crash, a
  // compile error); only the whole output can say whether it was there before.
  const unreadable =
    !after.ok &&
    run !== null &&
    (run.unexplained === true || !run.tests.some((t) => t.status === "failed"));
  if (!run || unreadable || (base && base.tests === null))
    return compareWhole(after, base ?? undefined);
  const before = new Map((base?.tests ?? []).map((t) => [t.id, t]));
  const result: CheckComparison = {
    unit: "tests",
    ...countByStatus(run.tests),
    newFailures: [],
    stillFailing: [],
    mustPassFailing: [],
    fixed: [],
    added: [],
    blocking: false,
    preExisting: false,
  };
  for (const test of run.tests) {
    const old = before.get(test.id);
    if (base && !old) result.added.push(test.id);
    if (test.status === "passed") {
      if (old?.status === "failed") result.fixed.push(test.id);
      continue;
    }
    if (test.status !== "failed") continue;
    const sig = signature(test);
    // Per test, the id names the failure; its signature says whether it is the same one.
    const same = old?.status === "failed" && (old.signature ?? "") === sig;
    if (!same) result.newFailures.push(test);
    else {
      result.stillFailing.push(test.id);
      if (mustPass(test.id)) result.mustPassFailing.push(test);
    }
  }
  result.blocking = result.newFailures.length > 0 || result.mustPassFailing.length > 0;
  result.preExisting = !after.ok && !result.blocking;
  return result;
}

/** Ids kept per list in records and events (docs/api.md, "Verification baseline": lists capped at 50, with counts). */
export const MAX_LISTED_IDS = 50;

/** The record of a comparison; null when the check was not read per test. */
export function testsRecord(
  comparison: CheckComparison,
  runner: string | null,
  reproduced: readonly string[] = [],
): TestsRecord | null {
  if (runner === null) return null;
  const cap = (ids: readonly string[]) => ids.slice(0, MAX_LISTED_IDS);
  const newIds = comparison.newFailures.map((t) => t.id);
  return {
    runner,
    total: comparison.total,
    passed: comparison.passed,
    failed: comparison.failed,
    skipped: comparison.skipped,
    new_failures: cap(newIds),
    fixed: cap(comparison.fixed),
    still_failing: cap(comparison.stillFailing),
    added: cap(comparison.added),
    reproduced: cap(reproduced),
    new_failures_count: newIds.length,
    fixed_count: comparison.fixed.length,
    still_failing_count: comparison.stillFailing.length,
    added_count: comparison.added.length,
    reproduced_count: reproduced.length,
  };
}

/** "a, b, c and 12 more" of the first `shown` ids; "" for none. */
export function nameIds(ids: readonly string[], shown = 10): string {
  if (ids.length === 0) return "";
  const first = ids.slice(0, shown).join(", ");
  return ids.length > shown ? `${first} and ${ids.length - shown} more` : first;
}
