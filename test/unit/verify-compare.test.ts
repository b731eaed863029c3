import { describe, expect, it } from "vitest";
import { baseCheckOf, testSignature } from "../../src/verify/baseline.js";
import {
  compareCheck,
  nameIds,
  normalizeOutput,
  testsRecord,
  type BaseCheck,
  type ComparedRun,
  type ComparedTest,
} from "../../src/verify/compare.js";
import {
  fixFailures,
  judgeChecks,
  roundLine,
  testFiles,
  touchedTests,
} from "../../src/verify/judge.js";
import type { CheckOutcome, VerifyOutcome } from "../../src/verify/run.js";

/*
 * What a change did, test by test (docs/api.md, "Verification baseline"), without running anything:
 * the comparison of one check after the change with the base's kept results, and the round's
 * judgement.
 */

const ROOTS = ["/data/work/t1", "/workspace"];
const sig = (t: ComparedTest) => testSignature(t, ROOTS);

function run(...tests: ComparedTest[]): ComparedRun {
  return { runner: "node:test", tests };
}
const pass = (id: string): ComparedTest => ({ id, status: "passed" });
const fail = (id: string, message: string): ComparedTest => ({ id, status: "failed", message });

/** The base as kept: what baseCheckOf makes of a run on the base checkout. */
function base(ok: boolean, tests: ComparedRun | null, output = "x"): BaseCheck {
  return baseCheckOf({ ok, output }, tests, ["/data/work/t1/.git/foreman-base-1", "/workspace"]);
}

function after(ok: boolean, tests: ComparedRun | null, output = "x") {
  return { ok, tests, output: ok ? "" : normalizeOutput(output, ROOTS) };
}

describe("compareCheck", () => {
  it("names a test failing before and after the same way still failing, and does not block", () => {
    const old = fail("test/date.test.js > formats dates", "Expected '2024' to equal '2025'");
    const result = compareCheck(
      after(false, run(pass("test/add.test.js > adds"), old)),
      base(false, run(fail("test/add.test.js > adds", "-1 !== 5"), old)),
      sig,
    );
    expect(result).toMatchObject({
      unit: "tests",
      total: 2,
      passed: 1,
      failed: 1,
      newFailures: [],
      stillFailing: ["test/date.test.js > formats dates"],
      fixed: ["test/add.test.js > adds"],
      blocking: false,
      preExisting: true,
    });
  });

  it("counts a test that passed on the base and fails now as a new failure beside an old red", () => {
    const old = fail("old", "1 + 1 !== 3");
    const result = compareCheck(
      after(false, run(fail("v", "2 !== 1"), old)),
      base(false, run(pass("v"), old)),
      sig,
    );
    expect(result.newFailures.map((t) => t.id)).toEqual(["v"]);
    expect(result.stillFailing).toEqual(["old"]);
    expect(result.blocking).toBe(true);
    expect(result.preExisting).toBe(false);
  });

  it("treats a test failing on the base and now with another message as a new failure", () => {
    const result = compareCheck(
      after(false, run(fail("add", "add(2,3)=6"))),
      base(false, run(fail("add", "add(2,3)=-1"))),
      sig,
    );
    expect(result.newFailures.map((t) => t.id)).toEqual(["add"]);
    expect(result.blocking).toBe(true);
  });

  it("sees the same failure through other folders and timings", () => {
    const result = compareCheck(
      after(false, run(fail("t", "at /data/work/t1/src/a.js:3 (12ms)"))),
      base(false, run(fail("t", "at /data/work/t1/.git/foreman-base-1/src/a.js:3 (40ms)"))),
      sig,
    );
    expect(result.stillFailing).toEqual(["t"]);
    expect(result.blocking).toBe(false);
  });

  it("blocks on a still-failing test the task is about", () => {
    const old = fail("target", "nope");
    const result = compareCheck(
      after(false, run(old)),
      base(false, run(old)),
      sig,
      (id) => id === "target",
    );
    expect(result.mustPassFailing.map((t) => t.id)).toEqual(["target"]);
    expect(result.blocking).toBe(true);
    expect(result.preExisting).toBe(false);
  });

  it("counts tests the base did not have as added, and a failing one as new", () => {
    const result = compareCheck(
      after(false, run(pass("a"), fail("b", "boom"), pass("c"))),
      base(true, run(pass("a"))),
      sig,
    );
    expect(result.added).toEqual(["b", "c"]);
    expect(result.newFailures.map((t) => t.id)).toEqual(["b"]);
  });

  it("without base results, every failure is new", () => {
    const result = compareCheck(after(false, run(fail("a", "x"))), undefined, sig);
    expect(result.newFailures.map((t) => t.id)).toEqual(["a"]);
    expect(result.added).toEqual([]);
    expect(result.blocking).toBe(true);
  });

  it("judges a check not read per test by its whole output: equal is pre-existing", () => {
    const output = "EXPECTED_SUM_MISMATCH add(2,3)=-1";
    const same = compareCheck(after(false, null, output), base(false, null, output), sig);
    expect(same).toMatchObject({ unit: "check", preExisting: true, blocking: false });
  });

  it("a plain script failing with other words than on the base is not pre-existing", () => {
    const result = compareCheck(
      after(false, null, "EXPECTED_SUM_MISMATCH add(2,3)=6"),
      base(false, null, "EXPECTED_SUM_MISMATCH add(2,3)=-1"),
      sig,
    );
    expect(result).toMatchObject({ unit: "check", preExisting: false, blocking: true });
  });

  it("an empty failure is never pre-existing, even beside an empty failure on the base", () => {
    const result = compareCheck(after(false, null, ""), base(false, null, ""), sig);
    expect(result).toMatchObject({ preExisting: false, blocking: true });
  });

  it("a failing check with no failing test (a crash before the tests) is judged whole", () => {
    const result = compareCheck(
      after(false, run(pass("a")), "SyntaxError: Unexpected token"),
      base(true, run(pass("a"))),
      sig,
    );
    expect(result).toMatchObject({ unit: "check", blocking: true });
  });

  it("records lists capped at 50 with their full counts", () => {
    const many = Array.from({ length: 60 }, (_, i) => fail(`t${i}`, "x"));
    const comparison = compareCheck(after(false, run(...many)), base(true, run()), sig);
    const record = testsRecord(comparison, "node:test")!;
    expect(record.new_failures).toHaveLength(50);
    expect(record.new_failures_count).toBe(60);
    expect(record.added_count).toBe(60);
    expect(testsRecord(comparison, null)).toBeNull();
  });
});

