/*
 * node:test: a reporter of ours, added through NODE_OPTIONS beside the run's usual one on
 * stdout (`--test-reporter=<ours> --test-reporter-destination=stderr`, where it prints nothing), appends one JSON
 * line per test event to a file of the run's exchange folder; read here into results with
 * `file > suite > name` ids. The fallback reads node:test's TAP (its default output when
 * stdout is no terminal, up to Node 22).
 */
import { firstLines, mergeById, relativeFile, result } from "./text.js";
import type { TestResult } from "./types.js";

/** The reporter's file name in the exchange folder, and its report's. */
export const NODE_REPORTER = "node-test-reporter.mjs";
export const NODE_REPORT = "node-test.jsonl";

/*
 * The reporter module (ESM, no dependencies): opens the report in append mode (several
 * `node --test` in one command add up) and writes with writeSync, so nothing is lost when the
 * run ends with process.exit.
 */
export const NODE_REPORTER_SOURCE = `import { openSync, writeSync } from "node:fs";
const file = new URL("./${NODE_REPORT}", import.meta.url);
const text = (e) => (e == null ? undefined : String(e.message ?? e).slice(0, 4000));
const stack = (e) => (e && typeof e.stack === "string" ? e.stack.slice(0, 4000) : undefined);
export default async function* foremanReporter(source) {
  let fd;
  for await (const event of source) {
    if (event.type !== "test:start" && event.type !== "test:pass" && event.type !== "test:fail") continue;
    const d = event.data ?? {};
    const error = d.details?.error;
    const cause = error?.cause ?? error;
    const line = {
      event: event.type.slice(5),
      name: d.name,
      nesting: d.nesting,
      file: d.file,
      suite: d.details?.type === "suite",
      skip: d.skip !== undefined && d.skip !== false,
      todo: d.todo !== undefined && d.todo !== false,
      message: text(cause),
      stack: stack(cause),
    };
    fd ??= openSync(file, "a");
    writeSync(fd, JSON.stringify(line) + "\\n");
  }
}
`;

interface NodeEvent {
  event: "start" | "pass" | "fail";
  name?: string;
  nesting?: number;
  file?: string;
  suite?: boolean;
  skip?: boolean;
  todo?: boolean;
  message?: string;
  stack?: string;
}

function parseLines(text: string): NodeEvent[] {
  const events: NodeEvent[] = [];
  for (const line of text.split("\n")) {
    if (!line.trim()) continue;
    try {
      events.push(JSON.parse(line) as NodeEvent);
    } catch {
      // a line cut by a killed run
    }
  }
  return events;
}

/**
 * The results of our reporter's lines. A suite is a result only when it failed with no
 * failed test inside (a hook failed); a file that failed to load is one result, the file.
 */
export function readNodeTestReport(text: string, roots: readonly string[]): TestResult[] {
  const stacks = new Map<string, string[]>();
  const tests: TestResult[] = [];
  const failedSuites: TestResult[] = [];
  for (const e of parseLines(text)) {
    const file = e.file ? relativeFile(e.file, roots) : "";
    const stack = stacks.get(file) ?? [];
    stacks.set(file, stack);
    const nesting = e.nesting ?? 0;
    const name = e.name ?? "";
    if (e.event === "start") {
      stack.length = nesting;
      stack[nesting] = name;
      continue;
    }
    const parents = stack.slice(0, nesting);
    // A file-level failure is named by its path; ids never repeat the file.
    const titles = name === e.file || name === file ? parents : [...parents, name];
    const id = [file, ...titles].filter(Boolean).join(" > ");
    const status = e.skip || e.todo ? "skipped" : e.event === "pass" ? "passed" : "failed";
    const made = result(id, status, {
      message: e.message,
      output: status === "failed" ? e.stack : undefined,
      file: file || undefined,
    });
    if (e.suite) {
      if (status === "failed") failedSuites.push(made);
    } else tests.push(made);
  }
  for (const suite of failedSuites) {
    const inside = tests.some((t) => t.status === "failed" && t.id.startsWith(`${suite.id} > `));
    if (!inside) tests.push(suite);
  }
  return mergeById(tests);
}

/*
 * TAP 13 as node:test prints it: `# Subtest: name` opens a test at its indentation, `ok N -
 * name` / `not ok N - name # SKIP` closes it, a YAML block (`---` … `...`) after it says
 * its `location` and `error`. A test with subtests is a suite.
 */
const TAP_RESULT = /^(\s*)(not ok|ok) \d+ - (.*?)(?:\s+#\s*(SKIP|TODO)\b.*)?$/i;
const TAP_SUBTEST = /^(\s*)# Subtest: (.*)$/;

interface TapOpen {
  name: string;
  depth: number;
  children: number;
}

/** Results read from node:test's (or another nested) TAP output; empty when there is none. */
export function readTap(output: string, roots: readonly string[]): TestResult[] {
  const lines = output.split("\n");
  const open: TapOpen[] = [];
  const tests: TestResult[] = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const sub = TAP_SUBTEST.exec(line);
    if (sub) {
      const depth = sub[1]!.length;
      while (open.length > 0 && open.at(-1)!.depth >= depth) open.pop();
      if (open.length > 0) open.at(-1)!.children++;
      open.push({ name: sub[2]!, depth, children: 0 });
      continue;
    }
    const res = TAP_RESULT.exec(line);
    if (!res) continue;
    const depth = res[1]!.length;
    while (open.length > 0 && open.at(-1)!.depth > depth) open.pop();
    const self = open.at(-1)?.depth === depth ? open.pop() : undefined;
    const yaml = tapYaml(lines, i + 1, depth);
    const location = /^location: '?(.*?):\d+:\d+'?$/m.exec(yaml)?.[1];
    const file = location ? relativeFile(location, roots) : undefined;
    const names = [...open.map((o) => o.name), self?.name ?? res[3]!];
    const status = res[4] ? "skipped" : res[2] === "ok" ? "passed" : "failed";
    const suite = (self?.children ?? 0) > 0;
    if (!suite || (status === "failed" && !/subtests? failed/.test(yaml)))
      tests.push(
        // Names only: node's TAP tells a passing test's file nowhere, and ids must match.
        result(names.join(" > "), status, {
          message: tapError(yaml),
          output: status === "failed" ? yaml : undefined,
          file,
        }),
      );
  }
  return mergeById(tests);
}

/** The YAML block right after line `from`, or "". */
function tapYaml(lines: string[], from: number, depth: number): string {
  if (lines[from]?.trim() !== "---") return "";
  const body: string[] = [];
  for (let j = from + 1; j < lines.length && lines[j]!.trim() !== "..."; j++)
    body.push(lines[j]!.slice(depth + 2));
  return body.join("\n");
}

/** A YAML block's `error:` (a `|-` block or one line). */
function tapError(yaml: string): string | undefined {
  const m = /^error: (?:\|-?\n((?: {2}.*\n?)+)|'?(.*?)'?$)/m.exec(yaml);
  if (!m) return undefined;
  return firstLines(m[1] ? m[1].replace(/^ {2}/gm, "") : m[2]);
}
