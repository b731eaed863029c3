import { createRequire } from "node:module";
import path from "node:path";
import semver from "semver";
import { readBounded } from "../indexer/read-files.js";
import { describeResult, sandboxPath } from "../sandbox/index.js";
import {
  exists,
  isDirectory,
  isFile,
  isTestFile,
  readJson,
  readText,
  relativeTo,
  removeReport,
  REPORT_DIR,
  timedOutAttempt,
  TOO_LARGE,
} from "./kit.js";
import type {
  Check,
  CoverageAttempt,
  CoverageContext,
  CoverageFigures,
  DetectedChecks,
  Ecosystem,
  ManifestFiles,
  Manifests,
} from "./types.js";

/*
 * JavaScript and TypeScript: package.json, its package managers (which lockfile names which
 * manager, and how each installs exactly what its lockfile pins), its scripts as checks, its
 * tests under a coverage tool, and its declared dependencies.
 */

export const javascript: Ecosystem<"javascript"> = {
  id: "javascript",
  description: "JavaScript and TypeScript (package.json; npm, pnpm, yarn, bun)",
  verify: { detect: detectPackageJson },
  coverage: {
    languages: ["javascript", "typescript"],
    // `npm test` runs whatever the repository calls its tests, named like tests or not.
    needsTestFiles: false,
    measure: javascriptCoverage,
  },
  manifests: {
    registry: "npm",
    advisories: "npm",
    read: readNpm,
    toSemver: (version) => semver.valid(version) ?? semver.coerce(version)?.version ?? null,
  },
};

// --- package managers ---------------------------------------------------------------------

export type PackageManager = "npm" | "pnpm" | "yarn" | "bun";

/** In precedence order: a stray package-lock.json next to pnpm-lock.yaml is the usual leftover. */
export const LOCKFILES: ReadonlyArray<readonly [string, PackageManager]> = [
  ["pnpm-lock.yaml", "pnpm"],
  ["yarn.lock", "yarn"],
  ["bun.lockb", "bun"],
  ["bun.lock", "bun"],
  ["package-lock.json", "npm"],
  ["npm-shrinkwrap.json", "npm"],
];

/** The frozen install of each manager (`short` is how the task log names it). */
export const INSTALL: Record<PackageManager, { command: string; short: string }> = {
  npm: { command: "npm ci --no-audit --no-fund", short: "npm ci" },
  pnpm: { command: "pnpm install --frozen-lockfile", short: "pnpm install" },
  yarn: { command: "yarn install --frozen-lockfile", short: "yarn install" },
  bun: { command: "bun install --frozen-lockfile", short: "bun install" },
};

/** Without a lockfile: npm resolves the declared ranges. */
export const UNLOCKED_INSTALL = "npm install --no-audit --no-fund";

/** The first lockfile present in `root` (a regular file) and its manager, or undefined. */
export async function findLockfile(
  root: string,
): Promise<{ lockfile: string; manager: PackageManager } | undefined> {
  for (const [lockfile, manager] of LOCKFILES) {
    if (await isFile(root, lockfile)) return { lockfile, manager };
  }
  return undefined;
}

// --- verification -------------------------------------------------------------------------

/** Script names, in run order: the fast static checks first, the slow tests last. */
const SCRIPT_GROUPS: readonly (readonly string[])[] = [
  ["typecheck", "type-check", "tsc"],
  ["lint"],
  ["test"],
];

const NPM_PLACEHOLDER_TEST = /Error: no test specified/;

function isNonEmptyObject(value: unknown): boolean {
  return (
    typeof value === "object" &&
    value !== null &&
    !Array.isArray(value) &&
    Object.keys(value).length > 0
  );
}

async function detectPackageJson(workdir: string, notes: string[]): Promise<DetectedChecks | null> {
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
  let installInputs: string[] = [];
  if (!(await isDirectory(workdir, "node_modules"))) {
    const declares =
      isNonEmptyObject(manifest.dependencies) || isNonEmptyObject(manifest.devDependencies);
    if (lockfile !== undefined) {
      const step = INSTALL[manager];
      install = [{ name: "install", command: step.command }];
      installNote = `No node_modules and ${lockfile} present: running ${step.short} first.`;
      installInputs = ["package.json", lockfile];
    } else if (declares) {
      install = [{ name: "install", command: UNLOCKED_INSTALL }];
      installNote =
        "No node_modules, and package.json declares dependencies but no lockfile: running npm install first.";
      installInputs = ["package.json"];
    }
  }
  if (checks.length === 0 && install === undefined) return null;
  return {
    source: "package.json",
    checks,
    ...(install && installNote
      ? { install, installNotes: [installNote], installInputs, installOutputs: ["node_modules"] }
      : {}),
  };
}

