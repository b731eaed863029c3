import { cp, mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { sandboxCache } from "../../src/sandbox/cache.js";
import { DEFAULT_SETUP_ALLOW } from "../../src/sandbox/setup-proxy.js";
import { runSandboxed, type SandboxCache } from "../../src/sandbox/index.js";
import { runChecks } from "../../src/verify/run.js";
import { runSetup } from "../../src/verify/setup.js";
import { readOutput, runWithTests, type TestRun } from "../../src/verify/tests/index.js";

/*
 * Each runner for real, in the real sandbox, on a fixture repository
 * (test/fixtures/test-runners/<runner>) with a passing test, a failing one with a message, a
 * skipped one and a nested suite: the ids, statuses and messages read from the runner's
 * report, the output as the runner prints it without the report, and the fallback readers on
 * the output of the same command run without instrumentation. vitest, jest and mocha are
 * installed by the setup step from the npm registry into a package cache that outlives the
 * run (one install per lockfile on a machine); go's build cache is kept the same way.
 */

const FIXTURES = path.resolve(import.meta.dirname, "../fixtures/test-runners");
const made: string[] = [];

afterAll(async () => {
  for (const dir of made) await rm(dir, { recursive: true, force: true });
});

/** A copy of a fixture repository in a temporary folder. */
async function fixture(name: string): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), `foreman-${name}-`));
  made.push(dir);
  await cp(path.join(FIXTURES, name), dir, { recursive: true });
  return dir;
}

/** The fixture's dependencies through the setup step (registry, then its package cache). */
async function installed(name: string, dir: string): Promise<SandboxCache> {
  const setup = await runSetup({
    workdir: dir,
    owner: { account: "test-runners", repo: name },
    allow: DEFAULT_SETUP_ALLOW,
    timeoutMs: 180_000,
    log: () => undefined,
  });
  expect(setup.error ?? "").toBe("");
  expect(setup.ok).toBe(true);
  return setup.cache!;
}

/** id → status of a run. */
function statuses(tests: TestRun | null): Record<string, string> {
  return Object.fromEntries((tests?.tests ?? []).map((t) => [t.id, t.status]));
}

function failure(tests: TestRun | null, id: string) {
  return tests?.tests.find((t) => t.id === id && t.status === "failed");
}

