#!/usr/bin/env node
/*
 * What failed, in a few lines per test, from the JSON reports of the vitest runs of
 * scripts/test-matrix.sh. The matrix prints each run's whole output as it goes (the second
 * lane's after the first's), so in a long log a failure of the first run sits thousands of
 * lines above the end; CI shows the end. This prints, last, every failed test (its file, its
 * name, the start of its message) and every file that failed outside a test (a hook, an
 * import, an unhandled error), under the name of the run it came from.
 *
 *   node scripts/test-failures.mjs <label>=<report.json> ...
 *
 * A report that is missing or unreadable (the run died before writing it) is said so.
 */
import { readFileSync } from "node:fs";
import path from "node:path";

const MESSAGE_LINES = 12;

/** The first lines of a failure message, without colour codes. */
function excerpt(message) {
  const clean = String(message ?? "")
    // eslint-disable-next-line no-control-regex
    .replace(/\u001b\[[0-9;]*m/g, "")
    .split("\n")
    .filter((line) => line.trim() !== "")
    // The runner's own frames say nothing about the failure.
    .filter(
      (line) => !/^\s*at .*(node_modules|node:internal|new Promise \(<anonymous>\))/.test(line),
    );
  const head = clean.slice(0, MESSAGE_LINES).map((line) => `      ${line}`);
  if (clean.length > MESSAGE_LINES)
    head.push(`      … (${clean.length - MESSAGE_LINES} more lines above, in the run's output)`);
  return head.join("\n");
}

let failures = 0;
for (const arg of process.argv.slice(2)) {
  const at = arg.indexOf("=");
  const label = at > 0 ? arg.slice(0, at) : arg;
  const file = at > 0 ? arg.slice(at + 1) : arg;
  let report;
  try {
    report = JSON.parse(readFileSync(file, "utf8"));
  } catch (error) {
    console.log(
      `\n${label}: no report (${error.code ?? error.message}); the run ended before writing it, see its output above.`,
    );
    failures++;
    continue;
  }
  const lines = [];
  for (const result of report.testResults ?? []) {
    const name = path.relative(process.cwd(), result.name ?? "?");
    const failed = (result.assertionResults ?? []).filter((a) => a.status === "failed");
    for (const test of failed) {
      lines.push(`  ✗ ${name} > ${test.fullName ?? test.title}`);
      lines.push(excerpt((test.failureMessages ?? []).join("\n")));
    }
    if (failed.length === 0 && result.status === "failed") {
      lines.push(`  ✗ ${name} (outside any test)`);
      lines.push(excerpt(result.message));
    }
  }
  if (report.success === false && lines.length === 0)
    lines.push(
      "  the run failed outside the test files (an unhandled error or the runner itself): see its output above.",
    );
  if (lines.length > 0) {
    failures++;
    console.log(
      `\n${label}: ${report.numFailedTests ?? 0} failed of ${report.numTotalTests ?? 0} tests`,
    );
    console.log(lines.join("\n"));
  }
}
if (failures === 0)
  console.log(
    "No test failed in these runs; what failed is a check or a run's set-up (see the output above).",
  );
process.exitCode = failures > 0 ? 1 : 0;
