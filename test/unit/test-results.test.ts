import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readCargoOutput } from "../../src/verify/tests/cargo.js";
import { readGoJson, readGoText } from "../../src/verify/tests/go.js";
import { instrument, isSimpleCommand } from "../../src/verify/tests/instrument.js";
import { readJestJson, readJestOutput, readVitestOutput } from "../../src/verify/tests/js.js";
import { parseJunitCases } from "../../src/verify/tests/junit.js";
import { readNodeTestReport, readTap } from "../../src/verify/tests/node-test.js";
import { readPytestJunit } from "../../src/verify/tests/pytest.js";
import { failureSignature, readOutput } from "../../src/verify/tests/index.js";
import { readUnittestOutput } from "../../src/verify/tests/unittest.js";

/*
 * The readers of verify/tests on captured reports and outputs (each runner's real format,
 * copied from a run), the instrumentation's choices, and failure signatures.
 */

const ids = (tests: Array<{ id: string; status: string }>) =>
  tests.map((t) => `${t.status} ${t.id}`);

let root = "";
const FILES = { mochaReporter: "m.cjs", vitest: "v.json", jest: "j.json" };

beforeAll(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), "foreman-test-results-"));
  await mkdir(path.join(root, "tests/unit"), { recursive: true });
  await writeFile(path.join(root, "tests/unit/test_calc.py"), "");
  await writeFile(
    path.join(root, "package.json"),
    JSON.stringify({
      scripts: {
        test: "vitest run",
        unit: "jest --ci",
        spec: "mocha --reporter dot",
        node: "node --test",
        both: "eslint . && vitest run",
      },
    }),
  );
});

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

describe("fallback readers on captured output", () => {
  it("reads node:test's TAP with nested suites, skips and the failure's error", () => {
    const tap = `TAP version 13
# Subtest: calc
    # Subtest: adds
    ok 1 - adds
      ---
      duration_ms: 0.5
      ...
    # Subtest: nested
        # Subtest: adds more
        not ok 1 - adds more
          ---
          duration_ms: 1.1
          location: '/workspace/test/calc.test.js:10:5'
          failureType: 'testCodeFailure'
          error: |-
            EXPECTED_SUM_MISMATCH add(2,3)=6
          code: 'ERR_ASSERTION'
          ...
        1..1
    not ok 2 - nested
      ---
      duration_ms: 1.3
      type: 'suite'
      location: '/workspace/test/calc.test.js:8:3'
      failureType: 'subtestsFailed'
      error: '1 subtest failed'
      ...
    # Subtest: later
    ok 3 - later # SKIP
      ---
      duration_ms: 0.1
      ...
    1..3
not ok 1 - calc
  ---
  error: '1 subtest failed'
  ...
1..1
# tests 3
`;
    const tests = readTap(tap, ["/workspace"]);
    expect(ids(tests)).toEqual([
      "passed calc > adds",
      "failed calc > nested > adds more",
      "skipped calc > later",
    ]);
    expect(tests[1]).toMatchObject({
      message: "EXPECTED_SUM_MISMATCH add(2,3)=6",
      file: "test/calc.test.js",
    });
  });

  it("reads go test's text: failed subtests, not their parents, with their lines", () => {
    const out = `--- FAIL: TestAdd (0.00s)
    --- FAIL: TestAdd/more (0.00s)
        calc_test.go:13: EXPECTED_SUM_MISMATCH add(2,3)=6
FAIL
FAIL	example.com/fixture/calc	0.004s
ok  	example.com/fixture/other	0.002s
FAIL
`;
    const tests = readGoText(out);
    expect(ids(tests)).toEqual(["failed example.com/fixture/calc/TestAdd/more"]);
    expect(tests[0]?.message).toBe("calc_test.go:13: EXPECTED_SUM_MISMATCH add(2,3)=6");
  });

  it("reads go test -json, a package that did not build as one failure with its errors", () => {
    const json = [
      `{"ImportPath":"example.com/x [example.com/x.test]","Action":"build-output","Output":"# example.com/x\\n"}`,
      `{"ImportPath":"example.com/x [example.com/x.test]","Action":"build-output","Output":"./x.go:3:1: syntax error\\n"}`,
      `{"ImportPath":"example.com/x [example.com/x.test]","Action":"build-fail"}`,
      `{"Action":"start","Package":"example.com/x"}`,
      `{"Action":"output","Package":"example.com/x","Output":"FAIL\\texample.com/x [build failed]\\n"}`,
      `{"Action":"fail","Package":"example.com/x","Elapsed":0,"FailedBuild":"example.com/x [example.com/x.test]"}`,
    ].join("\n");
    const read = readGoJson(json, false);
    expect(ids(read.tests)).toEqual(["failed example.com/x"]);
    expect(read.tests[0]?.message).toContain("./x.go:3:1: syntax error");
    expect(read.text).toBe(
      "# example.com/x\n./x.go:3:1: syntax error\nFAIL\texample.com/x [build failed]\n",
    );
  });

  it("reads vitest's and jest's default reporters' failures", () => {
    const vitest = ` ❯ test/calc.test.js (3 tests | 1 failed | 1 skipped) 6ms
   × calc > nested > adds more 4ms
     → EXPECTED_SUM_MISMATCH: expected 6 to be 5

⎯⎯⎯⎯⎯⎯⎯ Failed Tests 1 ⎯⎯⎯⎯⎯⎯⎯

 FAIL  test/calc.test.js > calc > nested > adds more
AssertionError: EXPECTED_SUM_MISMATCH: expected 6 to be 5 // Object.is equality
`;
    expect(ids(readVitestOutput(vitest))).toEqual([
      "failed test/calc.test.js > calc > nested > adds more",
    ]);
    expect(readVitestOutput(vitest)[0]?.message).toContain("expected 6 to be 5");

    const jest = `FAIL test/calc.test.js
  calc
    ✓ adds (2 ms)
    nested
      ✕ adds more (3 ms)
    ○ skipped later

  ● calc › nested › adds more

    expect(received).toBe(expected) // Object.is equality

    Expected: 5
    Received: 6
`;
    const read = readJestOutput(jest);
    expect(ids(read)).toEqual(["failed test/calc.test.js > calc > nested > adds more"]);
    expect(read[0]?.message).toMatch(/Expected: 5\s+Received: 6/);
  });

  it("reads unittest without -v (failures and errors only) and cargo's libtest", () => {
    const unittest = `.FE
======================================================================
ERROR: test_boom (pkg.test_x.TestX.test_boom)
----------------------------------------------------------------------
Traceback (most recent call last):
  File "/workspace/pkg/test_x.py", line 9, in test_boom
    raise ValueError("boom")
ValueError: boom

======================================================================
FAIL: test_sum (pkg.test_x.TestX)
----------------------------------------------------------------------
Traceback (most recent call last):
  File "/workspace/pkg/test_x.py", line 6, in test_sum
    self.assertEqual(1, 2)
AssertionError: 1 != 2

----------------------------------------------------------------------
Ran 3 tests in 0.001s

FAILED (failures=1, errors=1)
`;
    const tests = readUnittestOutput(unittest);
    expect(ids(tests)).toEqual([
      "failed pkg.test_x.TestX.test_boom",
      "failed pkg.test_x.TestX.test_sum",
    ]);
    expect(tests.map((t) => t.message)).toEqual(["ValueError: boom", "AssertionError: 1 != 2"]);

    const cargo = `running 2 tests
test tests::a ... ok
test tests::b ... FAILED

failures:

---- tests::b stdout ----

thread 'tests::b' panicked at src/lib.rs:9:5:
assertion failed: false
note: run with \`RUST_BACKTRACE=1\` environment variable to display a backtrace


failures:
    tests::b

test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s
`;
    expect(ids(readCargoOutput(cargo))).toEqual(["passed tests::a", "failed tests::b"]);
    expect(readCargoOutput(cargo)[1]?.message).toBe("assertion failed: false");
  });

  it("finds nothing in a plain script's output", () => {
    expect(
      readOutput("add(2,3)=6\nEXPECTED_SUM_MISMATCH\nerror: 1 failed\n", ["/workspace"]),
    ).toEqual([]);
  });
});

