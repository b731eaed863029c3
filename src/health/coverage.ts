/*
 * Test coverage. For each language with source files the repository's own tests are run
 * under a coverage tool, through the sandbox, within one time budget
 * (HEALTH_COVERAGE_TIMEOUT_S). Figures are always read from the tool's machine-readable
 * report (istanbul's json-summary, coverage.py's JSON, Go's cover profile), never from a
 * text table, whose layout changes between versions (Node 20, 22 and 24 print different
 * tables):
 *
 * - JavaScript/TypeScript, after installing dependencies when declared and missing:
 *   the repository's own coverage script when it runs nyc or c8 (a json-summary reporter
 *   is added to it); jest's `--coverage`; vitest's `--coverage` when the repository has a
 *   coverage provider; otherwise c8 (a dependency of this service, never downloaded at scan
 *   time) around `npm test`, which covers mocha, ava, tap, node --test and plain node.
 * - Python: coverage.py around pytest (when the repository uses it) or unittest.
 * - Go: `go test -coverprofile ./...`, totals computed from the profile as
 *   `go tool cover -func` does.
 *
 * Test files are left out of the figure where the report lists files. When a language
 * cannot be measured, its coverage is estimated from the ratio of test to source lines
 * and marked so (`measured: false` with the reason).
 */
import { readFile, rm, stat } from "node:fs/promises";
import { createRequire } from "node:module";
import path from "node:path";
import { describeResult, runSandboxed, type SandboxResult } from "../util/sandbox.js";
import { findLockfile, INSTALL, UNLOCKED_INSTALL } from "../ecosystems/javascript.js";
import { isTestPath, languageOf, type RepoFiles, type ScanFile } from "./files.js";
import { clampScore, type MetricResult } from "./types.js";

export type CoverageLanguage = "javascript" | "python" | "go";

export interface LanguageCoverage {
  language: CoverageLanguage;
  source_files: number;
  source_lines: number;
  test_files: number;
  test_lines: number;
  measured: boolean;
  /** Covered and coverable units (lines or statements) when measured. */
  covered: number | null;
  total: number | null;
  unit: "lines" | "statements" | null;
  percent: number;
  /** The command that produced the figure, or what was tried. */
  command: string | null;
  method: string;
  tests_passed: boolean | null;
  reason?: string;
  notes: string[];
}

export interface CoverageOptions {
  root: string;
  /** Budget for every install and test command of the scan together. */
  timeoutMs: number;
  signal?: AbortSignal;
  /** GOPROXY for `go test` (from GOPROXY_URL). */
  goproxy?: string;
}

/** An estimate never claims more than this. */
export const ESTIMATE_CAP = 90;

/** The estimate: test lines per source line, as a percentage, capped at ESTIMATE_CAP. */
export function estimateCoverage(testLines: number, sourceLines: number): number {
  if (sourceLines <= 0) return 0;
  return clampScore(Math.min(ESTIMATE_CAP, (100 * testLines) / sourceLines));
}

// --- report parsers ----------------------------------------------------------------------

export interface CoverageFigures {
  covered: number;
  total: number;
  /** Files counted, and test files left out. */
  files: number;
  excluded_test_files: number;
}

