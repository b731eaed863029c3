/*
 * Test coverage. For each ecosystem with a coverage adapter (src/ecosystems/<name>.ts) and
 * source files, the repository's own tests are run under a coverage tool, through the
 * sandbox, within one time budget
 * (HEALTH_COVERAGE_TIMEOUT_S). Figures are always read from the tool's machine-readable
 * report (istanbul's json-summary, coverage.py's JSON, Go's cover profile), never from a
 * text table, whose layout changes between versions (Node 20, 22 and 24 print different
 * tables):
 *
 * - JavaScript/TypeScript, with the dependencies the scan's setup step installed
 *   (verify/setup.ts; the scan itself installs nothing):
 *   the repository's own coverage script when it runs nyc or c8 (a json-summary reporter
 *   is added to it); jest's `--coverage`; vitest's `--coverage` when the repository has a
 *   coverage provider; otherwise c8 (a dependency of this service, never downloaded at scan
 *   time) around `npm test`, which covers mocha, ava, tap, node --test and plain node.
 * - Python: coverage.py around pytest (when the repository uses it) or unittest.
 * - Go: `go test -coverprofile ./...`, totals computed from the profile as
 *   `go tool cover -func` does.
 *
 * Failing tests do not turn a written report into an estimate: the figure is the report's,
 * with `tests_passed: false`. A JavaScript test script of several steps whose earlier step
 * fails before the coverage step runs gets that step run on its own (javascript.ts).
 *
 * Test files are left out of the figure where the report lists files. When a language
 * cannot be measured, its coverage is estimated from the ratio of test to source lines
 * and marked so (`measured: false` with the reason).
 */
import {
  diskBudgetFailure,
  sandboxRoot,
  type SandboxCache,
  type SandboxResult,
} from "../sandbox/index.js";
import {
  ECOSYSTEMS,
  type CoverageAdapter,
  type CoverageAttempt,
  type EcosystemId,
} from "../ecosystems/index.js";
import { parseGoProfile } from "../ecosystems/go.js";
import {
  findCoverageScript,
  parseIstanbulSummary,
  serviceC8,
  withJsonSummary,
} from "../ecosystems/javascript.js";
import { parseCoveragePyJson, PYTHON_CANDIDATES, usesPytest } from "../ecosystems/python.js";
import type { CoverageFigures } from "../ecosystems/types.js";
import { countByStatus, runWithTests, type TestRun } from "../verify/tests/index.js";
import type { RepoFiles, ScanFile } from "./files.js";
import { clampScore, type MetricResult } from "./types.js";

// The report parsers and runner details live with their ecosystems; named here as before.
export {
  findCoverageScript,
  parseCoveragePyJson,
  parseGoProfile,
  parseIstanbulSummary,
  PYTHON_CANDIDATES,
  serviceC8,
  usesPytest,
  withJsonSummary,
  type CoverageFigures,
};

/** The ecosystems with a coverage adapter (ecosystems/index.ts). */
export type CoverageLanguage = EcosystemId;

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
  /**
   * The measured run's tests, counted per test from the runner's report or output
   * (verify/tests/, as verification reads them); null when nothing could be read per test.
   */
  tests: TestCounts | null;
  reason?: string;
  notes: string[];
}

/** How many tests a run had, by status, and which runner said so. */
export interface TestCounts {
  runner: string;
  total: number;
  passed: number;
  failed: number;
  skipped: number;
}

/** The counts of a TestRun. */
export function countTests(run: TestRun | null): TestCounts | null {
  return run ? { runner: run.runner, ...countByStatus(run.tests) } : null;
}

export interface CoverageOptions {
  root: string;
  /** Budget for every install and test command of the scan together. */
  timeoutMs: number;
  signal?: AbortSignal;
  /** GOPROXY for `go test` (from GOPROXY_URL). */
  goproxy?: string;
  /** The package cache of the scan's account and repository (sandbox/cache.ts). */
  cache?: SandboxCache;
  /** Why the scan's setup step did not install the dependencies (verify/setup.ts). */
  setupFailure?: string;
}

/** An estimate never claims more than this. */
export const ESTIMATE_CAP = 90;

/** The estimate: test lines per source line, as a percentage, capped at ESTIMATE_CAP. */
export function estimateCoverage(testLines: number, sourceLines: number): number {
  if (sourceLines <= 0) return 0;
  return clampScore(Math.min(ESTIMATE_CAP, (100 * testLines) / sourceLines));
}

// --- running -----------------------------------------------------------------------------

interface Budget {
  deadline: number;
  remaining(): number;
}

const OUTPUT_BYTES = 512 * 1024;