describe("reports", () => {
  it("reads pytest's JUnit XML into node ids (entities, CDATA, errors in teardown)", async () => {
    const xml = `<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.unit.test_calc.TestCalc" name="test_ok[a&amp;b]" time="0.001" />
<testcase classname="tests.unit.test_calc.TestCalc" name="test_bad" time="0.002"><failure message="AssertionError: 6 == 5&#10;assert 6 == 5"><![CDATA[def test_bad():
>       assert add(2, 3) == 5
E       assert 6 == 5]]></failure></testcase>
<testcase classname="tests.unit.test_calc" name="test_skip"><skipped type="pytest.skip" message="later">later</skipped></testcase>
<testcase classname="tests.unit.test_calc" name="test_teardown"><error message="failed on teardown with &quot;boom&quot;">boom</error></testcase>
</testsuite></testsuites>`;
    expect(parseJunitCases(xml)[1]?.output).toContain("E       assert 6 == 5");
    const tests = await readPytestJunit(xml, root);
    expect(ids(tests)).toEqual([
      "passed tests/unit/test_calc.py::TestCalc::test_ok[a&b]",
      "failed tests/unit/test_calc.py::TestCalc::test_bad",
      "skipped tests/unit/test_calc.py::test_skip",
      "failed tests/unit/test_calc.py::test_teardown",
    ]);
    expect(tests[1]?.message).toBe("AssertionError: 6 == 5\nassert 6 == 5");
    expect(tests[3]?.message).toBe('failed on teardown with "boom"');
  });

  it("reads our node:test reporter's lines: a suite only when its hook failed", () => {
    const lines = [
      { event: "start", name: "calc", nesting: 0, file: "/workspace/test/a.test.js" },
      { event: "start", name: "adds", nesting: 1, file: "/workspace/test/a.test.js" },
      { event: "pass", name: "adds", nesting: 1, file: "/workspace/test/a.test.js" },
      {
        event: "fail",
        name: "calc",
        nesting: 0,
        file: "/workspace/test/a.test.js",
        suite: true,
        message: "before hook: boom",
      },
      {
        event: "fail",
        name: "/workspace/test/b.test.js",
        nesting: 0,
        file: "/workspace/test/b.test.js",
        message: "SyntaxError: Unexpected token",
      },
    ];
    const tests = readNodeTestReport(lines.map((l) => JSON.stringify(l)).join("\n") + "\n{cut", [
      "/workspace",
    ]);
    expect(ids(tests)).toEqual([
      "passed test/a.test.js > calc > adds",
      "failed test/b.test.js",
      "failed test/a.test.js > calc",
    ]);
  });

  it("reads jest's JSON: a file that failed to run is one failure", () => {
    const report = {
      testResults: [
        {
          name: "/workspace/test/a.test.js",
          status: "passed",
          message: "",
          assertionResults: [
            { ancestorTitles: ["calc"], title: "adds", status: "passed", failureMessages: [] },
            { ancestorTitles: ["calc"], title: "todo", status: "todo", failureMessages: [] },
          ],
        },
        {
          name: "/workspace/test/b.test.js",
          status: "failed",
          message: "Cannot find module './x'",
          assertionResults: [],
        },
      ],
    };
    expect(ids(readJestJson(JSON.stringify(report), ["/workspace"]))).toEqual([
      "passed test/a.test.js > calc > adds",
      "skipped test/a.test.js > calc > todo",
      "failed test/b.test.js",
    ]);
  });
});