// --- coverage -----------------------------------------------------------------------------

/**
 * Line coverage from istanbul's json-summary (`coverage-summary.json`, written by c8, nyc,
 * jest and vitest): the per-file entries without test files, or the total when the report
 * has no file entries.
 */
export function parseIstanbulSummary(json: unknown, root: string): CoverageFigures | null {
  if (typeof json !== "object" || json === null) return null;
  const entries = Object.entries(
    json as Record<string, { lines?: { total?: unknown; covered?: unknown } }>,
  );
  let covered = 0;
  let total = 0;
  let files = 0;
  let excluded = 0;
  for (const [key, value] of entries) {
    if (key === "total") continue;
    const rel = relativeTo(root, key);
    if (rel === null) continue;
    if (isTestFile(rel)) {
      excluded++;
      continue;
    }
    const t = Number(value?.lines?.total);
    const c = Number(value?.lines?.covered);
    if (!Number.isFinite(t) || !Number.isFinite(c)) continue;
    files++;
    total += t;
    covered += c;
  }
  if (files === 0 && excluded === 0) {
    const all = (json as Record<string, { lines?: { total?: unknown; covered?: unknown } }>).total;
    const t = Number(all?.lines?.total);
    const c = Number(all?.lines?.covered);
    if (!Number.isFinite(t) || !Number.isFinite(c) || t === 0) return null;
    return { covered: c, total: t, files: 0, excluded_test_files: 0 };
  }
  return total > 0 ? { covered, total, files, excluded_test_files: excluded } : null;
}

/** Single-quotes a word for sh. */
function shellQuote(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}

/**
 * c8's entry point in this service's own dependencies: scans have no network, so the tool
 * is installed with the service, never fetched at scan time.
 */
export function serviceC8(): string {
  const require = createRequire(import.meta.url);
  return path.join(path.dirname(require.resolve("c8/package.json")), "bin", "c8.js");
}

function nonEmpty(value: unknown): boolean {
  return typeof value === "object" && value !== null && Object.keys(value).length > 0;
}

