/*
 * A failure's normalized signature: tells "fails the same way as on the base" from "fails
 * differently now" (docs/api.md, "Verification baseline"). Two runs of one failure differ in where the checkout is, in
 * timings, addresses and ids of processes; those are taken out, the values the test saw stay.
 */
import type { TestResult } from "./types.js";

const REPLACEMENTS: Array<[RegExp, string]> = [
  // Run times: "(12ms)", "in 0.31s", "duration_ms: 4.2", "Elapsed: 0.002".
  [/\b(duration_ms|time|took|elapsed)\b[:=]?\s*[\d.]+\s*\w*/gi, "#"],
  [/\(?\b\d+(\.\d+)? ?(ms|µs|us|ns|s|sec|seconds)\b\)?/gi, "#"],
  // Memory addresses and object ids.
  [/\b0x[0-9a-f]{4,}\b/gi, "0x#"],
  [/ at 0x#/g, ""],
  // Process ids and ports in "pid 1234", ":54321".
  [/\bpid[ =:]\d+/gi, "pid #"],
  [/(127\.0\.0\.1|localhost):\d{2,5}\b/g, "$1:#"],
  // Timestamps.
  [/\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?/g, "<time>"],
  // Temporary folders of a run (/tmp/pytest-of-x/pytest-12/, /tmp/tmpab12cd).
  [/\/tmp\/[\w.-]*\d[\w.-]*/g, "/tmp/#"],
];

/**
 * The failure's message (its output when it has none) with each of `roots` (the working
 * copy as the command saw it and on the host) named `<root>`, timings, addresses, process
 * ids and temporary folders taken out, whitespace collapsed. "" for a test that did not fail.
 */
export function failureSignature(test: TestResult, roots: readonly string[]): string {
  if (test.status !== "failed") return "";
  let text = test.message ?? test.output ?? "";
  for (const root of [...roots].filter(Boolean).sort((a, b) => b.length - a.length))
    text = text.split(root).join("<root>");
  for (const [pattern, replacement] of REPLACEMENTS) text = text.replace(pattern, replacement);
  // Stack frames' line:column move with any edit above them; the frames' files stay.
  text = text.replace(/(\.[cm]?[jt]sx?|\.py|\.go|\.rs):\d+(:\d+)?/g, "$1");
  return text.replace(/\s+/g, " ").trim();
}

/** How many of `tests` passed, failed and were skipped (verification, health scans). */
export function countByStatus(tests: readonly { status: string }[]) {
  let passed = 0;
  let failed = 0;
  let skipped = 0;
  for (const t of tests) {
    if (t.status === "passed") passed++;
    else if (t.status === "failed") failed++;
    else skipped++;
  }
  return { total: tests.length, passed, failed, skipped };
}
