/*
 * Finds the commands that tell whether a change works (VERIFYING): the repository's own
 * word first (.github/foreman.yml), else what its usual ecosystem files imply. Detection
 * only reads files; running is `run.ts`, always through the sandbox.
 */
import { readdir, readFile, stat } from "node:fs/promises";
import path from "node:path";
import { parse } from "yaml";
import { z } from "zod";
import { StageError } from "../util/stage-error.js";
import { findLockfile, INSTALL, type PackageManager } from "../ecosystems/javascript.js";

export interface Check {
  name: string;
  command: string;
}

export interface VerifyPlan {
  /** Where the checks came from, e.g. ".github/foreman.yml", "package.json", "Makefile", "go.mod"; null when none. */
  source: string | null;
  /** Run first, only when needed. */
  install: Check[];
  checks: Check[];
  /** Human sentences for the task log, e.g. "No node_modules and package-lock.json present: running npm ci first." */
  notes: string[];
}

export interface DetectOptions {
  /** Repository config files tried in order; the first existing one is used. */
  configNames?: string[];
}

export const DEFAULT_CONFIG_NAMES = [".github/foreman.yml", ".github/foreman.yaml"];

/** Repository config files the service reads, most specific first (`.github/<slug>.yml`). */
export function configNames(slug?: string): string[] {
  const named = slug ? [`.github/${slug}.yml`, `.github/${slug}.yaml`] : [];
  return [...new Set([...named, ...DEFAULT_CONFIG_NAMES])];
}

export const NOTHING_FOUND_NOTE =
  "No checks found: no .github/foreman.yml verify list, package.json test/lint/typecheck script, Makefile test target, pytest, go.mod or Cargo.toml.";

/** Names longer than this (commands used as names) are cut, for readable logs. */
const MAX_NAME_CHARS = 60;
/*
 * The repository is untrusted: a multi-gigabyte "package.json" must not be read into memory.
 * Real config and manifest files are a few KiB.
 */
const MAX_FILE_BYTES = 1024 * 1024;
/** How deep and how wide the search for pytest files under tests/ goes. */
const PYTEST_SEARCH_DEPTH = 3;
const PYTEST_SEARCH_ENTRIES = 2_000;

const TOO_LARGE = Symbol("too large");

/** A file's text; null when it is missing, not a regular file or unreadable. */
async function readText(workdir: string, name: string): Promise<string | null | typeof TOO_LARGE> {
  const file = path.join(workdir, name);
  try {
    const info = await stat(file);
    if (!info.isFile()) return null;
    if (info.size > MAX_FILE_BYTES) return TOO_LARGE;
    return await readFile(file, "utf8");
  } catch {
    return null;
  }
}

async function isFile(workdir: string, name: string): Promise<boolean> {
  return stat(path.join(workdir, name)).then(
    (info) => info.isFile(),
    () => false,
  );
}

async function isDirectory(workdir: string, name: string): Promise<boolean> {
  return stat(path.join(workdir, name)).then(
    (info) => info.isDirectory(),
    () => false,
  );
}

/** A command turned into a check name: one line, at most MAX_NAME_CHARS characters. */
function nameFromCommand(command: string): string {
  const oneLine = command.replace(/\s+/g, " ").trim();
  return oneLine.length > MAX_NAME_CHARS ? `${oneLine.slice(0, MAX_NAME_CHARS - 1)}…` : oneLine;
}

// --- .github/foreman.yml ------------------------------------------------------------------

const ConfigItem = z.union([
  z.string().trim().min(1),
  // Strict so that a misspelt key (`command:`, `nmae:`) is reported, not silently ignored.
  z.strictObject({
    name: z.string().trim().min(1).optional(),
    run: z.string().trim().min(1),
  }),
]);

// null: a key written with nothing after it (`verify:`), which YAML reads as null.
const ConfigList = z.array(z.unknown()).nullable().optional();

// Loose: the file may hold settings for other parts of foreman.
const ConfigFile = z.looseObject({ verify: ConfigList, install: ConfigList });

type ConfigLists = { verify?: Check[]; install?: Check[] };

function configItems(file: string, key: string, items: unknown[] | null): Check[] {
  return (items ?? []).map((item, index) => {
    const parsed = ConfigItem.safeParse(item);
    if (!parsed.success) {
      throw new StageError(`${file}: ${key}[${index}] must be a command string or {name, run}`);
    }
    const value = parsed.data;
    if (typeof value === "string") return { name: nameFromCommand(value), command: value };
    return { name: value.name ?? nameFromCommand(value.run), command: value.run };
  });
}

