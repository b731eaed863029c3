#!/usr/bin/env node
/*
 * No installed package's `engines.node` excludes a Node that package.json's `engines.node`
 * admits (part of `npm run lint`): every range of node_modules/**\/package.json must contain the
 * declared one (semver.subset). On a failure it names the packages and the lowest Node 22 or
 * newer that every installed package accepts, the value to declare instead.
 *
 *   node scripts/node-engines.mjs          check (exit 1 naming the packages)
 *   node scripts/node-engines.mjs --min    print that lowest version
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import semver from "semver";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/** Every package under `modules` (nested node_modules too) with an engines.node range. */
export function installedEngines(modules = path.join(root, "node_modules")) {
  const found = [];
  const walk = (dir) => {
    let entries;
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries) {
      if (entry.name.startsWith(".") || !(entry.isDirectory() || entry.isSymbolicLink())) continue;
      const folder = path.join(dir, entry.name);
      if (entry.name.startsWith("@")) {
        walk(folder);
        continue;
      }
      const manifest = path.join(folder, "package.json");
      if (existsSync(manifest)) {
        let json;
        try {
          json = JSON.parse(readFileSync(manifest, "utf8"));
        } catch {
          json = undefined;
        }
        const range = json?.engines?.node;
        if (typeof range === "string" && range.trim())
          found.push({ name: `${json.name}@${json.version}`, range, folder });
      }
      walk(path.join(folder, "node_modules"));
    }
  };
  walk(modules);
  return found;
}

/** The packages whose range leaves out part of `declared`. */
export function excluding(declared, packages) {
  return packages.filter(({ range }) => {
    try {
      return !semver.subset(declared, range, { loose: true });
    } catch {
      return true; // a range semver cannot read: named, to be looked at
    }
  });
}

/** The lowest version from `floor` up that every package accepts (among their bounds). */
export function lowestAccepted(packages, floor = "22.0.0") {
  const candidates = new Set([floor]);
  for (const { range } of packages) {
    try {
      for (const set of new semver.Range(range, { loose: true }).set)
        for (const comparator of set)
          if (comparator.semver.version && semver.gte(comparator.semver, floor))
            candidates.add(comparator.semver.version);
    } catch {
      // unreadable: excluding() names it
    }
  }
  return [...candidates].sort(semver.compare).find((v) =>
    packages.every(({ range }) => {
      try {
        return semver.satisfies(v, range, { loose: true });
      } catch {
        return true;
      }
    }),
  );
}

function main() {
  const declared = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8")).engines.node;
  const packages = installedEngines();
  if (process.argv.includes("--min")) {
    console.log(lowestAccepted(packages) ?? "none");
    return 0;
  }
  const bad = excluding(declared, packages);
  if (bad.length === 0) return 0;
  console.error(
    `node-engines: package.json's engines.node "${declared}" admits Node versions these installed packages refuse:`,
  );
  for (const { name, range } of bad) console.error(`  ${name}: "${range}"`);
  console.error(
    `node-engines: the lowest Node from 22 every installed package accepts is ${lowestAccepted(packages) ?? "(none)"}.`,
  );
  return 1;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = main();
}
