/*
 * Declared dependencies of a repository, from its manifests at the root: package.json
 * (with package-lock.json for exact versions), requirements*.txt and pyproject.toml
 * (`[project] dependencies`), go.mod (direct requirements). Only reading, never running.
 */
import path from "node:path";
import semver from "semver";
import { readBounded } from "../indexer/read-files.js";
import type { RepoFiles } from "./files.js";

/** package-lock.json files of large monorepos run to tens of MiB. */
const MAX_LOCK_BYTES = 64 * 1024 * 1024;

export type Ecosystem = "npm" | "PyPI" | "Go";

export interface Dependency {
  ecosystem: Ecosystem;
  name: string;
  /** As written in the manifest. */
  declared: string;
  /** The declared constraint as a semver range ("*" when unconstrained), or null. */
  range: string | null;
  /** An exact version when one is known (lockfile, `==`, go.mod), for advisories. */
  exact: string | null;
  manifest: string;
  dev: boolean;
}

export interface Manifests {
  dependencies: Dependency[];
  /** Exact versions of every installed npm package (package-lock.json), for advisories. */
  npmLocked: Map<string, Set<string>> | null;
  /** Lines or entries that were not understood, with the reason. */
  skipped: Array<{ manifest: string; entry: string; reason: string }>;
}

function fileText(repo: RepoFiles, rel: string): string | undefined {
  return repo.files.find((f) => f.path === rel)?.text;
}

