/*
 * Runs a command through the sandbox with its test runner's report (instrument.ts) and reads
 * what it did test by test: the report when there is one, its output otherwise.
 */
// eslint-disable-next-line no-restricted-imports -- the run's exchange folder (not a working copy) and a path's resolution
import { realpath, writeFile } from "node:fs/promises";
import path from "node:path";
import { redactText } from "../../util/redact.js";
import {
  runSandboxed,
  WORKSPACE,
  type SandboxOptions,
  type SandboxResult,
} from "../../sandbox/index.js";
import { readCargoOutput } from "./cargo.js";
import { readGoJson, readGoText } from "./go.js";
import {
  EXCHANGE_VAR,
  instrument,
  nodeOptions,
  PYTEST_REPORT,
  type Instrumentation,
} from "./instrument.js";
import {
  JEST_REPORT,
  MOCHA_REPORT,
  MOCHA_REPORTER,
  MOCHA_REPORTER_SOURCE,
  readJestJson,
  readJestOutput,
  readMochaReport,
  readVitestOutput,
  VITEST_REPORT,
} from "./js.js";
import {
  NODE_REPORT,
  NODE_REPORTER,
  NODE_REPORTER_SOURCE,
  readNodeTestReport,
  readTap,
} from "./node-test.js";
import { readPytestJunit, readPytestOutput } from "./pytest.js";
import { readText } from "../../workcopy/fs.js";
import { MAX_REPORT_BYTES, MAX_TESTS, type TestResult, type TestRun } from "./types.js";
import { readUnittestOutput } from "./unittest.js";

const GENERATED_XML = /^-* generated xml file: \S*foreman-exchange\/pytest\.xml -*\n/m;
/** A go -json run's output kept before it is rendered back to text. */
const GO_JSON_OUTPUT_BYTES = 16 * 1024 * 1024;
/** The rendered text kept, as the sandbox keeps output: head and tail. */
const RENDERED_OUTPUT_CHARS = 64 * 1024;

export interface TestsRunResult {
  result: SandboxResult;
  tests: TestRun | null;
}

/** Report files read from the exchange folder, by name (absent: not written or too large). */
type Reports = Map<string, string>;

const REPORT_FILES = [NODE_REPORT, PYTEST_REPORT, VITEST_REPORT, JEST_REPORT, MOCHA_REPORT];

async function collect(dir: string, into: Reports): Promise<void> {
  for (const name of REPORT_FILES) {
    // Never through a link (the command could plant one pointing anywhere on the host), and
    // not a report so large that reading it would cost too much memory.
    const text = await readText(dir, name, { maxBytes: MAX_REPORT_BYTES });
    if (text !== undefined) into.set(name, text);
  }
}

/** The exchange folder's set-up: reporter modules written, the variables that name them. */
function exchange(
  plan: Instrumentation,
  reports: Reports,
): NonNullable<SandboxOptions["exchange"]> {
  return {
    async prepare(hostDir, innerDir) {
      const env: Record<string, string> = {
        [EXCHANGE_VAR]: innerDir,
        PYTEST_ADDOPTS: `--junitxml=${innerDir}/${PYTEST_REPORT}`,
      };
      if (plan.nodeTest) {
        await writeFile(path.join(hostDir, NODE_REPORTER), NODE_REPORTER_SOURCE);
        const major = Number(process.versions.node.split(".")[0]);
        env.NODE_OPTIONS = nodeOptions(`${innerDir}/${NODE_REPORTER}`, major);
      }
      if (plan.flags === "mocha")
        await writeFile(path.join(hostDir, MOCHA_REPORTER), MOCHA_REPORTER_SOURCE);
      return env;
    },
    collect: (hostDir) => collect(hostDir, reports),
  };
}

/*
 * A run whose added report flags or variables were refused (an old runner, a plugin
 * disabled, reporters the repository's config sets up otherwise) failed because of us.
 */
const REFUSED =
  /--test-reporter-destination'|unrecognized arguments: .*--junitxml|Unknown (option|argument).*(reporter|outputFile|json)|error: unknown (option|flag).*(reporter|json)|flag provided but not defined: -json|Cannot find module .*foreman-exchange/i;

/**
 * Runs `command` (a check) with its test runner's report and reads its tests. The result is
 * the sandbox's, its command the check's own and its output what the runner prints without
 * the report (go's JSON rendered back). `tests` is null when nothing can be read per test.
 */