describe("judging a round", () => {
  const check = { name: "test", command: "npm test" };
  function outcome(ok: boolean, tests: ComparedRun | null, output: string): CheckOutcome {
    return {
      check,
      result: {
        command: check.command,
        exitCode: ok ? 0 : 1,
        signal: null,
        timedOut: false,
        aborted: false,
        durationMs: 5,
        output,
        ok,
      },
      tests,
    } as CheckOutcome;
  }

  it("names new failures, fixed and still-failing tests in the round's line and the fix prompt", () => {
    const old = fail("old", "1 + 1 !== 3");
    const now = outcome(false, run(fail("v", "2 !== 1"), old, pass("w")), "raw runner output");
    const judged = judgeChecks(
      [now],
      new Map([["npm test", base(false, run(pass("v"), old, fail("w", "boom")))]]),
      { roots: ROOTS, mustPass: () => false, strict: false },
    );
    expect(roundLine(judged)).toBe(
      "Tests: 1 of 3 passed; 1 new failure: v; 1 fixed: w; 1 still failing as on the base: old.",
    );
    const full: VerifyOutcome = {
      install: [],
      results: [now],
      passed: [],
      failed: [check],
      skipped: [],
      ok: false,
      durationMs: 5,
    };
    const prompt = fixFailures(judged, full);
    expect(prompt.indexOf("#### v (new failure)\n2 !== 1")).toBeGreaterThanOrEqual(0);
    expect(prompt).toContain("failed the same way on the unchanged code");
    expect(prompt).toContain(": old.");
    // Raw output comes after the tests.
    expect(prompt.indexOf("raw runner output")).toBeGreaterThan(prompt.indexOf("#### v"));
  });

  it("sets nothing aside when strict (a CI failure's task, an unchanged working copy)", () => {
    const old = fail("old", "x");
    const [judged] = judgeChecks(
      [outcome(false, run(old), "x")],
      new Map([["npm test", base(false, run(old))]]),
      { roots: ROOTS, mustPass: () => false, strict: true },
    );
    expect(judged!.comparison.blocking).toBe(true);
  });

  it("finds the tests of changed files by file or by id", () => {
    const touched = touchedTests(
      [
        run(
          { id: "test/a.test.js > adds", status: "passed" },
          { id: "x", status: "passed", file: "./test/b.test.js" },
          { id: "test/a.test.jsx > other", status: "passed" },
          { id: "tests/test_c.py::test_one", status: "passed" },
        ),
      ],
      ["test/a.test.js", "test/b.test.js", "tests/test_c.py"],
    );
    expect([...touched].sort()).toEqual([
      "test/a.test.js > adds",
      "tests/test_c.py::test_one",
      "x",
    ]);
  });

  it("copies only the change's test files over the base, never its fix", () => {
    const runs = [run({ id: "test/sum.test.js > adds negatives", status: "passed" })];
    expect(testFiles(runs, ["src/add.js", "test/sum.test.js"])).toEqual(["test/sum.test.js"]);
  });

  it("names at most ten ids with a count", () => {
    expect(nameIds(Array.from({ length: 12 }, (_, i) => `t${i}`))).toBe(
      "t0, t1, t2, t3, t4, t5, t6, t7, t8, t9 and 2 more",
    );
  });
});
