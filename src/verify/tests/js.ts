/*
 * vitest, jest and mocha. vitest's and jest's JSON reports (jest's format, which vitest's
 * `json` reporter writes too) and a mocha reporter of ours (mocha's spec output on stdout as
 * usual, one JSON line per test to the exchange folder). Ids: `file > suite > name`. The
 * fallbacks read the failures their default reporters print.
 */
import { mergeById, relativeFile, result } from "./text.js";
import type { TestResult, TestStatus } from "./types.js";

export const VITEST_REPORT = "vitest.json";
export const JEST_REPORT = "jest.json";
export const MOCHA_REPORTER = "mocha-reporter.cjs";
export const MOCHA_REPORT = "mocha.jsonl";

interface JestAssertion {
  ancestorTitles?: string[];
  title?: string;
  status?: string;
  failureMessages?: string[] | null;
}
interface JestFile {
  name?: string;
  status?: string;
  message?: string;
  assertionResults?: JestAssertion[];
}

function jestStatus(status: string | undefined): TestStatus {
  if (status === "passed") return "passed";
  if (status === "failed") return "failed";
  return "skipped"; // pending, skipped, todo, disabled, focused-out
}

/** Results of a jest (or vitest `json`) report; a file that failed with no test is one result. */
export function readJestJson(text: string, roots: readonly string[]): TestResult[] {
  const report = JSON.parse(text) as { testResults?: JestFile[] };
  const tests: TestResult[] = [];
  for (const file of report.testResults ?? []) {
    const rel = relativeFile(file.name ?? "", roots);
    const cases = file.assertionResults ?? [];
    for (const c of cases) {
      const failure = (c.failureMessages ?? []).join("\n");
      tests.push(
        result(
          [rel, ...(c.ancestorTitles ?? []), c.title ?? ""].join(" > "),
          jestStatus(c.status),
          {
            message: failure,
            output: failure,
            file: rel,
          },
        ),
      );
    }
    if (file.status === "failed" && !cases.some((c) => c.status === "failed"))
      tests.push(result(rel, "failed", { message: file.message, output: file.message, file: rel }));
  }
  return mergeById(tests);
}

/*
 * The mocha reporter (CommonJS, as mocha loads reporters): mocha's own Spec reporter from the
 * repository's mocha keeps stdout as it was; each test's end appends a line.
 */
export const MOCHA_REPORTER_SOURCE = `"use strict";
const fs = require("fs");
const path = require("path");
function mocha() {
  for (const from of [process.cwd(), __dirname]) {
    try { return require(require.resolve("mocha", { paths: [from] })); } catch {}
  }
  return undefined;
}
module.exports = function ForemanReporter(runner, options) {
  const Mocha = mocha();
  if (Mocha && Mocha.reporters && Mocha.reporters.Spec) new Mocha.reporters.Spec(runner, options);
  let fd;
  const write = (test, state, err) => {
    fd = fd === undefined ? fs.openSync(path.join(__dirname, "${MOCHA_REPORT}"), "a") : fd;
    const titles = typeof test.titlePath === "function" ? test.titlePath() : [test.title];
    const line = { file: test.file, titles, state, hook: test.type === "hook",
      message: err ? String(err.message).slice(0, 4000) : undefined,
      stack: err && err.stack ? String(err.stack).slice(0, 4000) : undefined };
    fs.writeSync(fd, JSON.stringify(line) + "\\n");
  };
  runner.on("pass", (t) => write(t, "passed"));
  runner.on("fail", (t, err) => write(t, "failed", err));
  runner.on("pending", (t) => write(t, "skipped"));
};
`;

interface MochaLine {
  file?: string;
  titles?: string[];
  state?: TestStatus;
  hook?: boolean;
  message?: string;
  stack?: string;
}

/** Results of our mocha reporter's lines (a failed hook is a result of its own). */
export function readMochaReport(text: string, roots: readonly string[]): TestResult[] {
  const tests: TestResult[] = [];
  for (const line of text.split("\n")) {
    if (!line.trim()) continue;
    let e: MochaLine;
    try {
      e = JSON.parse(line) as MochaLine;
    } catch {
      continue;
    }
    const rel = e.file ? relativeFile(e.file, roots) : undefined;
    const id = [...(rel ? [rel] : []), ...(e.titles ?? [])].join(" > ");
    tests.push(result(id, e.state ?? "failed", { message: e.message, output: e.stack, file: rel }));
  }
  return mergeById(tests);
}

/*
 * Text fallbacks. vitest: ` FAIL  test/a.test.ts > outer > fails` heads each failure, its
 * message on the next lines; ` ✓ test/a.test.ts (3 tests)` lines name whole files.
 * jest: ` FAIL  test/a.test.js` names the file, `● outer › fails` each failure.
 */
const VITEST_FAIL = /^\s*FAIL\s+(\S+?\.[cm]?[jt]sx?)\s+>\s+(.+?)\s*$/;
const JEST_FILE = /^\s*(FAIL|PASS)\s+(\S+?\.[cm]?[jt]sx?)\b/;
const JEST_FAIL = /^\s*● (.+?)\s*$/;

/** The failures vitest's default reporter printed. */
export function readVitestOutput(output: string): TestResult[] {
  const lines = output.split("\n");
  const tests: TestResult[] = [];
  for (const [i, line] of lines.entries()) {
    const m = VITEST_FAIL.exec(line);
    if (!m) continue;
    const body = following(lines, i + 1);
    tests.push(result(`${m[1]} > ${m[2]}`, "failed", { message: body, output: body, file: m[1] }));
  }
  return mergeById(tests);
}

/** The failures jest's default reporter printed (`● suite › name` under `FAIL file`). */
export function readJestOutput(output: string): TestResult[] {
  const lines = output.split("\n");
  const tests: TestResult[] = [];
  let file: string | undefined;
  for (const [i, line] of lines.entries()) {
    const f = JEST_FILE.exec(line);
    if (f) {
      file = f[2];
      continue;
    }
    const m = JEST_FAIL.exec(line);
    if (!m || !file || m[1]!.startsWith("Console")) continue;
    const body = following(lines, i + 1);
    const titles = m[1]!.split(" › ");
    tests.push(
      result([file, ...titles].join(" > "), "failed", { message: body, output: body, file }),
    );
  }
  return mergeById(tests);
}

/** The lines after a failure's head up to the next blank line after some text. */
function following(lines: string[], from: number): string {
  const body: string[] = [];
  for (let j = from; j < lines.length && body.length < 40; j++) {
    const line = lines[j]!;
    if (VITEST_FAIL.test(line) || JEST_FAIL.test(line) || /^\s*⎯{3,}/.test(line)) break;
    body.push(line);
  }
  return body.join("\n").trim();
}