/** Relative posix path of a report entry, or null when it lies outside the repository. */
function relativeTo(root: string, file: string): string | null {
  const rel = path.isAbsolute(file) ? path.relative(root, file) : file;
  const posix = rel.split(path.sep).join("/").replace(/^\.\//, "");
  if (posix.startsWith("../") || posix === ".." || posix.startsWith("node_modules/")) return null;
  return posix;
}

function isTestFile(rel: string): boolean {
  return isTestPath(rel, languageOf(rel));
}

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

/** Statement coverage from coverage.py's JSON report (`coverage json`), test files left out. */
export function parseCoveragePyJson(json: unknown, root: string): CoverageFigures | null {
  const filesField = (json as { files?: unknown } | null)?.files;
  if (typeof filesField !== "object" || filesField === null) return null;
  let covered = 0;
  let total = 0;
  let files = 0;
  let excluded = 0;
  for (const [key, value] of Object.entries(
    filesField as Record<
      string,
      { summary?: { covered_lines?: unknown; num_statements?: unknown } }
    >,
  )) {
    const rel = relativeTo(root, key);
    if (rel === null) continue;
    if (isTestFile(rel)) {
      excluded++;
      continue;
    }
    const t = Number(value?.summary?.num_statements);
    const c = Number(value?.summary?.covered_lines);
    if (!Number.isFinite(t) || !Number.isFinite(c)) continue;
    files++;
    total += t;
    covered += c;
  }
  return total > 0 ? { covered, total, files, excluded_test_files: excluded } : null;
}

/** Covered and total statements of a Go cover profile (blocks deduplicated). */
export function parseGoProfile(text: string): {
  files: Map<string, { covered: number; total: number }>;
} {
  const blocks = new Map<string, { file: string; statements: number; hit: boolean }>();
  for (const line of text.split(/\r?\n/)) {
    const match = /^(.+):(\d+\.\d+,\d+\.\d+) (\d+) (\d+)$/.exec(line);
    if (!match) continue;
    const key = `${match[1]}:${match[2]}`;
    const prev = blocks.get(key);
    const hit = Number(match[4]) > 0;
    blocks.set(key, {
      file: match[1]!,
      statements: Number(match[3]),
      hit: hit || (prev?.hit ?? false),
    });
  }
  const files = new Map<string, { covered: number; total: number }>();
  for (const block of blocks.values()) {
    const entry = files.get(block.file) ?? { covered: 0, total: 0 };
    entry.total += block.statements;
    if (block.hit) entry.covered += block.statements;
    files.set(block.file, entry);
  }
  return { files };
}

// --- running -----------------------------------------------------------------------------

interface Budget {
  deadline: number;
  remaining(): number;
}

const OUTPUT_BYTES = 512 * 1024;
/** Scratch folder for the coverage tools' reports, inside the working copy. */
const REPORT_DIR = ".foreman-coverage";

async function exists(file: string): Promise<boolean> {
  return stat(file).then(
    () => true,
    () => false,
  );
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

async function run(
  command: string,
  options: CoverageOptions,
  budget: Budget,
  env: Record<string, string> = {},
): Promise<SandboxResult | null> {
  const left = budget.remaining();
  if (left < 1000) return null;
  return runSandboxed(command, {
    cwd: options.root,
    timeoutMs: left,
    maxOutputBytes: OUTPUT_BYTES,
    env,
    ...(options.signal ? { signal: options.signal } : {}),
  });
}

function outOfTime(budget: Budget): string {
  return `the coverage time budget (HEALTH_COVERAGE_TIMEOUT_S) was used up${budget.remaining() <= 0 ? "" : " before the tests could start"}`;
}

async function readJson(file: string): Promise<unknown> {
  try {
    return JSON.parse(await readFile(file, "utf8")) as unknown;
  } catch {
    return undefined;
  }
}

type Attempt =
  | {
      ok: true;
      figures: CoverageFigures;
      unit: "lines" | "statements";
      command: string;
      method: string;
      testsPassed: boolean;
      notes: string[];
    }
  | { ok: false; reason: string; command: string | null; notes: string[] };

function timedOutAttempt(result: SandboxResult, command: string, notes: string[]): Attempt {
  return {
    ok: false,
    reason: `the tests did not finish within the coverage time budget (HEALTH_COVERAGE_TIMEOUT_S): ${describeResult(result)}`,
    command,
    notes,
  };
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

async function javascriptAttempt(
  options: CoverageOptions,
  budget: Budget,
  byPath: Map<string, ScanFile>,
): Promise<Attempt> {
  const notes: string[] = [];
  const manifest = byPath.get("package.json");
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

  const root = options.root;
  const declares = nonEmpty(pkg.dependencies) || nonEmpty(pkg.devDependencies);
  if (declares && !(await exists(path.join(root, "node_modules")))) {
    const locked = await findLockfile(root);
    const install = locked ? INSTALL[locked.manager].command : UNLOCKED_INSTALL;
    const result = await run(install, options, budget);
    if (!result) return { ok: false, reason: outOfTime(budget), command: install, notes };
    if (!result.ok)
      return {
        ok: false,
        reason: `installing the dependencies failed: ${describeResult(result)}`,
        command: install,
        notes,
      };
    notes.push(
      `Dependencies installed with \`${install}\` in ${Math.round(result.durationMs / 1000)} s.`,
    );
  }

  const bin = path.join(root, "node_modules", ".bin");
  const pathEnv = { PATH: `${bin}:${process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin"}` };
  const own = findCoverageScript(scripts);
  let command: string;
  let method: string;
  let summaryFile: string;
  let fallback: string | null = null;
  if (own && (await exists(path.join(bin, own.tool)))) {
    const added = withJsonSummary(own.script, own.tool);
    command = added.command;
    method = `the repository's coverage script \`${own.name}\` (${own.tool})`;
    summaryFile = path.join(root, added.reportDir, "coverage-summary.json");
    // When a config file moves the report elsewhere, the tool reports its last run again.
    fallback = `${own.tool} report --reporter=json-summary --report-dir=${REPORT_DIR}`;
  } else if (/(^|[\s;&|(/])jest(?=\s|$)/.test(script)) {
    command = `npm test -- --coverage --coverageReporters=json-summary --coverageDirectory=${REPORT_DIR}`;
    method = "jest --coverage";
    summaryFile = path.join(root, REPORT_DIR, "coverage-summary.json");
  } else if (
    /(^|[\s;&|(/])vitest(?=\s|$)/.test(script) &&
    ((await exists(path.join(root, "node_modules/@vitest/coverage-v8"))) ||
      (await exists(path.join(root, "node_modules/@vitest/coverage-istanbul"))))
  ) {
    command = `npm test -- --coverage.enabled=true --coverage.reporter=json-summary --coverage.reportsDirectory=${REPORT_DIR}`;
    method = "vitest --coverage";
    summaryFile = path.join(root, REPORT_DIR, "coverage-summary.json");
  } else {
    command = `node ${shellQuote(serviceC8())} --reporter=json-summary --report-dir=${REPORT_DIR} --temp-directory=${REPORT_DIR}/tmp npm test`;
    method = "c8 around npm test";
    summaryFile = path.join(root, REPORT_DIR, "coverage-summary.json");
  }
  await rm(summaryFile, { force: true });
  const result = await run(command, options, budget, pathEnv);
  if (!result) return { ok: false, reason: outOfTime(budget), command, notes };
  if (result.timedOut) return timedOutAttempt(result, command, notes);
  let figures = parseIstanbulSummary(await readJson(summaryFile), root);
  if (!figures && fallback) {
    const report = await run(fallback, options, budget, pathEnv);
    if (report?.ok)
      figures = parseIstanbulSummary(
        await readJson(path.join(root, REPORT_DIR, "coverage-summary.json")),
        root,
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
  return { ok: true, figures, unit: "lines", command, method, testsPassed: result.ok, notes };
}

/** Python interpreters tried for coverage.py: the worker's `python3`, then the system's. */
export const PYTHON_CANDIDATES = ["python3", "/usr/bin/python3"];

/** True when the repository runs its tests with pytest (config, imports or test functions). */
export function usesPytest(byPath: Map<string, ScanFile>): boolean {
  for (const [rel, file] of byPath) {
    const name = path.posix.basename(rel);
    if (name === "conftest.py" || name === "pytest.ini") return true;
    if (!rel.includes("/") && /^(pyproject\.toml|setup\.cfg|tox\.ini)$/.test(name))
      if (/^\[(tool\.pytest|tool:pytest|pytest)\b/m.test(file.text)) return true;
    if (
      file.test &&
      file.language === "python" &&
      // pytest's imports, or bare `def test_…` functions, which only pytest collects.
      /^(\s*(import pytest|from pytest\b)|(async )?def test_)/m.test(file.text)
    )
      return true;
  }
  return false;
}

async function pythonAttempt(
  options: CoverageOptions,
  budget: Budget,
  byPath: Map<string, ScanFile>,
): Promise<Attempt> {
  const notes: string[] = [];
  const pytest = usesPytest(byPath);
  let python: string | null = null;
  let probe = "";
  for (const candidate of PYTHON_CANDIDATES) {
    probe = `${candidate} -c 'import coverage${pytest ? ", pytest" : ""}'`;
    const available = await run(probe, options, budget);
    if (!available) return { ok: false, reason: outOfTime(budget), command: probe, notes };
    if (available.ok) {
      python = candidate;
      break;
    }
  }
  if (!python)
    return {
      ok: false,
      reason: `coverage.py${pytest ? " and pytest are" : " is"} not installed on this worker (tried ${PYTHON_CANDIDATES.join(", ")})`,
      command: probe,
      notes,
    };
  const root = options.root;
  let runner: string;
  if (pytest) runner = "-m pytest -q -p no:cacheprovider";
  else {
    // unittest discovers only packages below its start folder: a tests folder without
    // __init__.py is started from directly.
    const dir = ["tests", "test"].find((d) =>
      [...byPath.keys()].some((p) => p.startsWith(`${d}/`) && p.endsWith(".py")),
    );
    runner =
      dir && !byPath.has(`${dir}/__init__.py`)
        ? `-m unittest discover -s ${dir}`
        : "-m unittest discover";
  }
  const data = `${REPORT_DIR}/python.coverage`;
  const json = `${REPORT_DIR}/python-coverage.json`;
  const command = `mkdir -p ${REPORT_DIR} && ${python} -m coverage run ${runner}`;
  const env = { PYTHONDONTWRITEBYTECODE: "1", COVERAGE_FILE: data };
  const result = await run(command, options, budget, env);
  if (!result) return { ok: false, reason: outOfTime(budget), command, notes };
  if (result.timedOut) return timedOutAttempt(result, command, notes);
  const report = await run(`${python} -m coverage json -q -o ${json}`, options, budget, env);
  const figures = report?.ok
    ? parseCoveragePyJson(await readJson(path.join(root, json)), root)
    : null;
  if (!figures)
    return {
      ok: false,
      reason: `coverage.py wrote no report (${describeResult(result)})`,
      command,
      notes,
    };
  if (!result.ok)
    notes.push(`The tests failed (${describeResult(result)}); coverage is from that run.`);
  notes.push("Python dependencies are not installed by the scan; tests needing them fail.");
  return {
    ok: true,
    figures,
    unit: "statements",
    command,
    method: `coverage.py around ${pytest ? "pytest" : "unittest"}`,
    testsPassed: result.ok,
    notes,
  };
}

async function goAttempt(options: CoverageOptions, budget: Budget): Promise<Attempt> {
  const notes: string[] = [];
  const profile = ".foreman-coverage.out";
  const command = `go test -coverprofile=${profile} ./...`;
  const result = await run(command, options, budget, {
    GOFLAGS: "-mod=mod",
    GOTOOLCHAIN: "local",
    ...(options.goproxy ? { GOPROXY: options.goproxy } : {}),
  });
  if (!result) return { ok: false, reason: outOfTime(budget), command, notes };
  if (result.timedOut) return timedOutAttempt(result, command, notes);
  if (result.exitCode === 127 || /go: (command )?not found/.test(result.output))
    return { ok: false, reason: "go is not installed on this worker", command, notes };
  const text = await readFile(path.join(options.root, profile), "utf8").catch(() => "");
  const { files } = parseGoProfile(text);
  let covered = 0;
  let total = 0;
  for (const entry of files.values()) {
    covered += entry.covered;
    total += entry.total;
  }
  if (total === 0)
    return {
      ok: false,
      reason: `go test wrote no coverage profile (${describeResult(result)})`,
      command,
      notes,
    };
  if (!result.ok)
    notes.push(`Some tests failed (${describeResult(result)}); coverage is from that run.`);
  return {
    ok: true,
    figures: { covered, total, files: files.size, excluded_test_files: 0 },
    unit: "statements",
    command,
    method: "go test -coverprofile",
    testsPassed: result.ok,
    notes,
  };
}

function languageGroup(file: ScanFile): CoverageLanguage | null {
  if (file.language === "javascript" || file.language === "typescript") return "javascript";
  if (file.language === "python" || file.language === "go") return file.language;
  return null;
}

/** The test-coverage metric of a cloned repository. */
export async function measureCoverage(
  repo: RepoFiles,
  options: CoverageOptions,
): Promise<MetricResult> {
  const budget: Budget = {
    deadline: Date.now() + options.timeoutMs,
    remaining() {
      return this.deadline - Date.now();
    },
  };
  const byPath = new Map(repo.files.map((f) => [f.path, f]));
  const stats = new Map<
    CoverageLanguage,
    { sourceFiles: number; sourceLines: number; testFiles: number; testLines: number }
  >();
  for (const file of repo.files) {
    const group = languageGroup(file);
    if (!group || file.generated) continue;
    const entry = stats.get(group) ?? {
      sourceFiles: 0,
      sourceLines: 0,
      testFiles: 0,
      testLines: 0,
    };
    if (file.test) {
      entry.testFiles++;
      entry.testLines += file.codeLines;
    } else {
      entry.sourceFiles++;
      entry.sourceLines += file.codeLines;
    }
    stats.set(group, entry);
  }
  const languages = [...stats.entries()].filter(([, s]) => s.sourceFiles > 0);
  if (languages.length === 0)
    return {
      score: null,
      summary: "No JavaScript, TypeScript, Python or Go source files; coverage not scored.",
      details: { languages: [], reason: "no source files in a language the scan can test" },
      measured: true,
    };

  const results: LanguageCoverage[] = [];
  for (const [language, s] of languages) {
    const base = {
      language,
      source_files: s.sourceFiles,
      source_lines: s.sourceLines,
      test_files: s.testFiles,
      test_lines: s.testLines,
    };
    let attempt: Attempt;
    if (s.testFiles === 0 && language !== "javascript")
      attempt = { ok: false, reason: "no test files", command: null, notes: [] };
    else if (language === "javascript") attempt = await javascriptAttempt(options, budget, byPath);
    else if (language === "python") attempt = await pythonAttempt(options, budget, byPath);
    else attempt = await goAttempt(options, budget);
    options.signal?.throwIfAborted();
    if (attempt.ok) {
      results.push({
        ...base,
        measured: true,
        covered: attempt.figures.covered,
        total: attempt.figures.total,
        unit: attempt.unit,
        percent: clampScore((100 * attempt.figures.covered) / attempt.figures.total),
        command: attempt.command,
        method: attempt.method,
        tests_passed: attempt.testsPassed,
        notes:
          attempt.figures.excluded_test_files > 0
            ? [
                ...attempt.notes,
                `${attempt.figures.excluded_test_files} test file(s) in the report left out.`,
              ]
            : attempt.notes,
      });
    } else {
      results.push({
        ...base,
        measured: false,
        covered: null,
        total: null,
        unit: null,
        percent: estimateCoverage(s.testLines, s.sourceLines),
        command: attempt.command,
        method: "estimate from the ratio of test lines to source lines",
        tests_passed: null,
        reason: attempt.reason,
        notes: attempt.notes,
      });
    }
  }

  // Languages weigh by their source lines; measured counts are used where known.
  const weightOf = (r: LanguageCoverage) => r.source_lines;
  const weights = results.reduce((sum, r) => sum + weightOf(r), 0);
  const percent =
    weights > 0
      ? results.reduce((sum, r) => sum + r.percent * weightOf(r), 0) / weights
      : results.reduce((sum, r) => sum + r.percent, 0) / results.length;
  const score = clampScore(percent);
  const measured = results.every((r) => r.measured);
  const parts = results.map((r) =>
    r.measured
      ? `${r.language} ${r.percent}% of ${r.unit}${r.covered !== null ? ` (${r.covered}/${r.total})` : ""}, measured with ${r.method}`
      : `${r.language} estimated at ${r.percent}% (${r.test_lines} test lines for ${r.source_lines} source lines)`,
  );
  const details: Record<string, unknown> = { languages: results };
  if (!measured)
    details.reason = results
      .filter((r) => !r.measured)
      .map((r) => `${r.language}: ${r.reason}`)
      .join("; ");
  return { score, summary: `Coverage ${score}%: ${parts.join("; ")}.`, details, measured };
}