function parseConfig(file: string, text: string): ConfigLists {
  let data: unknown;
  try {
    data = parse(text);
  } catch (error) {
    // The first line names the problem and its position; the rest is a source excerpt.
    const reason = (error instanceof Error ? error.message : String(error)).split("\n")[0];
    throw new StageError(`${file}: invalid YAML: ${reason}`);
  }
  if (data === null || data === undefined) return {}; // an empty file says nothing
  const parsed = ConfigFile.safeParse(data);
  if (!parsed.success) {
    const key = parsed.error.issues[0]?.path[0];
    if (key === "verify" || key === "install") {
      throw new StageError(`${file}: ${key} must be a list of commands`);
    }
    throw new StageError(`${file}: must be a mapping with verify: and/or install: lists`);
  }
  const lists: ConfigLists = {};
  if (parsed.data.verify !== undefined) {
    lists.verify = configItems(file, "verify", parsed.data.verify);
  }
  if (parsed.data.install !== undefined) {
    lists.install = configItems(file, "install", parsed.data.install);
  }
  return lists;
}

// --- ecosystem detection ------------------------------------------------------------------

/** Script names, in run order: the fast static checks first, the slow tests last. */
const SCRIPT_GROUPS: readonly (readonly string[])[] = [
  ["typecheck", "type-check", "tsc"],
  ["lint"],
  ["test"],
];

const NPM_PLACEHOLDER_TEST = /Error: no test specified/;

interface Found {
  source: string;
  checks: Check[];
  install?: Check[];
  /** Why the install steps are needed; logged only when they are kept. */
  installNotes?: string[];
}

function isNonEmptyObject(value: unknown): boolean {
  return (
    typeof value === "object" &&
    value !== null &&
    !Array.isArray(value) &&
    Object.keys(value).length > 0
  );
}

async function detectPackageJson(workdir: string, notes: string[]): Promise<Found | null> {
  const text = await readText(workdir, "package.json");
  if (text === null) return null;
  if (text === TOO_LARGE) {
    notes.push("package.json is larger than 1 MiB: skipped.");
    return null;
  }
  let pkg: unknown;
  try {
    pkg = JSON.parse(text);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    notes.push(`package.json could not be parsed (${reason}): skipped.`);
    return null;
  }
  if (typeof pkg !== "object" || pkg === null || Array.isArray(pkg)) {
    notes.push("package.json is not a JSON object: skipped.");
    return null;
  }
  const manifest = pkg as Record<string, unknown>;

  const locked = await findLockfile(workdir);
  const lockfile = locked?.lockfile;
  const manager: PackageManager = locked?.manager ?? "npm";

  const scripts = manifest.scripts;
  const checks: Check[] = [];
  if (typeof scripts === "object" && scripts !== null && !Array.isArray(scripts)) {
    const table = scripts as Record<string, unknown>;
    const usable = (name: string): boolean => {
      const body = table[name];
      return typeof body === "string" && body.trim() !== "";
    };
    for (const group of SCRIPT_GROUPS) {
      const script = group.find(usable);
      if (script === undefined) continue;
      if (script === "test" && NPM_PLACEHOLDER_TEST.test(String(table[script]))) {
        notes.push("package.json's test script is npm's placeholder: skipped.");
        continue;
      }
      checks.push({ name: script, command: `${manager} run ${script}` });
    }
  }

  let install: Check[] | undefined;
  let installNote: string | undefined;
  if (!(await isDirectory(workdir, "node_modules"))) {
    const declares =
      isNonEmptyObject(manifest.dependencies) || isNonEmptyObject(manifest.devDependencies);
    if (lockfile !== undefined) {
      const step = INSTALL[manager];
      install = [{ name: "install", command: step.command }];
      installNote = `No node_modules and ${lockfile} present: running ${step.short} first.`;
    } else if (declares) {
      install = [{ name: "install", command: "npm install --no-audit --no-fund" }];
      installNote =
        "No node_modules, and package.json declares dependencies but no lockfile: running npm install first.";
    }
  }
  if (checks.length === 0 && install === undefined) return null;
  return {
    source: "package.json",
    checks,
    ...(install && installNote ? { install, installNotes: [installNote] } : {}),
  };
}

/*
 * `test` as a rule target, alone or among several (`test lint:`), with a double colon
 * allowed, but not the assignments `test := …` and `test ::= …`.
 */
const MAKE_TEST_TARGET = /^(?:[\w./-]+[ \t]+)*test(?:[ \t]+[\w./-]+)*[ \t]*:(?!:?=)/m;

async function detectMakefile(workdir: string): Promise<Found | null> {
  // GNU make's own search order: `make test` reads the first of these that exists.
  for (const name of ["GNUmakefile", "makefile", "Makefile"]) {
    const text = await readText(workdir, name);
    if (text === null) continue;
    if (text === TOO_LARGE || !MAKE_TEST_TARGET.test(text)) return null;
    return { source: name, checks: [{ name: "make test", command: "make test" }] };
  }
  return null;
}

const PYTEST_CHECK: Check = { name: "pytest", command: "python3 -m pytest -q" };

