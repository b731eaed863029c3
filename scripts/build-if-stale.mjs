#!/usr/bin/env node
/*
 * `npm start`'s prestart: runs `npm run build` only when dist/ is missing or out of date, so
 * a restart (after a crash, a deploy without changes) starts in seconds instead of waiting
 * for tsc and vite (about 1.5 min on a small machine).
 *
 * Out of date: the fingerprint of the build's inputs (path, size and modification time of
 * every file under src/ and web/, the tsconfig files, package.json, package-lock.json and the
 * build scripts) differs from the one written to dist/.build-stamp by the last build that
 * succeeded here, or a build output is missing. A file added, removed, edited or touched
 * counts. `FOREMAN_BUILD=always` builds every time, `FOREMAN_BUILD=never` never (an image
 * built beforehand). `npm run build` ends with `--stamp`, which writes the fingerprint.
 */
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const STAMP = path.join(root, "dist", ".build-stamp");
const INPUT_DIRS = ["src", "web"];
const INPUT_FILES = [
  "package.json",
  "package-lock.json",
  "tsconfig.json",
  "tsconfig.build.json",
  "scripts/copy-prompts.mjs",
  "scripts/build-if-stale.mjs",
];
const OUTPUTS = ["dist/main.js", "dist/dashboard/index.html"];
const SKIP = new Set(["node_modules", "dist"]);

function walk(dir, into) {
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return;
  }
  for (const entry of entries) {
    if (SKIP.has(entry.name)) continue;
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) walk(full, into);
    else if (entry.isFile()) into.push(full);
  }
}

export function fingerprint() {
  const files = [];
  for (const dir of INPUT_DIRS) walk(path.join(root, dir), files);
  for (const file of INPUT_FILES) files.push(path.join(root, file));
  files.sort();
  const hash = createHash("sha256");
  for (const file of files) {
    let line = "missing";
    try {
      const s = statSync(file);
      line = `${s.size}:${s.mtimeMs}`;
    } catch {
      // a listed file that does not exist is part of the fingerprint too
    }
    hash.update(`${path.relative(root, file)}\0${line}\n`);
  }
  return hash.digest("hex");
}

function stale(current) {
  if (OUTPUTS.some((f) => !existsSync(path.join(root, f)))) return "no build yet";
  let stamp = "";
  try {
    stamp = readFileSync(STAMP, "utf8").trim();
  } catch {
    return "no build stamp";
  }
  return stamp === current ? undefined : "sources changed since the last build";
}

if (process.argv.includes("--stamp")) {
  // The end of `npm run build`: what was just built is up to date.
  writeFileSync(STAMP, `${fingerprint()}\n`);
  process.exit(0);
}
const mode = process.env.FOREMAN_BUILD ?? "auto";
if (mode === "never") process.exit(0);
const before = fingerprint();
const reason = mode === "always" ? "FOREMAN_BUILD=always" : stale(before);
if (!reason) {
  console.error("build: dist/ is up to date, not rebuilding");
  process.exit(0);
}
console.error(`build: ${reason}, running npm run build`);
const npm = process.env.npm_execpath
  ? [process.execPath, [process.env.npm_execpath, "run", "build"]]
  : ["npm", ["run", "build"]];
const result = spawnSync(npm[0], npm[1], { cwd: root, stdio: "inherit" });
if (result.status !== 0) process.exit(result.status ?? 1);
// The fingerprint taken before the build: a file edited during it makes the next start build.
writeFileSync(STAMP, `${before}\n`);
