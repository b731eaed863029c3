#!/usr/bin/env node
/*
 * The Node the service runs on: package.json's `engines.node` (Node 22 LTS from 22.13, or 24
 * and newer: the lowest versions every installed package accepts, `node scripts/node-engines.mjs`).
 * Where the machine's Node is older, scripts/setup.sh installs the major named in .nvmrc from
 * the npm registry's `node` package into FOREMAN_NODE_CACHE (default
 * ~/.cache/foreman-node/<major>, the folder scripts/test-matrix.sh uses too), and `npm ci`'s
 * postinstall links it as node_modules/.bin/node: npm puts that folder first on the PATH of
 * every script it runs (`npm start`, `npm test`, `npm run build`, `npx …`), so they all run
 * on it, while the machine's Node stays what it was.
 *
 *   node scripts/node-runtime.mjs check   exit 0 when this Node satisfies engines.node
 *   node scripts/node-runtime.mjs cached  print the cached Node's path when it satisfies it
 *   node scripts/node-runtime.mjs prefix  print the folder setup.sh installs it into
 *   node scripts/node-runtime.mjs link    (postinstall) link the cached Node when this one is
 *                                         older; says what it did, never fails the install
 *
 * It runs before `npm ci` (from scripts/setup.sh) on whatever Node the machine has, so it
 * imports nothing from node_modules: the range is read with the small reader below, which
 * knows the forms engines.node uses (`^x.y.z`, `>=x.y.z`, `||`) and refuses any other.
 */
import { execFileSync } from "node:child_process";
import { existsSync, lstatSync, readFileSync, symlinkSync, unlinkSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/** [major, minor, patch] of "v22.13.0", "22.13" or "22". */
function parts(version) {
  const match = /^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?$/.exec(version.trim());
  if (!match) throw new Error(`not a version: ${version}`);
  return [Number(match[1]), Number(match[2] ?? 0), Number(match[3] ?? 0)];
}

function compare(a, b) {
  for (let i = 0; i < 3; i++) if (a[i] !== b[i]) return a[i] - b[i];
  return 0;
}

/** Whether `version` is in `range`: alternatives of `^x.y.z` or `>=x.y.z`, joined by `||`. */
export function satisfies(version, range) {
  const v = parts(version);
  return range.split("||").some((alternative) => {
    const match = /^\s*(\^|>=)\s*(\S+)\s*$/.exec(alternative);
    if (!match) throw new Error(`engines.node: "${alternative.trim()}" is not ^x.y.z or >=x.y.z`);
    const low = parts(match[2]);
    if (compare(v, low) < 0) return false;
    return match[1] === ">=" || v[0] === low[0];
  });
}

export function enginesRange() {
  return JSON.parse(readFileSync(path.join(root, "package.json"), "utf8")).engines.node;
}

/** The major setup.sh installs where the machine's Node is older (.nvmrc). */
export function providedMajor() {
  return readFileSync(path.join(root, ".nvmrc"), "utf8").trim();
}

/** The folder the provided Node is installed into (npm install --prefix). */
export function nodePrefix(env = process.env) {
  const cache =
    env.FOREMAN_NODE_CACHE ||
    path.join(env.XDG_CACHE_HOME || path.join(os.homedir(), ".cache"), "foreman-node");
  return path.join(cache, providedMajor());
}

export function cachedNodePath(env = process.env) {
  return path.join(nodePrefix(env), "node_modules", "node", "bin", "node");
}

/** The cached Node's version when it is installed and satisfies engines.node. */
function cachedNodeVersion(bin, range) {
  if (!existsSync(bin)) return undefined;
  try {
    const version = execFileSync(bin, ["--version"], { encoding: "utf8" }).trim();
    return satisfies(version, range) ? version : undefined;
  } catch {
    return undefined;
  }
}

function main(command) {
  const range = enginesRange();
  const here = process.version;
  if (command === "check") {
    if (satisfies(here, range)) return 0;
    console.error(`Node ${here} is older than the service needs (engines.node "${range}").`);
    return 1;
  }
  if (command === "prefix") {
    console.log(nodePrefix());
    return 0;
  }
  const bin = cachedNodePath();
  if (command === "cached") {
    if (!cachedNodeVersion(bin, range)) return 1;
    console.log(bin);
    return 0;
  }
  if (command === "link") {
    if (satisfies(here, range)) return 0;
    const version = cachedNodeVersion(bin, range);
    const link = path.join(root, "node_modules", ".bin", "node");
    if (!version) {
      console.error(
        `foreman: this machine's Node ${here} is older than the service needs ("${range}"), ` +
          `and ${bin} is not there: run \`bash scripts/setup.sh\` (it installs Node ${providedMajor()} ` +
          "from the npm registry), then `npm ci` again.",
      );
      return 0;
    }
    if (existsSync(link) || isLink(link)) unlinkSync(link);
    symlinkSync(bin, link);
    console.error(
      `foreman: npm scripts run on Node ${version} (${bin}, linked as node_modules/.bin/node): ` +
        `this machine's Node ${here} is older than the service needs ("${range}").`,
    );
    return 0;
  }
  console.error("usage: node scripts/node-runtime.mjs check|cached|prefix|link");
  return 2;
}

function isLink(file) {
  try {
    return lstatSync(file).isSymbolicLink();
  } catch {
    return false;
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = main(process.argv[2]);
}
