/*
 * The harness's records: a mined case, its validation, and its result (`cases.json`
 * and `report.json`, docs/operations.md "Backtest").
 */

/** A commit that changed tests and source: a candidate case. */
export interface MinedCase {
  /** Short id: the commit's first 12 characters. */
  id: string;
  repo: string;
  commit: string;
  parent: string;
  date: string;
  /** The task text: the text of the issue the commit closes when it can be read, else the
   * commit message. */
  message: string;
  /** The issue the commit closes whose text is the task (`Fixes #12` on GitHub). */
  issue?: number;
  /** The commit message, when an issue's text replaced it as the task text. */
  commit_message?: string;
  /** The message gives the fix away (it quotes changed code). */
  leaky_message: boolean;
  /** Test files the commit changed or added (or deleted). */
  test_files: string[];
  /** Non-test source files the commit changed: the gold change. */
  source_files: string[];
}

export type CaseValidity = "valid" | "flaky" | "no_fail_to_pass" | "no_tests" | "unsupported";

/** A case after validation, as saved in cases.json. */
export interface BacktestCase extends MinedCase {
  ecosystem: string | null;
  validity: CaseValidity;
  /** Why the case is not valid, in words. */
  reason?: string;
  fail_to_pass: string[];
  pass_to_pass: string[];
  /** Wall time of validation, and the part spent in the repository's own test runs. */
  validation_ms: number;
  test_run_ms: number;
}

export interface CasesFile {
  repo: string;
  mined_at: string;
  cases: BacktestCase[];
}

export interface CaseResult {
  id: string;
  repo: string;
  commit: string;
  parent: string;
  task_id: string | null;
  /** The task's final status (completed, failed, cancelled), or `not_run` (spending cap). */
  status: string;
  resolved: boolean;
  fail_to_pass: { passed: number; total: number };
  pass_to_pass: { passed: number; total: number };
  fix_rounds: number;
  model_calls: number;
  input_tokens: number;
  output_tokens: number;
  usd: number;
  seconds: number;
  touched_gold: boolean;
  edited_tests: boolean;
  leaky_message: boolean;
  /** Where the task's trajectory is served. */
  trajectory_url: string | null;
  error: string | null;
  /** Scoring's wall time and the part spent in test runs. */
  scoring_ms: number;
  scoring_test_ms: number;
}

export interface BacktestReport {
  model: string;
  prompt_hash: string;
  started_at: string;
  finished_at: string;
  repos: string[];
  total: number;
  valid: number;
  flaky: number;
  resolved: number;
  rate: number;
  wilson_low: number;
  wilson_high: number;
  usd: number;
  usd_per_resolved: number | null;
  median_s: number;
  /** Set when the spending cap (--max-usd) stopped the run before every case ran. */
  stopped: string | null;
  cases: CaseResult[];
}
