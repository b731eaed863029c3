/*
 * pytest: its JUnit XML report (`--junitxml`, added through PYTEST_ADDOPTS so the command is
 * untouched), ids made into pytest's node ids (`tests/test_a.py::TestX::test_y[1]`); and, as a
 * fallback, the lines of `-rA`/`-ra` summaries and the `FAILED id - message` lines pytest
 * prints by default.
 */
import { entryInfo } from "../../workcopy/fs.js";
import { parseJunitCases, junitResults, type JunitCase } from "./junit.js";
import { mergeById, result } from "./text.js";
import type { TestResult } from "./types.js";

/**
 * pytest's node id of a JUnit case: its classname is the module's dotted path (from the
 * rootdir) and the classes; the longest prefix naming a .py file under `root` is the file.
 */
export async function pytestNodeId(
  c: JunitCase,
  root: string,
  known = new Map<string, boolean>(),
): Promise<string> {
  const parts = c.classname.split(".").filter(Boolean);
  const isFile = async (rel: string) => {
    let seen = known.get(rel);
    if (seen === undefined) known.set(rel, (seen = (await entryInfo(root, rel))?.type === "file"));
    return seen;
  };
  for (let i = parts.length; i > 0; i--) {
    const rel = `${parts.slice(0, i).join("/")}.py`;
    if (await isFile(rel)) return [rel, ...parts.slice(i), c.name].join("::");
  }
  // No file found (another rootdir): the classname as pytest wrote it.
  return c.classname ? `${c.classname}::${c.name}` : c.name;
}

/** The results of a pytest JUnit XML report, ids relative to the working copy `root`. */
export async function readPytestJunit(xml: string, root: string): Promise<TestResult[]> {
  const known = new Map<string, boolean>();
  const cases = parseJunitCases(xml);
  const ids = new Map<JunitCase, string>();
  for (const c of cases) ids.set(c, await pytestNodeId(c, root, known));
  return mergeById(junitResults(cases, (c) => ids.get(c) ?? c.name));
}

const SUMMARY = /^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\s+(\S+::\S+|\S+\.py)(?:\s+-\s+(.*))?$/;
const VERBOSE = /^(\S+\.py::\S+)\s+(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b/;

/**
 * pytest's text: short test summary lines (`FAILED tests/a.py::t - assert 1 == 2`, all of
 * them with -rA) and verbose lines (`tests/a.py::t PASSED [ 50%]`). Empty when pytest is not
 * what printed.
 */
export function readPytestOutput(output: string): TestResult[] {
  const found: TestResult[] = [];
  for (const raw of output.split("\n")) {
    const line = raw.trimEnd();
    const summary = SUMMARY.exec(line);
    const verbose = summary ? null : VERBOSE.exec(line);
    if (!summary && !verbose) continue;
    const [word, id, message] = summary
      ? [summary[1]!, summary[2]!, summary[3]]
      : [verbose![2]!, verbose![1]!, undefined];
    const status =
      word === "FAILED" || word === "ERROR"
        ? "failed"
        : word === "SKIPPED" || word === "XFAIL"
          ? "skipped"
          : "passed";
    found.push(result(id, status, { message, file: id.split("::")[0] }));
  }
  return mergeById(found);
}