describe("JavaScript runners installed from the registry", () => {
  it("vitest: `npm test` whose script is `vitest run` gets the JSON report", async () => {
    const dir = await fixture("vitest");
    const cache = await installed("vitest", dir);
    const { result, tests } = await runWithTests("npm test", {
      cwd: dir,
      timeoutMs: 120_000,
      cache,
    });
    expect(result.ok).toBe(false);
    expect(result.command).toBe("npm test");
    expect(tests).toMatchObject({ runner: "vitest", source: "report" });
    expect(statuses(tests)).toEqual({
      "test/calc.test.js > calc > adds": "passed",
      "test/calc.test.js > calc > nested > adds more": "failed",
      "test/calc.test.js > calc > later": "skipped",
    });
    const failed = failure(tests, "test/calc.test.js > calc > nested > adds more");
    expect(failed?.message).toContain("EXPECTED_SUM_MISMATCH");
    expect(failed?.message).toMatch(/expected 6 to be 5/);
    expect(failed?.file).toBe("test/calc.test.js");
    expect(tests?.unexplained).toBeUndefined();
    // The usual reporter still prints; the report's file is nowhere in the working copy.
    expect(result.output).toMatch(/FAIL\s+test\/calc\.test\.js > calc > nested > adds more/);

    const plain = await runSandboxed("sh -c 'npm test'", { cwd: dir, timeoutMs: 120_000, cache });
    const fallback = new Map(readOutput(plain.output, ["/workspace", dir]));
    expect(fallback.get("vitest")?.map((t) => [t.id, t.status])).toEqual([
      ["test/calc.test.js > calc > nested > adds more", "failed"],
    ]);
  });

  it("jest: `npm test` whose script is `jest` gets the JSON report", async () => {
    const dir = await fixture("jest");
    const cache = await installed("jest", dir);
    const { result, tests } = await runWithTests("npm test", {
      cwd: dir,
      timeoutMs: 120_000,
      cache,
    });
    expect(result.ok).toBe(false);
    expect(tests).toMatchObject({ runner: "jest", source: "report" });
    expect(statuses(tests)).toEqual({
      "test/calc.test.js > calc > adds": "passed",
      "test/calc.test.js > calc > nested > adds more": "failed",
      "test/calc.test.js > calc > later": "skipped",
    });
    const failed = failure(tests, "test/calc.test.js > calc > nested > adds more");
    expect(failed?.message).toMatch(/Expected: 5\s+Received: 6/);
    expect(result.output).toContain("● calc › nested › adds more");

    const plain = await runSandboxed("sh -c 'npm test'", { cwd: dir, timeoutMs: 120_000, cache });
    const fallback = new Map(readOutput(plain.output, ["/workspace", dir]));
    expect(fallback.get("jest")?.map((t) => [t.id, t.status])).toEqual([
      ["test/calc.test.js > calc > nested > adds more", "failed"],
    ]);
  });

  it("mocha: a plain `npx mocha` gets our reporter beside mocha's spec output", async () => {
    const dir = await fixture("mocha");
    const cache = await installed("mocha", dir);
    const { result, tests } = await runWithTests("npx mocha", {
      cwd: dir,
      timeoutMs: 120_000,
      cache,
    });
    expect(result.ok).toBe(false);
    expect(tests).toMatchObject({ runner: "mocha", source: "report" });
    expect(statuses(tests)).toEqual({
      "test/calc.test.js > calc > adds": "passed",
      "test/calc.test.js > calc > nested > adds more": "failed",
      "test/calc.test.js > calc > later": "skipped",
    });
    expect(failure(tests, "test/calc.test.js > calc > nested > adds more")?.message).toContain(
      "EXPECTED_SUM_MISMATCH add(2,3)=6",
    );
    // mocha's own spec reporter, as without ours.
    expect(result.output).toMatch(/✔ adds/);
    expect(result.output).toMatch(/1 passing/);
  });
});

