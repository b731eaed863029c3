#!/usr/bin/env node
/*
 * Copies the prompt files (each `<folder>/prompts/<name>.md` under src/, read by
 * util/prompt-file.ts beside the module that uses them) to the same places under dist/: tsc
 * emits only the compiled modules. `npm run build` runs it after tsc.
 */
import { copyFileSync, mkdirSync, readdirSync } from "node:fs";
import path from "node:path";

const [from, to] = process.argv.slice(2).length === 2 ? process.argv.slice(2) : ["src", "dist"];
let copied = 0;
for (const entry of readdirSync(from, { recursive: true, withFileTypes: true })) {
  if (!entry.isFile() || !entry.name.endsWith(".md")) continue;
  if (path.basename(entry.parentPath) !== "prompts") continue;
  const rel = path.relative(from, path.join(entry.parentPath, entry.name));
  mkdirSync(path.join(to, path.dirname(rel)), { recursive: true });
  copyFileSync(path.join(from, rel), path.join(to, rel));
  copied++;
}
if (copied === 0) {
  console.error(`copy-prompts: no prompts/*.md under ${from}`);
  process.exit(1);
}