export async function runWithTests(
  command: string,
  options: SandboxOptions,
): Promise<TestsRunResult> {
  const cwd = await realpath(options.cwd);
  const plan = await instrument(command, cwd, {
    mochaReporter: MOCHA_REPORTER,
    vitest: VITEST_REPORT,
    jest: JEST_REPORT,
  });
  const reports: Reports = new Map();
  let result = await runSandboxed(plan.command, {
    ...options,
    exchange: exchange(plan, reports),
    ...(plan.goJson
      ? { maxOutputBytes: Math.max(options.maxOutputBytes ?? 0, GO_JSON_OUTPUT_BYTES) }
      : {}),
  });
  let used = plan;
  if (!result.ok && !result.aborted && reports.size === 0 && REFUSED.test(result.output)) {
    // Run as it is; its output is all there is to read.
    used = { command, nodeTest: false, goJson: false, goVerbose: false };
    reports.clear();
    result = await runSandboxed(command, options);
  }
  const roots = [WORKSPACE, cwd, path.resolve(options.cwd)];
  const read = await readRun(result, used, reports, roots);
  return {
    result: { ...result, command: redactText(command), output: read.output },
    tests: read.tests,
  };
}

/** What a finished run did per test, from its reports or output. */
export async function readRun(
  result: SandboxResult,
  plan: Instrumentation,
  reports: Reports,
  roots: readonly string[],
): Promise<{ tests: TestRun | null; output: string }> {
  // pytest names the report it wrote; the run without it would not.
  let output = result.output.replace(GENERATED_XML, "");
  const runners: string[] = [];
  const tests: TestResult[] = [];
  const add = (runner: string, found: TestResult[]) => {
    if (found.length === 0 && runners.includes(runner)) return;
    runners.push(runner);
    tests.push(...found);
  };
  const fromReport = async (
    name: string,
    runner: string,
    read: (text: string) => TestResult[] | Promise<TestResult[]>,
  ) => {
    const text = reports.get(name);
    if (text === undefined) return;
    try {
      add(runner, await read(text));
    } catch {
      // a report cut short (the run was killed while writing it): the output is read instead
    }
  };
  await fromReport(NODE_REPORT, "node:test", (t) => readNodeTestReport(t, roots));
  await fromReport(PYTEST_REPORT, "pytest", (t) => readPytestJunit(t, roots[1] ?? ""));
  await fromReport(VITEST_REPORT, "vitest", (t) => readJestJson(t, roots));
  await fromReport(JEST_REPORT, "jest", (t) => readJestJson(t, roots));
  await fromReport(MOCHA_REPORT, "mocha", (t) => readMochaReport(t, roots));
  if (plan.goJson) {
    const go = readGoJson(output, plan.goVerbose);
    if (go.found) {
      add("go", go.tests);
      if (plan.flags === "go") output = headAndTail(redactText(go.text));
    }
  }
  let source: TestRun["source"] = "report";
  if (runners.length === 0) {
    source = "output";
    for (const [runner, found] of readOutput(output, roots)) add(runner, found);
  }
  if (runners.length === 0) return { tests: null, output };
  return { tests: testRun(runners, source, tests, result), output };
}

/** Every fallback reader's results from a run's text, by runner; only those that found tests. */
export function readOutput(
  output: string,
  roots: readonly string[],
): Array<[string, TestResult[]]> {
  const readers: Array<[string, () => TestResult[]]> = [
    ["cargo", () => readCargoOutput(output)],
    ["go", () => readGoText(output)],
    ["pytest", () => readPytestOutput(output)],
    ["unittest", () => readUnittestOutput(output)],
    ["node:test", () => readTap(output, roots)],
    ["vitest", () => readVitestOutput(output)],
    ["jest", () => readJestOutput(output)],
  ];
  return readers
    .map(([name, read]) => [name, read()] as [string, TestResult[]])
    .filter(([, found]) => found.length > 0);
}

/** The TestRun of what was read: redacted, capped, and whether the failure is explained. */
function testRun(
  runners: string[],
  source: TestRun["source"],
  found: TestResult[],
  result: SandboxResult,
): TestRun {
  const kept =
    found.length <= MAX_TESTS
      ? found
      : [
          ...found.filter((t) => t.status === "failed"),
          ...found.filter((t) => t.status !== "failed"),
        ].slice(0, MAX_TESTS);
  const tests = kept.map((t) => ({
    ...t,
    id: redactText(t.id),
    ...(t.message !== undefined ? { message: redactText(t.message) } : {}),
    ...(t.output !== undefined ? { output: redactText(t.output) } : {}),
  }));
  const run: TestRun = { runner: runners.join("+"), source, tests };
  if (!result.ok && (result.timedOut || !tests.some((t) => t.status === "failed")))
    run.unexplained = true;
  return run;
}

/** Text past RENDERED_OUTPUT_CHARS cut in the middle, as the sandbox cuts output. */
function headAndTail(text: string): string {
  if (text.length <= RENDERED_OUTPUT_CHARS) return text.replace(/^\n+/, "").trimEnd();
  const head = Math.floor(RENDERED_OUTPUT_CHARS / 4);
  return `${text.slice(0, head)}\n[… output cut …]\n${text.slice(text.length - (RENDERED_OUTPUT_CHARS - head))}`.trim();
}