describe("runners on the machine", () => {
  it("pytest: the JUnit report through PYTEST_ADDOPTS, pytest's node ids", async () => {
    const dir = await fixture("pytest");
    const { result, tests } = await runWithTests("pytest", { cwd: dir, timeoutMs: 60_000 });
    expect(result.command).toBe("pytest");
    expect(tests).toMatchObject({ runner: "pytest", source: "report" });
    expect(statuses(tests)).toEqual({
      "tests/test_calc.py::TestCalc::test_adds": "passed",
      "tests/test_calc.py::TestCalc::TestNested::test_adds_more": "failed",
      "tests/test_calc.py::TestCalc::test_later": "skipped",
    });
    expect(
      failure(tests, "tests/test_calc.py::TestCalc::TestNested::test_adds_more")?.message,
    ).toMatch(/EXPECTED_SUM_MISMATCH\s+assert 6 == 5/);
    // The report is not mentioned where a run without it would print nothing.
    expect(result.output).not.toContain("foreman-exchange");
    expect(result.output).toContain("1 failed, 1 passed, 1 skipped");

    const plain = await runSandboxed("pytest -rA", { cwd: dir, timeoutMs: 60_000 });
    const fallback = new Map(readOutput(plain.output, ["/workspace", dir]));
    // -rA names a skipped test by its file and line only: the fallback does not see it.
    expect(fallback.get("pytest")?.map((t) => [t.id, t.status])).toEqual([
      ["tests/test_calc.py::TestCalc::test_adds", "passed"],
      ["tests/test_calc.py::TestCalc::TestNested::test_adds_more", "failed"],
    ]);
  });

  it("unittest: read from its text, ids module.Class.test", async () => {
    const dir = await fixture("unittest");
    const { tests } = await runWithTests("python3 -m unittest -v", { cwd: dir, timeoutMs: 60_000 });
    expect(tests).toMatchObject({ runner: "unittest", source: "output" });
    expect(statuses(tests)).toEqual({
      "tests.test_calc.TestCalc.test_adds": "passed",
      "tests.test_calc.TestCalc.test_adds_more": "failed",
      "tests.test_calc.TestCalc.test_later": "skipped",
    });
    expect(failure(tests, "tests.test_calc.TestCalc.test_adds_more")?.message).toMatch(
      /AssertionError: 6 != 5 : EXPECTED_SUM_MISMATCH/,
    );
    // Without -v only the failure is named.
    const quiet = await runWithTests("python3 -m unittest", { cwd: dir, timeoutMs: 60_000 });
    expect(statuses(quiet.tests)).toEqual({ "tests.test_calc.TestCalc.test_adds_more": "failed" });
  });

  it("go test: -json added, read per subtest, rendered back to go's text", async () => {
    const dir = await fixture("go");
    // The build cache outlives the run: the standard library is compiled once per machine.
    const cache = await sandboxCache({ account: "test-runners", repo: "go" });
    const { result, tests } = await runWithTests("go test ./...", {
      cwd: dir,
      timeoutMs: 180_000,
      cache,
    });
    expect(result.command).toBe("go test ./...");
    expect(tests).toMatchObject({ runner: "go", source: "report" });
    expect(statuses(tests)).toEqual({
      "example.com/fixture/calc/TestAdd/small": "passed",
      "example.com/fixture/calc/TestAdd/more": "failed",
      "example.com/fixture/calc/TestLater": "skipped",
    });
    expect(failure(tests, "example.com/fixture/calc/TestAdd/more")?.message).toBe(
      "calc_test.go:13: EXPECTED_SUM_MISMATCH add(2,3)=6",
    );
    expect(result.output).not.toContain('"Action"');
    expect(result.output).toMatch(/--- FAIL: TestAdd\/more/);
    expect(result.output).toMatch(/^FAIL\texample\.com\/fixture\/calc\t/m);

    const plain = await runSandboxed("go test ./...", { cwd: dir, timeoutMs: 180_000, cache });
    const fallback = new Map(readOutput(plain.output, ["/workspace", dir]));
    expect(fallback.get("go")?.map((t) => [t.id, t.status, t.message])).toEqual([
      [
        "example.com/fixture/calc/TestAdd/more",
        "failed",
        "calc_test.go:13: EXPECTED_SUM_MISMATCH add(2,3)=6",
      ],
    ]);
  });

  it("cargo test: libtest's lines and its failure sections", async () => {
    const dir = await fixture("cargo");
    const cache = await sandboxCache({ account: "test-runners", repo: "cargo" });
    const { tests } = await runWithTests("cargo test --offline", {
      cwd: dir,
      timeoutMs: 180_000,
      cache,
    });
    expect(tests).toMatchObject({ runner: "cargo", source: "output" });
    expect(statuses(tests)).toEqual({
      "tests::adds": "passed",
      "tests::later": "skipped",
      "tests::nested::adds_more": "failed",
    });
    expect(failure(tests, "tests::nested::adds_more")?.message).toMatch(
      /EXPECTED_SUM_MISMATCH\n\s*left: 6\n\s*right: 5/,
    );
  });
});

describe("what cannot be read per test", () => {
  it("a plain script that exits 1 with no failure words has no tests", async () => {
    const dir = await fixture("node-test");
    const outcome = await runChecks(
      {
        source: null,
        install: [],
        checks: [{ name: "script", command: "echo 'add(2,3)=6'; exit 1" }],
        notes: [],
      },
      { cwd: dir, timeoutMs: 30_000 },
    );
    expect(outcome.results[0]?.result.ok).toBe(false);
    expect(outcome.results[0]?.tests).toBeNull();
  });

  it("a failing command whose tests all pass is unexplained by them", async () => {
    const dir = await fixture("pytest");
    const { tests } = await runWithTests("pytest -k 'test_adds and not more'; exit 3", {
      cwd: dir,
      timeoutMs: 60_000,
    });
    expect(tests?.tests.every((t) => t.status !== "failed")).toBe(true);
    expect(tests?.unexplained).toBe(true);
  });
});