describe("instrumentation", () => {
  it("appends report flags only to plain invocations and plain npm scripts", async () => {
    const flags = async (command: string) => (await instrument(command, root, FILES)).flags;
    expect(await flags("npx vitest run")).toBe("vitest");
    expect(await flags("CI=1 ./node_modules/.bin/jest --ci")).toBe("jest");
    expect(await flags("npm test")).toBe("vitest");
    expect(await flags("npm run unit -- --runInBand")).toBe("jest");
    expect((await instrument("npm run unit -- --runInBand", root, FILES)).command).toBe(
      'npm run unit -- --runInBand --json --outputFile="$FOREMAN_TEST_REPORT_DIR"/j.json',
    );
    // Its own reporter, a compound script or command, an unknown script: left as they are.
    expect(await flags("npm run spec")).toBeUndefined();
    expect(await flags("npm run both")).toBeUndefined();
    expect(await flags("npx vitest run && echo done")).toBeUndefined();
    expect(await flags("npm run missing")).toBeUndefined();
    expect(await flags("npx vitest run # note")).toBeUndefined();
  });

  it("adds -json to a plain go test, never to go vet or a compound command", async () => {
    expect((await instrument("go test -count=1 ./...", root, FILES)).command).toBe(
      "go test -json -count=1 ./...",
    );
    expect((await instrument("go vet ./... && go test ./...", root, FILES)).command).toBe(
      "go vet ./... && go test ./...",
    );
    expect((await instrument("go test -v ./...", root, FILES)).goVerbose).toBe(true);
    expect((await instrument("go test -c -o calc.test ./calc", root, FILES)).goJson).toBe(false);
  });

  it("adds node:test's reporter where node --test is visible and chooses no reporter", async () => {
    expect((await instrument("npm run node", root, FILES)).nodeTest).toBe(true);
    expect((await instrument("node --test test/", root, FILES)).nodeTest).toBe(true);
    expect((await instrument("node --test --test-reporter=dot", root, FILES)).nodeTest).toBe(false);
    expect((await instrument("make test", root, FILES)).nodeTest).toBe(false);
  });

  it("tells simple commands from compound ones", () => {
    expect(isSimpleCommand(`jest -t 'adds; more'`)).toBe(true);
    expect(isSimpleCommand("jest | tee out")).toBe(false);
    expect(isSimpleCommand("jest $(cat args)")).toBe(false);
    expect(isSimpleCommand(`jest "unbalanced`)).toBe(false);
  });
});

describe("failureSignature", () => {
  it("is the same for one failure in two checkouts and runs, different for other values", () => {
    const a = {
      id: "t",
      status: "failed" as const,
      message: "AssertionError at /srv/work/a1/test/x.test.js:10:5 (12ms): 6 !== 5 pid 4242",
    };
    const b = {
      ...a,
      message: "AssertionError at /srv/work/b2/test/x.test.js:11:7 (3 ms): 6 !== 5 pid 99",
    };
    const c = {
      ...a,
      message: "AssertionError at /srv/work/a1/test/x.test.js:10:5 (12ms): 0 !== 5 pid 1",
    };
    expect(failureSignature(a, ["/srv/work/a1"])).toBe(failureSignature(b, ["/srv/work/b2"]));
    expect(failureSignature(a, ["/srv/work/a1"])).not.toBe(failureSignature(c, ["/srv/work/a1"]));
    expect(failureSignature({ id: "t", status: "passed" }, [])).toBe("");
  });
});
