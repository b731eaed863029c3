/*
 * Test coverage. For each language with source files the repository's own tests are run
 * with coverage, through the sandbox, within one time budget (HEALTH_COVERAGE_TIMEOUT_S):
 *
 * - JavaScript/TypeScript: the `test` script of package.json, after installing dependencies
 *   when they are declared and missing (the lockfile's package manager). `node --test`
 *   scripts get `--experimental-test-coverage`; jest gets `--coverage`; vitest gets
 *   `--coverage` when a coverage provider is installed; scripts already under c8/nyc print
 *   their own summary; other runners run under the repository's c8 when it has one.
 * - Python: `pytest --cov` when pytest and pytest-cov are importable on the worker.
 * - Go: `go test -coverprofile ./...`.
 *
 * When a language cannot be measured, its coverage is estimated from the ratio of test to
 * source lines and marked so (`measured: false` with the reason).
 */
import { readFile, stat } from "node:fs/promises";
import path from "node:path";
import { describeResult, runSandboxed, type SandboxResult } from "../util/sandbox.js";
import type { RepoFiles, ScanFile } from "./files.js";
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

// --- output parsers ----------------------------------------------------------------------

export interface NodeCoverageRow {
  file: string;
  linePercent: number;
  uncovered: string;
}

/** Rows and the "all files" line percentage of Node's test-runner coverage table. */
export function parseNodeCoverage(output: string): { rows: NodeCoverageRow[]; all: number | null } {
  const rows: NodeCoverageRow[] = [];
  let all: number | null = null;
  const start = output.lastIndexOf("start of coverage report");
  if (start < 0) return { rows, all };
  for (const raw of output.slice(start).split(/\r?\n/)) {
    const line = raw.replace(/^[#ℹ]\s?/, "");
    const cells = line.split("|").map((c) => c.trim());
    if (cells.length < 4) continue;
    const pct = Number(cells[1]);
    if (cells[1] === "" || !Number.isFinite(pct)) continue;
    if (/^all files$/i.test(cells[0]!)) all = pct;
    else rows.push({ file: cells[0]!, linePercent: pct, uncovered: cells[4] ?? "" });
  }
  return { rows, all };
}

/** Lines listed in Node's "uncovered lines" column ("3-7 12 15-16"). */
export function countUncovered(list: string): number {
  let n = 0;
  for (const part of list.split(/[\s,]+/)) {
    const match = /^(\d+)(?:-(\d+))?$/.exec(part);
    if (!match) continue;
    n += match[2] ? Number(match[2]) - Number(match[1]) + 1 : 1;
  }
  return n;
}

/** Istanbul's text-summary ("Lines : 85.71% ( 6/7 )") or text table ("All files | … |"). */
export function parseIstanbul(
  output: string,
): { covered: number | null; total: number | null; percent: number } | null {
  const summary = /^\s*Lines\s*:\s*([\d.]+)%\s*\(\s*(\d+)\s*\/\s*(\d+)\s*\)/m.exec(output);
  if (summary)
    return { percent: Number(summary[1]), covered: Number(summary[2]), total: Number(summary[3]) };
  const statements = /^\s*Statements\s*:\s*([\d.]+)%\s*\(\s*(\d+)\s*\/\s*(\d+)\s*\)/m.exec(output);
  if (statements)
    return {
      percent: Number(statements[1]),
      covered: Number(statements[2]),
      total: Number(statements[3]),
    };
  // The text table: File | % Stmts | % Branch | % Funcs | % Lines | Uncovered
  const table =
    /^\s*All files\s*\|\s*([\d.]+)\s*\|\s*([\d.]+)\s*\|\s*([\d.]+)\s*\|\s*([\d.]+)/m.exec(output);
  if (table) return { percent: Number(table[4]), covered: null, total: null };
  return null;
}

export interface PytestRow {
  name: string;
  statements: number;
  missed: number;
}

/** The per-file rows of pytest-cov's terminal report (TOTAL excluded). */
export function parsePytestCov(output: string): PytestRow[] {
  const rows: PytestRow[] = [];
  const start = output.search(/^Name\s+Stmts\s+Miss/m);
  if (start < 0) return rows;
  for (const line of output.slice(start).split(/\r?\n/).slice(1)) {
    const match = /^(\S.*?)\s+(\d+)\s+(\d+)(?:\s+\d+\s+\d+)?\s+(\d+(?:\.\d+)?)%/.exec(line);
    if (!match) continue;
    if (match[1] === "TOTAL") break;
    rows.push({ name: match[1]!, statements: Number(match[2]), missed: Number(match[3]) });
  }
  return rows;
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

async function exists(file: string): Promise<boolean> {
  return stat(file).then(
    () => true,
    () => false,
  );
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

type Attempt =
  | {
      ok: true;
      covered: number | null;
      total: number | null;
      percent: number;
      unit: "lines" | "statements";
      command: string;
      method: string;
      testsPassed: boolean;
      notes: string[];
    }
  | { ok: false; reason: string; command: string | null; notes: string[] };

const LOCKFILES: ReadonlyArray<readonly [string, string]> = [
  ["pnpm-lock.yaml", "pnpm install --frozen-lockfile"],
  ["yarn.lock", "yarn install --frozen-lockfile"],
  ["bun.lockb", "bun install --frozen-lockfile"],
  ["bun.lock", "bun install --frozen-lockfile"],
  ["package-lock.json", "npm ci --no-audit --no-fund"],
  ["npm-shrinkwrap.json", "npm ci --no-audit --no-fund"],
];

function nonEmpty(value: unknown): boolean {
  return typeof value === "object" && value !== null && Object.keys(value).length > 0;
}

/** Source-only coverage from Node's table: test files left out, totals from line counts. */
function nodeSourceCoverage(
  rows: NodeCoverageRow[],
  byPath: Map<string, ScanFile>,
): { covered: number; total: number } | null {
  let covered = 0;
  let total = 0;
  let matched = 0;
  for (const row of rows) {
    const file = byPath.get(row.file.replace(/\\/g, "/").replace(/^\.\//, ""));
    if (!file) return null; // a tree-shaped table or an unknown path: use the total line
    matched++;
    if (file.test || file.language === null) continue;
    const lines = file.lines.length;
    const uncovered = countUncovered(row.uncovered);
    total += lines;
    covered += Math.max(0, lines - uncovered);
  }
  return matched > 0 && total > 0 ? { covered, total } : null;
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
    let install: string | undefined;
    for (const [lockfile, command] of LOCKFILES)
      if (await exists(path.join(root, lockfile))) {
        install = command;
        break;
      }
    install ??= "npm install --no-audit --no-fund";
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
  let command: string;
  let method: string;
  let parse: (
    output: string,
  ) => { covered: number | null; total: number | null; percent: number } | null;

  if (/(^|[\s;&|(])node\s+(?:[^;&|]*\s)?--test(?=\s|$)/.test(script)) {
    command = script.replace(
      /(^|[\s;&|(])(node\s+(?:[^;&|]*\s)?--test)(?=\s|$)/,
      "$1$2 --experimental-test-coverage",
    );
    method = "node --test --experimental-test-coverage";
    parse = (output) => {
      const table = parseNodeCoverage(output);
      const source = nodeSourceCoverage(table.rows, byPath);
      if (source) return { ...source, percent: (100 * source.covered) / source.total };
      if (table.all !== null) {
        notes.push(
          "Node's coverage table could not be mapped to files: its all-files line (test files included) is used.",
        );
        return { covered: null, total: null, percent: table.all };
      }
      return null;
    };
  } else if (/\b(c8|nyc)\b/.test(script)) {
    command = "npm test";
    method = "the test script's own c8/nyc";
    parse = parseIstanbul;
  } else if (/\bjest\b/.test(script)) {
    command = "npm test -- --coverage --coverageReporters=text-summary";
    method = "jest --coverage";
    parse = parseIstanbul;
  } else if (
    /\bvitest\b/.test(script) &&
    ((await exists(path.join(root, "node_modules/@vitest/coverage-v8"))) ||
      (await exists(path.join(root, "node_modules/@vitest/coverage-istanbul"))))
  ) {
    command = "npm test -- --coverage.enabled=true --coverage.reporter=text-summary";
    method = "vitest --coverage";
    parse = parseIstanbul;
  } else if (await exists(path.join(bin, "c8"))) {
    command = "c8 --reporter=text-summary npm test";
    method = "c8 (the repository's own)";
    parse = parseIstanbul;
  } else {
    return {
      ok: false,
      reason: `no coverage tool fits the test script \`${script.slice(0, 80)}\` (node --test, jest, vitest with a coverage provider, c8 or nyc)`,
      command: null,
      notes,
    };
  }
  const result = await run(command, options, budget, pathEnv);
  if (!result) return { ok: false, reason: outOfTime(budget), command, notes };
  if (result.timedOut)
    return {
      ok: false,
      reason: `the tests did not finish within the coverage time budget (HEALTH_COVERAGE_TIMEOUT_S): ${describeResult(result)}`,
      command,
      notes,
    };
  const figures = parse(result.output);
  if (!figures)
    return {
      ok: false,
      reason: `the test run printed no coverage summary (${describeResult(result)})`,
      command,
      notes,
    };
  if (!result.ok)
    notes.push(`The tests failed (${describeResult(result)}); coverage is from that run.`);
  return { ok: true, ...figures, unit: "lines", command, method, testsPassed: result.ok, notes };
}

async function pythonAttempt(
  options: CoverageOptions,
  budget: Budget,
  byPath: Map<string, ScanFile>,
): Promise<Attempt> {
  const notes: string[] = [];
  const probe = "python3 -c 'import pytest, pytest_cov'";
  const available = await run(probe, options, budget);
  if (!available) return { ok: false, reason: outOfTime(budget), command: probe, notes };
  if (available.exitCode === 127)
    return { ok: false, reason: "python3 is not installed on this worker", command: probe, notes };
  if (!available.ok)
    return {
      ok: false,
      reason: "pytest and pytest-cov are not installed on this worker",
      command: probe,
      notes,
    };
  const command = "python3 -m pytest -q -p no:cacheprovider --cov=. --cov-report=term";
  const result = await run(command, options, budget, { PYTHONDONTWRITEBYTECODE: "1" });
  if (!result) return { ok: false, reason: outOfTime(budget), command, notes };
  if (result.timedOut)
    return {
      ok: false,
      reason: `the tests did not finish within the coverage time budget: ${describeResult(result)}`,
      command,
      notes,
    };
  const rows = parsePytestCov(result.output).filter((r) => {
    const file = byPath.get(r.name.replace(/\\/g, "/"));
    return !(file?.test ?? /(^|\/)(test_[^/]*|[^/]*_test|conftest)\.py$/.test(r.name));
  });
  const total = rows.reduce((sum, r) => sum + r.statements, 0);
  if (rows.length === 0 || total === 0)
    return {
      ok: false,
      reason: `pytest printed no coverage report (${describeResult(result)})`,
      command,
      notes,
    };
  const covered = total - rows.reduce((sum, r) => sum + r.missed, 0);
  if (!result.ok)
    notes.push(`The tests failed (${describeResult(result)}); coverage is from that run.`);
  notes.push("Python dependencies are not installed by the scan; tests needing them fail.");
  return {
    ok: true,
    covered,
    total,
    percent: (100 * covered) / total,
    unit: "statements",
    command,
    method: "pytest --cov",
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
  if (result.timedOut)
    return {
      ok: false,
      reason: `the tests did not finish within the coverage time budget: ${describeResult(result)}`,
      command,
      notes,
    };
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
    covered,
    total,
    percent: (100 * covered) / total,
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
        covered: attempt.covered,
        total: attempt.total,
        unit: attempt.unit,
        percent: clampScore(attempt.percent),
        command: attempt.command,
        method: attempt.method,
        tests_passed: attempt.testsPassed,
        notes: attempt.notes,
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
