/*
 * Python's unittest has no report: its text is read. With -v each test has a line
 * `test_b (pkg.mod.TestX.test_b) ... FAIL`; without it only failures and errors are named,
 * in `FAIL: test_b (pkg.mod.TestX.test_b)` blocks with their tracebacks. Ids are unittest's
 * own, `pkg.mod.TestX.test_b` (a subtest's parameters appended).
 */
import { mergeById, result } from "./text.js";
import type { TestResult, TestStatus } from "./types.js";

const VERBOSE =
  /^(\w+) \(([\w.]+)\)(?: \((.*)\))? \.\.\. (ok|FAIL|ERROR|skipped\b.*|expected failure|unexpected success)$/;
const BLOCK = /^(FAIL|ERROR|UNEXPECTED SUCCESS): (\w+) \(([\w.]+)\)(?: \((.*)\))?$/;
const RULE = /^(=|-){20,}$/;

/** unittest's id: Python 3.11+ prints the whole id in parentheses, older ones the class. */
function unittestId(name: string, inParens: string, params: string | undefined): string {
  const base = inParens.endsWith(`.${name}`) ? inParens : `${inParens}.${name}`;
  return params ? `${base} (${params})` : base;
}

function verboseStatus(word: string): TestStatus {
  if (word === "ok" || word === "expected failure") return "passed";
  if (word.startsWith("skipped")) return "skipped";
  return "failed";
}

/** unittest's results from its text; empty when unittest did not print. */
export function readUnittestOutput(output: string): TestResult[] {
  const lines = output.split("\n").map((l) => l.trimEnd());
  const tests: TestResult[] = [];
  for (const [i, line] of lines.entries()) {
    const v = VERBOSE.exec(line);
    if (v) {
      tests.push(result(unittestId(v[1]!, v[2]!, v[3]), verboseStatus(v[4]!), {}));
      continue;
    }
    const b = BLOCK.exec(line);
    if (!b || !RULE.test(lines[i - 1] ?? "")) continue;
    const body: string[] = [];
    let j = i + 1;
    if (RULE.test(lines[j] ?? "")) j++;
    for (; j < lines.length && !RULE.test(lines[j]!); j++) body.push(lines[j]!);
    const text = body.join("\n").trim();
    // The exception's lines: what is not the traceback's frames.
    const message = body
      .filter((l) => l !== "" && !/^\s/.test(l) && !l.startsWith("Traceback ("))
      .join("\n");
    tests.push(
      result(unittestId(b[2]!, b[3]!, b[4]), "failed", { message: message || text, output: text }),
    );
  }
  // Only summaries show that unittest ran at all; none of its lines: not unittest.
  return mergeById(tests);
}