async function containsText(workdir: string, name: string, needle: string): Promise<boolean> {
  const text = await readText(workdir, name);
  return typeof text === "string" && text.includes(needle);
}

/** Whether a test_*.py file lies in `dir`, looking a few levels down. */
async function hasPytestFile(workdir: string, dir: string): Promise<boolean> {
  let budget = PYTEST_SEARCH_ENTRIES;
  const queue: Array<{ rel: string; depth: number }> = [{ rel: dir, depth: 0 }];
  while (queue.length > 0 && budget > 0) {
    const next = queue.shift();
    if (!next) break;
    let entries;
    try {
      entries = await readdir(path.join(workdir, next.rel), { withFileTypes: true });
    } catch {
      continue;
    }
    for (const entry of entries) {
      if (--budget < 0) break;
      if (entry.isFile() && /^test_.*\.py$/.test(entry.name)) return true;
      if (
        entry.isDirectory() &&
        next.depth + 1 < PYTEST_SEARCH_DEPTH &&
        !entry.name.startsWith(".") &&
        entry.name !== "__pycache__" &&
        entry.name !== "node_modules"
      ) {
        queue.push({ rel: path.join(next.rel, entry.name), depth: next.depth + 1 });
      }
    }
  }
  return false;
}

/** The file or folder that shows the repository uses pytest, or null. */
async function detectPytest(workdir: string): Promise<string | null> {
  if (await isFile(workdir, "pytest.ini")) return "pytest.ini";
  if (await isFile(workdir, "conftest.py")) return "conftest.py";
  if (await containsText(workdir, "pyproject.toml", "[tool.pytest")) return "pyproject.toml";
  if (await containsText(workdir, "setup.cfg", "[tool:pytest]")) return "setup.cfg";
  if (await containsText(workdir, "tox.ini", "[pytest]")) return "tox.ini";
  for (const dir of ["tests", "test"]) {
    if ((await isDirectory(workdir, dir)) && (await hasPytestFile(workdir, dir))) return `${dir}/`;
  }
  return null;
}

async function detectOthers(workdir: string): Promise<Found[]> {
  const found: Found[] = [];
  const pytest = await detectPytest(workdir);
  if (pytest) found.push({ source: pytest, checks: [PYTEST_CHECK] });
  if (await isFile(workdir, "go.mod")) {
    found.push({ source: "go.mod", checks: [{ name: "go test", command: "go test ./..." }] });
  }
  if (await isFile(workdir, "Cargo.toml")) {
    found.push({ source: "Cargo.toml", checks: [{ name: "cargo test", command: "cargo test" }] });
  }
  return found;
}

/**
 * The checks VERIFYING runs in `workdir`. Throws StageError only for a repository config
 * file that is present but wrong; anything else missing or odd just finds fewer checks.
 */
export async function detectChecks(
  workdir: string,
  options: DetectOptions = {},
): Promise<VerifyPlan> {
  const notes: string[] = [];

  let config: ConfigLists = {};
  let configName: string | undefined;
  for (const name of options.configNames ?? DEFAULT_CONFIG_NAMES) {
    const text = await readText(workdir, name);
    if (text === null) continue;
    if (text === TOO_LARGE) throw new StageError(`${name}: larger than 1 MiB`);
    configName = name;
    config = parseConfig(name, text);
    break;
  }

  if (configName !== undefined && config.verify !== undefined) {
    if (config.verify.length === 0) {
      notes.push(`${configName} has an empty verify list: no checks are run.`);
      return { source: configName, install: [], checks: [], notes };
    }
    return { source: configName, install: config.install ?? [], checks: config.verify, notes };
  }

  const found: Found[] = [];
  const pkg = await detectPackageJson(workdir, notes);
  if (pkg) found.push(pkg);
  const make = await detectMakefile(workdir);
  if (make) found.push(make);
  const others = await detectOthers(workdir);
  if (make && others.length > 0) {
    notes.push(
      `${make.source} has a test target: ${others.map((f) => f.source).join(", ")} not checked separately.`,
    );
  } else {
    found.push(...others);
  }

  const checks = found.flatMap((f) => f.checks);
  if (checks.length === 0) {
    return { source: null, install: [], checks: [], notes: [...notes, NOTHING_FOUND_NOTE] };
  }

  // Install steps only when something will run: an install costs minutes and network.
  const sources = found.filter((f) => f.checks.length > 0).map((f) => f.source);
  let install = found.flatMap((f) => f.install ?? []);
  if (configName !== undefined && config.install !== undefined) {
    // The repository's own install steps replace the guessed ones: it knows its setup.
    install = config.install;
    sources.unshift(configName);
    notes.push(`Install steps from ${configName} replace detected ones.`);
  } else {
    notes.push(...found.flatMap((f) => f.installNotes ?? []));
  }
  return { source: sources.join(", "), install, checks, notes };
}
