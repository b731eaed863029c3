#!/usr/bin/env node
/*
 * Writes test/durations.json (the order test/sequencer.ts starts files in) from a vitest JSON
 * report of a whole-suite run: `npx vitest run --reporter=json --outputFile=report.json`, then
 * `node scripts/test-durations.mjs report.json`. Each file's wall time in whole seconds,
 * longest first.
 */
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";

const [report] = process.argv.slice(2);
if (!report) {
  console.error("usage: node scripts/test-durations.mjs <vitest json report>");
  process.exit(2);
}
const root = path.resolve(import.meta.dirname, "..");
const { testResults } = JSON.parse(readFileSync(report, "utf8"));
const rows = testResults
  .map((r) => [
    path.relative(root, r.name).split(path.sep).join("/"),
    Math.max(1, Math.round((r.endTime - r.startTime) / 1000)),
  ])
  .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
const out = path.join(root, "test", "durations.json");
writeFileSync(out, `${JSON.stringify(Object.fromEntries(rows), null, 2)}\n`);
console.log(`${rows.length} files written to ${path.relative(root, out)}`);
