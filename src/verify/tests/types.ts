/*
 * What a test run did, test by test (docs/api.md, "Verification baseline"): the one answer to "which tests failed" for
 * verification, the baseline, the fix prompt, the backtest and the health scan.
 */

export type TestStatus = "passed" | "failed" | "skipped";

export interface TestResult {
  /**
   * The runner's own id: pytest node id, `file > suite > name` (JavaScript runners),
   * `pkg/TestName/sub` (go), `module::name` (cargo), unittest `module.Class.test`. Stable
   * between two runs of the same tree.
   */
  id: string;
  status: TestStatus;
  /** The failure message (first lines), when failed. */
  message?: string;
  /** The output lines that belong to this test (capped at MAX_TEST_OUTPUT). */
  output?: string;
  /** Repository-relative file, when the runner says. */
  file?: string;
}

export interface TestRun {
  /** "node:test", "vitest", "jest", "mocha", "pytest", "unittest", "go", "cargo", or several joined by "+". */
  runner: string;
  /** "report": the runner's machine-readable report; "output": read from its text. */
  source: "report" | "output";
  tests: TestResult[];
  /**
   * True when the command failed but no test in it did (a build step, a later command, a
   * crash after the report): the check's failure is not explained by its tests, so it is
   * compared as a whole.
   */
  unexplained?: boolean;
}

/** Tests kept per run: a larger suite's further results are dropped (passed ones first). */
export const MAX_TESTS = 20_000;
/** A failure message's lines and characters kept. */
export const MAX_MESSAGE_LINES = 12;
export const MAX_MESSAGE_CHARS = 1_000;
/** A test's own output kept, in characters. */
export const MAX_TEST_OUTPUT = 4 * 1024;
/** A report file read at most (larger: the output is read instead). */
export const MAX_REPORT_BYTES = 32 * 1024 * 1024;