async function run(
  command: string,
  options: CoverageOptions,
  budget: Budget,
  env: Record<string, string> = {},
  seen?: { tests: TestRun | null },
): Promise<SandboxResult | null> {
  const left = budget.remaining();
  if (left < 1000) return null;
  // With the runner's report where it has one: the tests of the run are counted from it.
  const { result, tests } = await runWithTests(command, {
    cwd: options.root,
    timeoutMs: left,
    maxOutputBytes: OUTPUT_BYTES,
    env,
    ...(options.signal ? { signal: options.signal } : {}),
    ...(options.cache ? { cache: options.cache } : {}),
  });
  // Past TASK_DISK_LIMIT_MB the scan fails with the reason (jobs/health-scan.ts).
  const overBudget = diskBudgetFailure(result, "scan");
  if (overBudget) throw overBudget;
  if (seen && tests) seen.tests = tests;
  return result;
}

function outOfTime(budget: Budget): string {
  return `the coverage time budget (HEALTH_COVERAGE_TIMEOUT_S) was used up${budget.remaining() <= 0 ? "" : " before the tests could start"}`;
}

/** The registered ecosystem whose coverage adapter measures this file's language. */
function coverageOf(file: ScanFile): { id: CoverageLanguage; adapter: CoverageAdapter } | null {
  for (const ecosystem of ECOSYSTEMS) {
    const adapter: CoverageAdapter | undefined = ecosystem.coverage;
    if (adapter?.languages.some((l) => l === file.language)) return { id: ecosystem.id, adapter };
  }
  return null;
}

/** An adapter's attempt, `seen` cleared first so it holds only this language's tests. */
function attemptOf(
  adapter: CoverageAdapter,
  context: Parameters<CoverageAdapter["measure"]>[0],
  seen: { tests: TestRun | null },
): ReturnType<CoverageAdapter["measure"]> {
  seen.tests = null;
  return adapter.measure(context);
}

/** Source and test files and lines of one language, and its coverage adapter. */
interface LanguageStats {
  adapter: CoverageAdapter;
  sourceFiles: number;
  sourceLines: number;
  testFiles: number;
  testLines: number;
}

/** The files of each language a coverage adapter measures, generated files left out. */
function languageStats(files: RepoFiles["files"]): Map<CoverageLanguage, LanguageStats> {
  const stats = new Map<CoverageLanguage, LanguageStats>();
  for (const file of files) {
    const group = coverageOf(file);
    if (!group || file.generated) continue;
    const entry = stats.get(group.id) ?? {
      adapter: group.adapter,
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
    stats.set(group.id, entry);
  }
  return stats;
}

/** One language's figures: measured by its adapter, or estimated from its lines. */
function languageCoverage(
  language: CoverageLanguage,
  s: LanguageStats,
  attempt: CoverageAttempt,
  tests: LanguageCoverage["tests"],
): LanguageCoverage {
  const base = {
    language,
    source_files: s.sourceFiles,
    source_lines: s.sourceLines,
    test_files: s.testFiles,
    test_lines: s.testLines,
  };
  if (attempt.ok)
    return {
      ...base,
      measured: true,
      covered: attempt.figures.covered,
      total: attempt.figures.total,
      unit: attempt.unit,
      percent: clampScore((100 * attempt.figures.covered) / attempt.figures.total),
      command: attempt.command,
      method: attempt.method,
      tests_passed: attempt.testsPassed,
      tests,
      notes:
        attempt.figures.excluded_test_files > 0
          ? [
              ...attempt.notes,
              `${attempt.figures.excluded_test_files} test file(s) in the report left out.`,
            ]
          : attempt.notes,
    };
  return {
    ...base,
    measured: false,
    covered: null,
    total: null,
    unit: null,
    percent: estimateCoverage(s.testLines, s.sourceLines),
    command: attempt.command,
    method: "estimate from the ratio of test lines to source lines",
    tests_passed: null,
    tests,
    reason: attempt.reason,
    notes: attempt.notes,
  };
}

/** The metric over the languages: their percents weighed by source lines, and a summary. */
function coverageResult(results: LanguageCoverage[]): MetricResult {
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
  // The last run of the language being measured whose tests could be read.
  const seen: { tests: TestRun | null } = { tests: null };
  const context = {
    root: options.root,
    // Where the commands see the working copy: reports name files under it.
    sandboxRoot: sandboxRoot(options.root),
    files: byPath,
    goproxy: options.goproxy,
    setupFailure: options.setupFailure,
    run: (command: string, env?: Record<string, string>) =>
      run(command, options, budget, env, seen),
    outOfTime: () => outOfTime(budget),
  };
  const stats = languageStats(repo.files);
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
    const attempt: CoverageAttempt =
      s.testFiles === 0 && s.adapter.needsTestFiles
        ? { ok: false, reason: "no test files", command: null, notes: [] }
        : await attemptOf(s.adapter, context, seen);
    options.signal?.throwIfAborted();
    results.push(languageCoverage(language, s, attempt, countTests(seen.tests)));
  }

  return coverageResult(results);
}