/** A package.json script that runs the tests under nyc or c8 (`test-cov`, `coverage`, …). */
export function findCoverageScript(
  scripts: Record<string, unknown>,
): { name: string; script: string; tool: "nyc" | "c8" } | null {
  const candidates = Object.entries(scripts)
    .filter((e): e is [string, string] => typeof e[1] === "string")
    .filter(([name]) => /cov/i.test(name) || /^test[:-]ci$/i.test(name))
    // Names that say coverage first, then CI scripts.
    .sort(([a], [b]) => Number(!/cov/i.test(a)) - Number(!/cov/i.test(b)));
  for (const [name, script] of candidates) {
    const match = /(?:^|[\s;&|(])(nyc|c8)(?=\s)/.exec(script);
    // `nyc report`/`c8 report` alone only prints an earlier run.
    if (match && !/^\s*(nyc|c8)\s+report\b/.test(script))
      return { name, script, tool: match[1] as "nyc" | "c8" };
  }
  return null;
}

/** The script with a json-summary reporter added to its nyc/c8 call, and where it writes. */
export function withJsonSummary(
  script: string,
  tool: "nyc" | "c8",
): { command: string; reportDir: string } {
  const command = script.replace(
    new RegExp(`(^|[\\s;&|(])${tool}(?=\\s)`),
    `$1${tool} --reporter=json-summary`,
  );
  const dir = /--report-dir[= ](\S+)|(?:^|\s)-o[= ]?(\S+)/.exec(script);
  return { command, reportDir: dir?.[1] ?? dir?.[2] ?? "coverage" };
}

/**
 * The steps of a shell script joined by `&&` or `;` at its top level (not inside quotes,
 * `$(…)` or parentheses), trimmed. A script with one step gives one.
 */
export function scriptSteps(script: string): string[] {
  const steps: string[] = [];
  let depth = 0;
  let quote: "'" | '"' | "`" | null = null;
  let start = 0;
  for (let i = 0; i < script.length; i++) {
    const c = script[i]!;
    if (quote) {
      if (c === "\\" && quote !== "'") i++;
      else if (c === quote) quote = null;
      continue;
    }
    if (c === "\\") i++;
    else if (c === "'" || c === '"' || c === "`") quote = c;
    else if (c === "(") depth++;
    else if (c === ")") depth = Math.max(0, depth - 1);
    else if (depth === 0 && (c === ";" || c === "\n" || (c === "&" && script[i + 1] === "&"))) {
      steps.push(script.slice(start, i));
      if (c === "&") i++;
      start = i + 1;
    }
  }
  steps.push(script.slice(start));
  return steps.map((s) => s.trim()).filter((s) => s !== "");
}

/**
 * The step of a script of several steps that runs the coverage tool (the last that
 * matches), or null when the script has one step or none matches. `a && b && jest`: a
 * failing `a` stops the script before jest writes its report, and arguments given to
 * `npm test -- …` reach only the last step.
 */
export function coverageStep(script: string, runs: RegExp): string | null {
  const steps = scriptSteps(script);
  if (steps.length < 2) return null;
  return steps.filter((s) => runs.test(s)).pop() ?? null;
}

const JEST = /(^|[\s;&|(/])jest(?=\s|$)/;
const VITEST = /(^|[\s;&|(/])vitest(?=\s|$)/;

/** How the tests run with coverage: the command, where its report is, and what else to try. */
interface CoveragePlan {
  command: string;
  method: string;
  summaryFile: string;
  /** A command that reports the tool's last run again (a config moved the report). */
  fallback: string | null;
  /** The coverage tool's own step run alone, when the whole script wrote no report. */
  alone: { command: string; summaryFile: string } | null;
}

/**
 * The repository's own coverage script when its tool is installed, else `npm test` with
 * jest's or vitest's coverage options, else c8 around `npm test`.
 */
async function coveragePlan(
  ctx: CoverageContext,
  script: string,
  scripts: Record<string, unknown>,
): Promise<CoveragePlan> {
  const root = ctx.root;
  const bin = path.join(root, "node_modules", ".bin");
  const own = findCoverageScript(scripts);
  let command: string;
  let method: string;
  let summaryFile: string;
  let fallback: string | null = null;
  let alone: CoveragePlan["alone"] = null;
  if (own && (await exists(root, path.join(bin, own.tool)))) {
    const added = withJsonSummary(own.script, own.tool);
    command = added.command;
    method = `the repository's coverage script \`${own.name}\` (${own.tool})`;
    summaryFile = path.join(root, added.reportDir, "coverage-summary.json");
    // When a config file moves the report elsewhere, the tool reports its last run again.
    fallback = `${own.tool} report --reporter=json-summary --report-dir=${REPORT_DIR}`;
    const step = coverageStep(own.script, new RegExp(`(^|[\\s;&|(])${own.tool}(?=\\s)`));
    if (step) {
      const stepAdded = withJsonSummary(step, own.tool);
      alone = {
        command: stepAdded.command,
        summaryFile: path.join(root, stepAdded.reportDir, "coverage-summary.json"),
      };
    }
  } else if (JEST.test(script)) {
    const args = `--coverage --coverageReporters=json-summary --coverageDirectory=${REPORT_DIR}`;
    command = `npm test -- ${args}`;
    method = "jest --coverage";
    summaryFile = path.join(root, REPORT_DIR, "coverage-summary.json");
    const step = coverageStep(script, JEST);
    if (step) alone = { command: `${step} ${args}`, summaryFile };
  } else if (
    VITEST.test(script) &&
    ((await exists(root, "node_modules/@vitest/coverage-v8")) ||
      (await exists(root, "node_modules/@vitest/coverage-istanbul")))
  ) {
    const args = `--coverage.enabled=true --coverage.reporter=json-summary --coverage.reportsDirectory=${REPORT_DIR}`;
    command = `npm test -- ${args}`;
    method = "vitest --coverage";
    summaryFile = path.join(root, REPORT_DIR, "coverage-summary.json");
    const step = coverageStep(script, VITEST);
    if (step) alone = { command: `${step} ${args}`, summaryFile };
  } else {
    command = `node ${shellQuote(sandboxPath(serviceC8()))} --reporter=json-summary --report-dir=${REPORT_DIR} --temp-directory=${REPORT_DIR}/tmp npm test`;
    method = "c8 around npm test";
    summaryFile = path.join(root, REPORT_DIR, "coverage-summary.json");
  }
  return { command, method, summaryFile, fallback, alone };
}

async function javascriptCoverage(ctx: CoverageContext): Promise<CoverageAttempt> {
  const notes: string[] = [];
  const manifest = ctx.files.get("package.json");
  if (!manifest)
    return { ok: false, reason: "no package.json at the repository root", command: null, notes };
  let pkg: Record<string, unknown>;
  try {
    pkg = JSON.parse(manifest.text) as Record<string, unknown>;
  } catch {
    return { ok: false, reason: "package.json is not valid JSON", command: null, notes };
  }
  const scripts = (pkg.scripts ?? {}) as Record<string, unknown>;
  const script = typeof scripts.test === "string" ? scripts.test.trim() : "";
  if (script === "" || /no test specified/.test(script))
    return { ok: false, reason: "package.json has no test script", command: null, notes };

  const root = ctx.root;
  const declares = nonEmpty(pkg.dependencies) || nonEmpty(pkg.devDependencies);
  // The scan's setup step installed them (verify/setup.ts); its commands have no network.
  if (declares && !(await exists(root, "node_modules")))
    return {
      ok: false,
      reason: `the dependencies are not installed: ${ctx.setupFailure ?? "the setup step installed none"}`,
      command: null,
      notes,
    };

  const binSeen = path.posix.join(ctx.sandboxRoot, "node_modules", ".bin");
  const pathEnv = { PATH: `${binSeen}:${process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin"}` };
  const plan = await coveragePlan(ctx, script, scripts);
  const { method, summaryFile, fallback, alone } = plan;
  let command = plan.command;
  await removeReport(root, summaryFile);
  let result = await ctx.run(command, pathEnv);
  if (!result) return { ok: false, reason: ctx.outOfTime(), command, notes };
  if (result.timedOut) return timedOutAttempt(result, command, notes);
  let figures = parseIstanbulSummary(await readJson(root, summaryFile), ctx.sandboxRoot);
  let testsPassed = result.ok;
  if (!figures && alone) {
    // A failing earlier step (`a && jest`) stopped the script before its coverage step, or
    // the coverage arguments went to a later step: the step runs alone, after the script
    // has run its earlier steps (builds stay built). A failure is still a failure.
    const first = result;
    await removeReport(root, alone.summaryFile);
    const again = await ctx.run(alone.command, pathEnv);
    if (!again) return { ok: false, reason: ctx.outOfTime(), command, notes };
    if (again.timedOut) return timedOutAttempt(again, alone.command, notes);
    figures = parseIstanbulSummary(await readJson(root, alone.summaryFile), ctx.sandboxRoot);
    if (figures) {
      notes.push(
        first.ok
          ? `\`${command}\` wrote no coverage report; its coverage step \`${alone.command}\` was run on its own.`
          : `\`${command}\` failed (${describeResult(first)}) before its coverage step wrote a report; the step \`${alone.command}\` was run on its own.`,
      );
      testsPassed = first.ok && again.ok;
      command = alone.command;
      result = again;
    }
  }
  if (!figures && fallback) {
    const report = await ctx.run(fallback, pathEnv);
    if (report?.ok)
      figures = parseIstanbulSummary(
        await readJson(root, path.join(REPORT_DIR, "coverage-summary.json")),
        ctx.sandboxRoot,
      );
  }
  if (!figures)
    return {
      ok: false,
      reason: `the test run wrote no coverage report (${describeResult(result)})`,
      command,
      notes,
    };
  if (!result.ok)
    notes.push(`The tests failed (${describeResult(result)}); coverage is from that run.`);
  return { ok: true, figures, unit: "lines", command, method, testsPassed, notes };
}

// --- manifests ----------------------------------------------------------------------------

/** package-lock.json files of large monorepos run to tens of MiB. */
const MAX_LOCK_BYTES = 64 * 1024 * 1024;

function fileText(repo: ManifestFiles, rel: string): string | undefined {
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
  const bytes = await readBounded(root, name, MAX_LOCK_BYTES);
  return typeof bytes === "string" ? undefined : bytes.toString("utf8");
}

async function readNpm(root: string, repo: ManifestFiles, out: Manifests): Promise<void> {
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
