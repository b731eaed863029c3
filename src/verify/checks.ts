/*
 * Finds the commands that tell whether a change works (VERIFYING): the repository's own
 * word first (.github/foreman.yml), else what its usual ecosystem files imply. Detection
 * only reads files; running is `run.ts`, always through the sandbox.
 */
import { z } from "zod";
import { StageError } from "../util/stage-error.js";
import { ECOSYSTEMS, type Check, type DetectedChecks } from "../ecosystems/index.js";
import { readText, TOO_LARGE } from "../ecosystems/kit.js";
import { parseRepositoryYaml } from "../util/repo-parse.js";

export type { Check };

export interface VerifyPlan {
  /** Where the checks came from, e.g. ".github/foreman.yml", "package.json", "Makefile", "go.mod"; null when none. */
  source: string | null;
  /**
   * Run first. Empty from detectChecks: installs are the setup step's (verify/setup.ts),
   * run once per working copy before any check, with the registries' network.
   */
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
const ConfigFile = z.looseObject({ verify: ConfigList, install: ConfigList, setup: ConfigList });

type ConfigLists = { verify?: Check[]; install?: Check[]; setup?: Check[] };

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

async function parseConfig(file: string, text: string): Promise<ConfigLists> {
  let data: unknown;
  try {
    data = await parseRepositoryYaml(text);
  } catch (error) {
    // The first line names the problem and its position; the rest is a source excerpt.
    const reason = (error instanceof Error ? error.message : String(error)).split("\n")[0];
    throw new StageError(`${file}: invalid YAML: ${reason}`);
  }
  if (data === null || data === undefined) return {}; // an empty file says nothing
  const parsed = ConfigFile.safeParse(data);
  if (!parsed.success) {
    const key = parsed.error.issues[0]?.path[0];
    if (key === "verify" || key === "install" || key === "setup") {
      throw new StageError(`${file}: ${key} must be a list of commands`);
    }
    throw new StageError(`${file}: must be a mapping with verify:, setup: and/or install: lists`);
  }
  const lists: ConfigLists = {};
  if (parsed.data.verify !== undefined) {
    lists.verify = configItems(file, "verify", parsed.data.verify);
  }
  if (parsed.data.install !== undefined) {
    lists.install = configItems(file, "install", parsed.data.install);
  }
  if (parsed.data.setup !== undefined) {
    lists.setup = configItems(file, "setup", parsed.data.setup);
  }
  return lists;
}

/**
 * The repository's config file (the first of `names` present) and its lists; `name`
 * undefined when there is none. Throws StageError for a file that is present but wrong.
 */
export async function readRepoConfig(
  workdir: string,
  names: string[] = DEFAULT_CONFIG_NAMES,
): Promise<{ name?: string; lists: ConfigLists }> {
  for (const name of names) {
    const text = await readText(workdir, name);
    if (text === null) continue;
    if (text === TOO_LARGE) throw new StageError(`${name}: larger than 1 MiB`);
    return { name, lists: await parseConfig(name, text) };
  }
  return { lists: {} };
}

// --- ecosystem detection ------------------------------------------------------------------

/**
 * What the registered ecosystems find, in registry order. An umbrella runner (make) that
 * finds checks stands in for the ecosystems after it, which are named in a note instead.
 */
async function detectEcosystems(workdir: string, notes: string[]): Promise<DetectedChecks[]> {
  const found: DetectedChecks[] = [];
  let umbrella: DetectedChecks | undefined;
  const covered: DetectedChecks[] = [];
  for (const ecosystem of ECOSYSTEMS) {
    if (!ecosystem.verify) continue;
    const detected = await ecosystem.verify.detect(workdir, notes);
    // Install steps alone (the setup step's) are no checks, and nothing an umbrella covers.
    if (!detected || detected.checks.length === 0) continue;
    if (umbrella) covered.push(detected);
    else found.push(detected);
    if (ecosystem.verify.umbrella) umbrella ??= detected;
  }
  if (umbrella && covered.length > 0) {
    notes.push(
      `${umbrella.source} has a test target: ${covered.map((f) => f.source).join(", ")} not checked separately.`,
    );
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
  const { name: configName, lists: config } = await readRepoConfig(workdir, options.configNames);

  // Installs (the config's setup:/install: lists, the ecosystems' install steps) are the
  // setup step's (verify/setup.ts): done once per working copy before any check.
  if (configName !== undefined && config.verify !== undefined) {
    if (config.verify.length === 0) {
      notes.push(`${configName} has an empty verify list: no checks are run.`);
      return { source: configName, install: [], checks: [], notes };
    }
    return { source: configName, install: [], checks: config.verify, notes };
  }

  const found = await detectEcosystems(workdir, notes);

  const checks = found.flatMap((f) => f.checks);
  if (checks.length === 0) {
    return { source: null, install: [], checks: [], notes: [...notes, NOTHING_FOUND_NOTE] };
  }
  const sources = found.filter((f) => f.checks.length > 0).map((f) => f.source);
  return { source: sources.join(", "), install: [], checks, notes };
}
