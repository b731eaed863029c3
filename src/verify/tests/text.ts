/*
 * Small text helpers of the readers: capping messages and outputs, and making paths
 * repository-relative.
 */
import path from "node:path";
import {
  MAX_MESSAGE_CHARS,
  MAX_MESSAGE_LINES,
  MAX_TEST_OUTPUT,
  type TestResult,
  type TestStatus,
} from "./types.js";

/** The first lines of a failure message, trimmed; undefined when empty. */
export function firstLines(text: string | undefined | null): string | undefined {
  if (!text) return undefined;
  const lines = text.replace(/\r\n?/g, "\n").trim().split("\n").slice(0, MAX_MESSAGE_LINES);
  const kept = lines.join("\n").slice(0, MAX_MESSAGE_CHARS).trimEnd();
  return kept === "" ? undefined : kept;
}

/** A test's output capped at MAX_TEST_OUTPUT (its end kept: where failures are told). */
export function capOutput(text: string | undefined | null): string | undefined {
  if (!text) return undefined;
  const trimmed = text.replace(/\r\n?/g, "\n").replace(/\s+$/, "");
  if (trimmed === "") return undefined;
  if (trimmed.length <= MAX_TEST_OUTPUT) return trimmed;
  return `[…]\n${trimmed.slice(trimmed.length - MAX_TEST_OUTPUT + 4)}`;
}

/**
 * `file` relative to the first of `roots` it is inside (the working copy as the command saw
 * it, and on the host), with `/` separators; as given when it is inside none.
 */
export function relativeFile(file: string, roots: readonly string[]): string {
  const clean = file.replace(/^file:\/\//, "");
  for (const root of roots) {
    if (!root) continue;
    const rel = path.posix.relative(root, clean);
    if (rel !== "" && !rel.startsWith("..") && !path.posix.isAbsolute(rel)) return rel;
  }
  return clean;
}

/** A result, leaving out empty optional fields. */
export function result(
  id: string,
  status: TestStatus,
  extra: { message?: string | undefined; output?: string | undefined; file?: string | undefined },
): TestResult {
  const out: TestResult = { id, status };
  const message = status === "failed" ? firstLines(extra.message) : undefined;
  if (message) out.message = message;
  const output = capOutput(extra.output);
  if (output) out.output = output;
  if (extra.file) out.file = extra.file;
  return out;
}

/**
 * Results merged by id in first-seen order: a test reported twice (a failure in teardown
 * after a pass, a retry) is failed when either report says so.
 */
export function mergeById(results: Iterable<TestResult>): TestResult[] {
  const byId = new Map<string, TestResult>();
  for (const r of results) {
    const seen = byId.get(r.id);
    if (!seen || (r.status === "failed" && seen.status !== "failed")) byId.set(r.id, r);
    else if (seen.status === "skipped" && r.status === "passed") byId.set(r.id, r);
    // The same status twice (a status line, then a failure's block): what either says.
    else if (seen.status === r.status) byId.set(r.id, { ...r, ...seen });
  }
  return [...byId.values()];
}