function parseJson(text: string | undefined): Record<string, unknown> | undefined {
  if (text === undefined) return undefined;
  try {
    const value: unknown = JSON.parse(text);
    return value && typeof value === "object" && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

/** A lockfile's text: lock files are not among the scanned files (indexer rules). */
async function lockText(root: string, name: string): Promise<string | undefined> {
  const bytes = await readBounded(path.join(root, name), MAX_LOCK_BYTES);
  return typeof bytes === "string" ? undefined : bytes.toString("utf8");
}

async function readNpm(root: string, repo: RepoFiles, out: Manifests): Promise<void> {
  const pkg = parseJson(fileText(repo, "package.json"));
  if (!pkg) return;
  const lock = parseJson(
    (await lockText(root, "package-lock.json")) ?? (await lockText(root, "npm-shrinkwrap.json")),
  );
  const lockedTop = new Map<string, string>();
  if (lock) {
    const locked = new Map<string, Set<string>>();
    const add = (name: string, version: unknown) => {
      if (typeof version !== "string" || !semver.valid(version)) return;
      if (!locked.has(name)) locked.set(name, new Set());
      locked.get(name)!.add(version);
    };
    const packages = lock.packages as
      Record<string, { version?: unknown; link?: unknown }> | undefined;
    if (packages && typeof packages === "object") {
      for (const [key, entry] of Object.entries(packages)) {
        const at = key.lastIndexOf("node_modules/");
        if (at < 0 || !entry || entry.link) continue;
        const name = key.slice(at + "node_modules/".length);
        add(name, entry.version);
        if (key === `node_modules/${name}` && typeof entry.version === "string")
          lockedTop.set(name, entry.version);
      }
    } else {
      // lockfileVersion 1: nested `dependencies` objects.
      const walk = (deps: unknown, top: boolean) => {
        if (!deps || typeof deps !== "object") return;
        for (const [name, entry] of Object.entries(
          deps as Record<string, Record<string, unknown>>,
        )) {
          add(name, entry?.version);
          if (top && typeof entry?.version === "string") lockedTop.set(name, entry.version);
          walk(entry?.dependencies, false);
        }
      };
      walk(lock.dependencies, true);
    }
    out.npmLocked = locked;
  }
  for (const [field, dev] of [
    ["dependencies", false],
    ["devDependencies", true],
    ["optionalDependencies", false],
  ] as const) {
    const table = pkg[field];
    if (!table || typeof table !== "object" || Array.isArray(table)) continue;
    for (const [name, spec] of Object.entries(table as Record<string, unknown>)) {
      if (typeof spec !== "string") continue;
      const range = semver.validRange(spec.trim());
      if (range === null) {
        out.skipped.push({
          manifest: "package.json",
          entry: name,
          reason: "not a registry version range (git, file, workspace, alias or tag)",
        });
        continue;
      }
      out.dependencies.push({
        ecosystem: "npm",
        name,
        declared: spec,
        range,
        exact: lockedTop.get(name) ?? semver.minVersion(range)?.version ?? null,
        manifest: "package.json",
        dev,
      });
    }
  }
}

/** A PEP 440 version as semver (release numbers only; pre/post/local parts dropped). */
export function pep440ToSemver(version: string): string | null {
  const match = /^\s*v?(\d+)(?:\.(\d+))?(?:\.(\d+))?/.exec(version);
  if (!match) return null;
  return `${match[1]}.${match[2] ?? 0}.${match[3] ?? 0}`;
}

/** A PEP 440 specifier set (">=1.2,<2", "==1.4.2", "~=1.4") as a semver range, or null. */
export function pep440Range(spec: string): { range: string; exact: string | null } | null {
  const parts = spec
    .split(",")
    .map((p) => p.trim())
    .filter(Boolean);
  if (parts.length === 0) return { range: "*", exact: null };
  const ranges: string[] = [];
  let exact: string | null = null;
  for (const part of parts) {
    const match = /^(===|==|~=|>=|<=|!=|>|<)\s*([^\s;]+)$/.exec(part);
    if (!match) return null;
    const [, op, raw] = match as unknown as [string, string, string];
    if (op === "!=") continue;
    if (raw.endsWith(".*")) {
      // ==1.* and ==1.4.* (prefix matching)
      const prefix = raw.slice(0, -2);
      const version = pep440ToSemver(prefix);
      if (!version || (op !== "==" && op !== "!=")) return null;
      const [major, minor] = version.split(".");
      ranges.push(prefix.split(".").length === 1 ? `${major}.x` : `~${major}.${minor}.0`);
      continue;
    }
    const version = pep440ToSemver(raw);
    if (!version) return null;
    if (op === "==" || op === "===") {
      ranges.push(version);
      exact = raw;
    } else if (op === "~=") {
      // ~=X.Y means >=X.Y,==X.*; ~=X.Y.Z means >=X.Y.Z,==X.Y.*
      const segments = raw.split(".").length;
      const [major, minor] = version.split(".");
      ranges.push(
        segments <= 2
          ? `>=${version} <${Number(major) + 1}.0.0`
          : `>=${version} <${major}.${Number(minor) + 1}.0`,
      );
    } else ranges.push(`${op}${version}`);
  }
  const range = semver.validRange(ranges.join(" ") || "*");
  return range === null ? null : { range, exact };
}

const PY_REQUIREMENT = /^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*([^;#]*)/;

function addPython(out: Manifests, manifest: string, entry: string, dev: boolean): void {
  const line = entry.trim();
  if (line === "" || line.startsWith("#") || line.startsWith("-")) return;
  if (/:\/\/|^\.|^\//.test(line)) {
    out.skipped.push({
      manifest,
      entry: line.slice(0, 100),
      reason: "a URL or path, not a registry package",
    });
    return;
  }
  const match = PY_REQUIREMENT.exec(line);
  if (!match) {
    out.skipped.push({ manifest, entry: line.slice(0, 100), reason: "not understood" });
    return;
  }
  const name = match[1]!;
  const spec = match[2]!.trim().replace(/^\((.*)\)$/, "$1");
  const parsed = pep440Range(spec);
  if (!parsed) {
    out.skipped.push({
      manifest,
      entry: name,
      reason: `version specifier "${spec}" not understood`,
    });
    return;
  }
  out.dependencies.push({
    ecosystem: "PyPI",
    name,
    declared: spec || "(any)",
    range: parsed.range,
    exact: parsed.exact,
    manifest,
    dev,
  });
}

function readPython(repo: RepoFiles, out: Manifests): void {
  for (const file of repo.files) {
    if (!/^requirements([-_.][\w.-]+)?\.txt$/.test(file.path)) continue;
    const dev = /dev|test/i.test(file.path);
    for (const line of file.lines) addPython(out, file.path, line.replace(/\s#.*$/, ""), dev);
  }
  const pyproject = fileText(repo, "pyproject.toml");
  if (pyproject) {
    // The `dependencies = [...]` array of the [project] table (no TOML parser needed for it).
    const project = /^\[project\]\s*$([\s\S]*?)(?=^\[|$(?![\s\S]))/m.exec(pyproject)?.[1] ?? "";
    const array = /^dependencies\s*=\s*\[([\s\S]*?)\]/m.exec(project)?.[1];
    if (array) {
      for (const item of array.matchAll(/["']([^"']+)["']/g))
        addPython(out, "pyproject.toml", item[1]!, false);
    }
  }
}

function readGo(repo: RepoFiles, out: Manifests): void {
  const gomod = fileText(repo, "go.mod");
  if (!gomod) return;
  const entries: string[] = [];
  let inBlock = false;
  for (const raw of gomod.split(/\r?\n/)) {
    const line = raw.trim();
    if (inBlock) {
      if (line.startsWith(")")) inBlock = false;
      else entries.push(line);
    } else if (/^require\s*\($/.test(line)) inBlock = true;
    else if (line.startsWith("require ")) entries.push(line.slice("require ".length));
  }
  for (const entry of entries) {
    if (entry === "" || entry.startsWith("//")) continue;
    if (/\/\/\s*indirect\b/.test(entry)) continue;
    const [name, version] = entry.split(/\s+/);
    if (!name || !version || !semver.valid(version)) {
      out.skipped.push({
        manifest: "go.mod",
        entry: entry.slice(0, 100),
        reason: "not understood",
      });
      continue;
    }
    out.dependencies.push({
      ecosystem: "Go",
      name,
      declared: version,
      // Minimal version selection builds with exactly this version (or a higher one some
      // other module requires): it is what the repository declares.
      range: semver.clean(version),
      exact: version,
      manifest: "go.mod",
      dev: false,
    });
  }
}

/** The dependencies the repository declares at its root (`root`: the working copy). */
export async function readManifests(root: string, repo: RepoFiles): Promise<Manifests> {
  const out: Manifests = { dependencies: [], npmLocked: null, skipped: [] };
  await readNpm(root, repo, out);
  readPython(repo, out);
  readGo(repo, out);
  return out;
}
