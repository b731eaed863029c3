/*
 * The evidence a change carries (docs/api.md, "Evidence"): what verification ran, what the change
 * fixed, which tests it added and reproduced, what was red before and still is, fix rounds, model
 * cost and time. Derived from the task record alone (its `checks`, `cost` and times), so
 * `GET /tasks/{id}` and every forge's pull-request body
 * (domain/pull-requests/change-request-text.ts) say the same thing.
 */
import type { CheckRecord, TaskRecord } from "../../db/models.js";

/** Ids shown per list of the evidence (docs/api.md, "Evidence": the first 50, with counts). */
export const EVIDENCE_LIST_CAP = 50;

/** Test ids and how many there are in all (`ids` stops at EVIDENCE_LIST_CAP). */
export interface IdList {
  ids: string[];
  count: number;
}

/** One verification command as the evidence names it. */
export interface EvidenceCommand {
  name: string;
  command: string;
  ok: boolean;
  duration_ms: number;
  /** Failed the same way on the base commit: not the change's. */
  pre_existing: boolean;
}

export interface TaskEvidence {
  /** The commit the results were compared with; null: no base results. */
  base_commit: string | null;
  commands: EvidenceCommand[];
  /** Sums over the checks read per test; null when none was. */
  tests: { total: number; passed: number; failed: number; skipped: number } | null;
  /** Red on the base commit, green now. */
  fixed: IdList;
  /** Tests the change adds or edits. */
  added: IdList;
  /** Of those added or edited: red on the base, green now. */
  reproduced: IdList;
  /** Red on the base and now, the same way. */
  still_failing: IdList;
  /** Green (or absent) on the base, red now; or red differently. */
  new_failures: IdList;
  fix_rounds: number;
  cost: { usd: number; input_tokens: number; output_tokens: number };
  /** From the task's start to its end (or to `now` while it runs); null before it started. */
  duration_ms: number | null;
  /**
   * Wall time of the task's finished sandboxed commands (setup, checks, the model's commands,
   * the base's checks), what TASK_COMMAND_TIME_LIMIT_S bounds (sandbox/command-time.ts).
   */
  command_ms: number;
}

/** A check's per-test summary as verification stores it (docs/api.md, "Verification baseline":
 * `checks.results[].tests`). */
interface StoredTests {
  total?: number;
  passed?: number;
  failed?: number;
  skipped?: number;
  new_failures?: string[];
  fixed?: string[];
  still_failing?: string[];
  added?: string[];
  reproduced?: string[];
  /** Full counts, when a list was capped on the way in. */
  new_failures_count?: number;
  fixed_count?: number;
  still_failing_count?: number;
  added_count?: number;
  reproduced_count?: number;
}

type ListName = "fixed" | "added" | "reproduced" | "still_failing" | "new_failures";
const LISTS: readonly ListName[] = [
  "fixed",
  "added",
  "reproduced",
  "still_failing",
  "new_failures",
];

function storedTests(result: CheckRecord["results"][number]): StoredTests | null {
  const tests = (result as { tests?: unknown }).tests;
  return tests && typeof tests === "object" ? (tests as StoredTests) : null;
}

const ids = (value: unknown): string[] =>
  Array.isArray(value) ? value.filter((v): v is string => typeof v === "string") : [];
const count = (value: unknown): number =>
  typeof value === "number" && Number.isFinite(value) && value > 0 ? Math.floor(value) : 0;

/**
 * One list over all checks: ids in order, each once (two checks may run the same test), and
 * the count: the distinct ids seen plus what each check's cap left out.
 */
function mergeList(all: readonly StoredTests[], name: ListName): IdList {
  const seen = new Set<string>();
  let hidden = 0;
  for (const tests of all) {
    const listed = ids(tests[name]);
    for (const id of listed) seen.add(id);
    hidden += Math.max(0, count(tests[`${name}_count`]) - listed.length);
  }
  return { ids: [...seen].slice(0, EVIDENCE_LIST_CAP), count: seen.size + hidden };
}

function testCounts(all: readonly StoredTests[]): TaskEvidence["tests"] {
  if (all.length === 0) return null;
  const sum = (name: "total" | "passed" | "failed" | "skipped") =>
    all.reduce((total, tests) => total + count(tests[name]), 0);
  return {
    total: sum("total"),
    passed: sum("passed"),
    failed: sum("failed"),
    skipped: sum("skipped"),
  };
}

function durationMs(
  task: Pick<TaskRecord, "started_at" | "finished_at" | "updated_at">,
  now: Date | undefined,
): number | null {
  const start = task.started_at ?? null;
  if (!start) return null;
  const end = task.finished_at ?? now ?? task.updated_at;
  return Math.max(0, new Date(end).getTime() - new Date(start).getTime());
}

/**
 * The task's evidence; null until a verification ran. `now` ends the time of a task still
 * running (the pull request is opened before the task ends).
 */
export function taskEvidence(
  task: Pick<
    TaskRecord,
    "checks" | "cost" | "fix_attempts" | "started_at" | "finished_at" | "updated_at" | "command_ms"
  >,
  now?: Date,
): TaskEvidence | null {
  const checks = task.checks;
  if (!checks) return null;
  const all = checks.results.map(storedTests).filter((t): t is StoredTests => t !== null);
  const lists = Object.fromEntries(LISTS.map((name) => [name, mergeList(all, name)])) as Record<
    ListName,
    IdList
  >;
  const base = (checks as { base_commit?: unknown }).base_commit;
  return {
    base_commit: typeof base === "string" ? base : null,
    commands: checks.results.map((r) => ({
      name: r.name,
      command: r.command,
      ok: r.ok,
      duration_ms: r.duration_ms,
      pre_existing: r.pre_existing === true,
    })),
    tests: testCounts(all),
    ...lists,
    fix_rounds: checks.fix_attempts ?? task.fix_attempts ?? 0,
    cost: {
      usd: Math.round((task.cost?.usd ?? 0) * 1e6) / 1e6,
      input_tokens: task.cost?.input_tokens ?? 0,
      output_tokens: task.cost?.output_tokens ?? 0,
    },
    duration_ms: durationMs(task, now),
    command_ms: Math.round(task.command_ms ?? 0),
  };
}
