#!/usr/bin/env node
/*
 * Regenerates the dependency graph of docs/architecture.md from the code (dependency-cruiser,
 * collapsed to the folders of src/), between the "layers:start" and "layers:end" markers.
 * `--check` fails when the document is not current (npm run lint runs it so).
 */
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";

const DOC = "docs/architecture.md";
const START = "<!-- layers:start (npm run docs:architecture) -->";
const END = "<!-- layers:end -->";
const LAYERS = [
  ["composition", ["main.ts", "service.ts", "context.ts"]],
  ["doors", ["http", "github", "jobs", "cli", "integrations"]],
  ["pipeline", ["pipeline"]],
  ["domain", ["domain"]],
  [
    "parts",
    [
      "tools",
      "indexer",
      "verify",
      "health",
      "ecosystems",
      "llm",
      "github-api",
      "text",
      "queue",
      "db",
      "metrics",
      "sandbox",
      "workcopy",
    ],
  ],
  ["base", ["util", "config", "errors.ts"]],
];

const raw = execFileSync(
  "node_modules/.bin/depcruise",
  [
    "src",
    "--config",
    ".dependency-cruiser.cjs",
    "--collapse",
    "^src/[^/]+",
    "--output-type",
    "json",
  ],
  { encoding: "utf8", maxBuffer: 64 * 1024 * 1024 },
);
const { modules } = JSON.parse(raw);
const name = (source) => source.replace(/^src\//, "").replace(/\/$/, "");
const edges = new Set();
for (const m of modules) {
  if (!m.source.startsWith("src/")) continue;
  for (const d of m.dependencies) {
    if (!d.resolved.startsWith("src/")) continue;
    const from = name(m.source);
    const to = name(d.resolved);
    // The base layer is used by everything; drawn, it hides the structure.
    if (from !== to && !LAYERS.at(-1)[1].includes(to)) edges.add(`${from} --> ${to}`);
  }
}
const id = (n) => n.replace(/[^a-z0-9]/gi, "_");
const lines = ["```mermaid", "flowchart TD"];
for (const [layer, members] of LAYERS) {
  lines.push(`  subgraph layer_${layer}["${layer}"]`);
  for (const member of members) lines.push(`    ${id(member)}["${member}"]`);
  lines.push("  end");
}
for (const edge of [...edges].sort()) {
  const [from, to] = edge.split(" --> ");
  lines.push(`  ${id(from)} --> ${id(to)}`);
}
lines.push("```");
const block = [
  START,
  "",
  "Generated from the imports of `src/` by `npm run docs:architecture` (dependency-cruiser,",
  "one box per folder; `util/`, `config/` and `errors.ts` are used by all and not drawn).",
  "`npm run lint` fails when an import breaks a rule of `.dependency-cruiser.cjs` or when",
  "this graph is not current.",
  "",
  ...lines,
  "",
  END,
].join("\n");

const doc = readFileSync(DOC, "utf8");
const start = doc.indexOf(START);
const end = doc.indexOf(END);
if (start < 0 || end < 0) throw new Error(`${DOC} has no ${START} … ${END} block`);
const next = doc.slice(0, start) + block + doc.slice(end + END.length);
if (process.argv.includes("--check")) {
  if (next !== doc) {
    console.error(`${DOC} is not current: run npm run docs:architecture`);
    process.exit(1);
  }
} else {
  writeFileSync(DOC, next);
}
