/*
 * go test: `-json` added to a plain `go test` command (test2json's events on stdout), read
 * into `pkg/TestName/sub` results and rendered back into the text go test prints without
 * it, for the log and the model. The fallback reads go test's text (`--- FAIL: TestX`).
 */
import { mergeById, result } from "./text.js";
import type { TestResult } from "./types.js";

interface GoEvent {
  Action?: string;
  Package?: string;
  ImportPath?: string;
  Test?: string;
  Output?: string;
  FailedBuild?: string;
}

export interface GoRead {
  tests: TestResult[];
  /** The output as go test prints it without -json (verbose when `verbose`). */
  text: string;
  /** False when the output held no test2json event. */
  found: boolean;
}

const PROGRESS = /^=== (RUN|PAUSE|CONT|NAME)\s/;
/** A test's own output kept while it runs: enough for its failure's lines. */
const KEEP_PER_TEST = 16 * 1024;

/** Reads `go test -json` output; lines that are not events are kept in the text as they are. */
export function readGoJson(output: string, verbose: boolean): GoRead {
  const text: string[] = [];
  const outputs = new Map<string, string>();
  const tests: TestResult[] = [];
  /** Build output by import path, for the package whose build failed. */
  const builds = new Map<string, string>();
  let found = false;
  for (const line of output.split("\n")) {
    const event = parseEvent(line);
    if (!event) {
      if (line !== "") text.push(`${line}\n`);
      continue;
    }
    found = true;
    const pkg = event.Package ?? event.ImportPath ?? "";
    const key = `${pkg}\u0000${event.Test ?? ""}`;
    if (event.Action === "output" || event.Action === "build-output") {
      const out = event.Output ?? "";
      if (event.Action === "build-output") {
        const kept = (builds.get(pkg) ?? "") + out;
        builds.set(pkg, kept.length > KEEP_PER_TEST ? kept.slice(-KEEP_PER_TEST) : kept);
      } else if (event.Test) {
        const kept = (outputs.get(key) ?? "") + out;
        outputs.set(key, kept.length > KEEP_PER_TEST ? kept.slice(-KEEP_PER_TEST) : kept);
      }
      if (verbose || !event.Test) text.push(out);
      continue;
    }
    if (event.Action !== "pass" && event.Action !== "fail" && event.Action !== "skip") continue;
    if (!event.Test) {
      // A package that failed without a failed test: did not build, or crashed.
      if (event.Action === "fail") {
        const build = event.FailedBuild ? builds.get(event.FailedBuild) : undefined;
        tests.push(
          result(pkg, "failed", {
            message: build ?? (event.FailedBuild ? "build failed" : "package failed"),
            output: build,
          }),
        );
      }
      continue;
    }
    const own = outputs.get(key) ?? "";
    outputs.delete(key);
    const shown = own
      .split("\n")
      .filter((l) => !PROGRESS.test(l))
      .join("\n");
    // In the order `go test -v` prints them: a test's lines, then its parent's.
    if (!verbose && event.Action === "fail") text.push(`${shown.trimEnd()}\n`);
    const status =
      event.Action === "pass" ? "passed" : event.Action === "skip" ? "skipped" : "failed";
    tests.push(
      result(`${pkg}/${event.Test}`, status, {
        message: status === "failed" ? goMessage(shown) : undefined,
        output: status === "failed" ? shown : undefined,
      }),
    );
  }
  return { tests: withoutParentFailures(mergeById(tests)), text: text.join(""), found };
}

function parseEvent(line: string): GoEvent | undefined {
  if (!line.startsWith("{")) return undefined;
  try {
    const value = JSON.parse(line) as unknown;
    return value && typeof value === "object" && "Action" in value ? (value as GoEvent) : undefined;
  } catch {
    return undefined;
  }
}

/** The lines a test logged (t.Errorf, panics), without go's `--- FAIL` header. */
function goMessage(shown: string): string {
  return shown
    .split("\n")
    .filter((l) => !/^\s*--- (FAIL|PASS|SKIP):/.test(l))
    .map((l) => l.trim())
    .filter(Boolean)
    .join("\n");
}

/*
 * go fails a parent test when a subtest fails; the parent is no failure of its own unless
 * it failed with none of its subtests failing. A package's own failure goes the same way.
 */
function withoutParentFailures(tests: TestResult[]): TestResult[] {
  const failed = tests.filter((t) => t.status === "failed").map((t) => t.id);
  return tests.filter(
    (t) => t.status !== "failed" || !failed.some((other) => other.startsWith(`${t.id}/`)),
  );
}

const GO_LINE = /^(\s*)--- (PASS|FAIL|SKIP): (\S+) \(/;
const GO_PACKAGE = /^(ok|FAIL|---)\s+(\S+)\s/;

/**
 * go test's text: `--- FAIL: TestX/sub (0.00s)` lines (passes too with -v) with the lines
 * indented under them; the package from the `FAIL\tpkg` / `ok  \tpkg` line after them.
 */
export function readGoText(output: string): TestResult[] {
  const lines = output.split("\n");
  const pending: Array<{ name: string; status: TestResult["status"]; body: string[] }> = [];
  const tests: TestResult[] = [];
  let current: { indent: number; body: string[] } | undefined;
  for (const line of lines) {
    const m = GO_LINE.exec(line);
    if (m) {
      const status = m[2] === "PASS" ? "passed" : m[2] === "SKIP" ? "skipped" : "failed";
      const entry = { name: m[3]!, status: status as TestResult["status"], body: [] as string[] };
      pending.push(entry);
      current = { indent: m[1]!.length, body: entry.body };
      continue;
    }
    const pkg = GO_PACKAGE.exec(line);
    if (pkg && (pkg[1] === "ok" || pkg[1] === "FAIL")) {
      for (const p of pending)
        tests.push(
          result(`${pkg[2]}/${p.name}`, p.status, {
            message: p.body.join("\n"),
            output: p.body.join("\n"),
          }),
        );
      pending.length = 0;
      current = undefined;
      continue;
    }
    if (current && line.startsWith(" ".repeat(current.indent + 4))) current.body.push(line.trim());
    else current = undefined;
  }
  for (const p of pending) tests.push(result(p.name, p.status, { message: p.body.join("\n") }));
  return withoutParentFailures(mergeById(tests));
}
