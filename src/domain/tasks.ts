import { afterFilter, type SortKey } from "./paging.js";
import { createHash } from "node:crypto";
import { rm } from "node:fs/promises";
import {
  collectionOf,
  type CheckRecord,
  type FollowUpRecord,
  type Models,
  type OnceRecord,
  type RevisionRecord,
  type TaskPhase,
  type TaskRecord,
  type TaskStatus,
  type Tier,
} from "../db/models.js";
import { errors } from "../errors.js";
import { newId } from "../util/ids.js";
import { isDuplicateKey } from "../util/duplicate-key.js";
import { findAgent } from "./agent-catalog.js";
import { memoryScopeOf, remember, rememberFeedback, type MemoryView } from "./memory.js";
import { sanitizeUntrusted } from "../github-api/sanitize.js";
import { claimQuota } from "./quota.js";
import { findSkill } from "./skills.js";
import { isTerminalEvent, type TaskEventLog } from "./task-events.js";
import { resolveRepo, type WorkspaceRecord } from "./workspaces.js";
import { claimMarker, markers } from "./markers.js";
import { notificationTarget } from "./integrations/notify.js";
import { recordTaskEnded } from "../metrics/index.js";
import type { ReviewResult } from "../tools/review-tool.js";

/** The driver collections this module reads and writes, typed by their records. */
const tasksOf = (models: Models) => collectionOf<TaskRecord>(models.Task);
/** A new task as inserted: the repository snapshot and the pipeline's fields come later. */
export type NewTask = Pick<
  TaskRecord,
  "_id" | "account_id" | "workspace_id" | "repo_id" | "description" | "status" | "phase"
> &
  Partial<TaskRecord>;
/** Where new tasks are inserted (the service batches these inserts: db/insert-batcher.ts). */
export const newTaskCollection = (models: Models) => collectionOf<NewTask>(models.Task);
const markersOf = (models: Models) => collectionOf<OnceRecord>(models.Once);

/*
 * Tasks (docs/api.md, "Tasks"): creation, reading, the two gates and cancellation. The pipeline
 * moves a task between phases; everything that ends a task goes through `endTask`, whose unique
 * marker makes the first ending win (a cancel racing a failure, two rejects at once).
 */

export interface TaskDeps {
  models: Models;
  events: TaskEventLog;
  /** Starts a pipeline stage for the task (an Agenda job), in `round` (default 0). */
  enqueueStage(taskId: string, stage: StageName, round?: number): Promise<void>;
  /** Revisions one task may take (MAX_REVISIONS; domain/task-revisions.ts). */
  maxRevisions?: number;
  /** Tells this process's workers a task was queued, so they need not wait for their poll. */
  kick?(): void;
  /** Tells the workers of every process that tasks were queued (coalesced). */
  signalQueued?(): void;
  /** Inserts a task document; batched with concurrent inserts when given (insert-batcher). */
  insertTask?(doc: NewTask): Promise<void>;
  /** Per-process caches of the rarely changing reads of task creation (see marker-cache). */
  cache?: {
    tier(accountId: string): Promise<Tier | null>;
    workspace(workspaceId: string): Promise<WorkspaceRecord | null>;
  };
  /** Removes a task's working copy, if this process can see it. */
  workdirOf?(taskId: string): string;
  /**
   * Throws 503 `insufficient_storage` while DATA_DIR has less free space than
   * DATA_DIR_MIN_FREE_MB (domain/storage.ts): a task is refused rather than started to fail.
   */
  checkStorage?(): Promise<void>;
  /**
   * Tells the place a task reports to (its GitHub thread, chat thread or tracker issue) that
   * the plan or the diff waits for approval, that the task ended, or that its pull request
   * was merged (recordPullRequestOutcome). Set by the composition root.
   */
  notifyThread?(taskId: string, kind: ThreadNotice): Promise<void>;
  /**
   * Tells the task's GitHub check run (domain/progress.ts) that its phase changed; `at` is
   * the phase event's sequence number, or `end`. Returns at once: the report is queued in
   * the background and its failures never reach the task. Set when the GitHub App is
   * configured and GITHUB_PROGRESS is on.
   */
  reportProgress?(taskId: string, at: number | "end"): void;
}

/** What a task tells the place it reports to. */
export type ThreadNotice = "plan" | "diff" | "end" | "merged";

export const STAGE_NAMES = [
  "clone",
  "index",
  "plan",
  "implement",
  "rework",
  "verify",
  "review",
  "publish",
  "cleanup",
] as const;
export type StageName = (typeof STAGE_NAMES)[number];

export const TERMINAL_STATUSES: readonly TaskStatus[] = ["completed", "failed", "cancelled"];

export function isTerminal(status: TaskStatus): boolean {
  return TERMINAL_STATUSES.includes(status);
}

export interface TaskView {
  id: string;
  description: string;
  status: TaskStatus;
  phase: TaskPhase;
  created_at: string;
  updated_at: string;
  repo_id: string;
  workspace_id: string;
  pr_url: string | null;
  error: string | null;
  auto_approve: boolean;
  skill_name: string | null;
  agent_name: string | null;
  plan: Array<{ step: number; title: string; description: string; files: string[] }> | null;
  plan_summary: string | null;
  diff: string | null;
  /** What REVIEWING stored: the model's `submit_review` (pipeline/stages/review.ts). */
  review: ReviewResult | null;
  branch: string | null;
  depends_on: string[];
  cost: {
    input_tokens: number;
    output_tokens: number;
    usd: number;
    cached_input_tokens: number;
    cache_write_tokens: number;
  };
  memories_used: MemoryView[];
  checks: CheckRecord | null;
  revisions: RevisionView[];
  parent_task_id: string | null;
}

/** One revision as the API shows it (docs/api.md, "Revisions"). */
export interface RevisionView {
  gate: "plan" | "diff";
  feedback: string;
  by: string;
  at: string;
  plan?: NonNullable<TaskView["plan"]>;
  diff?: string;
}

function toRevisionView(revision: RevisionRecord): RevisionView {
  const view: RevisionView = {
    gate: revision.gate,
    feedback: revision.feedback,
    by: revision.by,
    at: new Date(revision.at).toISOString(),
  };
  if (revision.plan)
    view.plan = revision.plan.map((s) => ({
      step: s.step,
      title: s.title,
      description: s.description ?? "",
      files: [...(s.files ?? [])],
    }));
  if (typeof revision.diff === "string") view.diff = revision.diff;
  return view;
}

/** The task as the API shows it. */
export function toTaskView(task: TaskRecord): TaskView {
  return {
    id: task._id,
    description: task.description,
    status: task.status,
    phase: task.phase,
    created_at: task.created_at.toISOString(),
    updated_at: task.updated_at.toISOString(),
    repo_id: task.repo_id,
    workspace_id: task.workspace_id,
    pr_url: task.pr_url ?? null,
    error: task.error ?? null,
    auto_approve: task.auto_approve ?? false,
    skill_name: task.skill_name ?? null,
    agent_name: task.agent_name ?? null,
    plan: task.plan
      ? task.plan.map((s) => ({
          step: s.step,
          title: s.title,
          description: s.description ?? "",
          files: [...(s.files ?? [])],
        }))
      : null,
    plan_summary: task.plan_summary ?? null,
    diff: task.diff ?? null,
    review: task.review ?? null,
    branch: task.branch ?? null,
    depends_on: [...(task.depends_on ?? [])],
    cost: {
      input_tokens: task.cost?.input_tokens ?? 0,
      output_tokens: task.cost?.output_tokens ?? 0,
      usd: Math.round((task.cost?.usd ?? 0) * 1e6) / 1e6,
      cached_input_tokens: task.cost?.cached_input_tokens ?? 0,
      cache_write_tokens: task.cost?.cache_write_tokens ?? 0,
    },
    memories_used: task.memories_used ?? [],
    checks: task.checks ?? null,
    revisions: (task.revisions ?? []).map(toRevisionView),
    parent_task_id: task.parent_task_id ?? null,
  };
}

export interface CreateTaskInput {
  workspace_id: string;
  repo_id: string;
  description: string;
  auto_approve?: boolean | undefined;
  skill_name?: string | null | undefined;
  agent_name?: string | null | undefined;
  depends_on?: string[] | undefined;
  /** What created the task: api (default), agent, prism, automation, github. */
  source?: string | undefined;
  /** Details of the creator (automation id, comment author, failing check), kept as given. */
  origin?: Record<string, unknown> | undefined;
  /** The GitHub thread the task reports to (comment commands, labels, CI failures). */
  thread?:
    | { installation_id: number; repo_full_name: string; number: number; is_pull_request: boolean }
    | undefined;
  /** Work on this branch instead of the repository's default branch. */
  base_branch?: string | undefined;
  /** The chat or issue-tracker conversation the task reports to (src/integrations). */
  report_to?: { integration_id: string; type: string; ref: Record<string, string> } | undefined;
  /** A follow-up: the task it follows up and the branch and pull request it updates. */
  parent_task_id?: string | undefined;
  follow_up?: FollowUpRecord | undefined;
}

/** Checks that a named skill (built-in or the account's own) and agent exist (400 otherwise). */
async function checkSkillAndAgent(
  models: Models,
  accountId: string,
  input: {
    skill_name?: string | null | undefined;
    agent_name?: string | null | undefined;
  },
): Promise<void> {
  const problems = [];
  if (input.skill_name && !(await findSkill(models, accountId, input.skill_name)))
    problems.push({ path: "skill_name", message: `No skill is named "${input.skill_name}".` });
  if (input.agent_name && !findAgent(input.agent_name))
    problems.push({ path: "agent_name", message: `No agent is named "${input.agent_name}".` });
  if (problems.length > 0) throw errors.validation(problems);
}

/**
 * A new task's document. Fields that start empty (plan, diff, review, branch, pr_url, error,
 * cost, …) are not stored until they get a value: toTaskView shows them as null or zero.
 * Smaller documents are cheaper to write, and this is the hottest write of the service.
 */
function taskDocument(
  id: string,
  accountId: string,
  workspaceId: string,
  repoId: string,
  input: CreateTaskInput,
  quota: { month: string; slot: number | null; now: Date },
): NewTask {
  const doc: NewTask = {
    _id: id,
    account_id: accountId,
    workspace_id: workspaceId,
    repo_id: repoId,
    description: input.description,
    status: "queued",
    phase: "QUEUED",
    auto_approve: input.auto_approve ?? false,
    quota: { month: quota.month, slot: quota.slot },
    created_at: quota.now,
    updated_at: quota.now,
  };
  if (input.skill_name) doc.skill_name = input.skill_name;
  if (input.agent_name) doc.agent_name = input.agent_name;
  if (input.source && input.source !== "api") doc.source = input.source;
  if (input.depends_on?.length) doc.depends_on = input.depends_on;
  if (input.origin) doc.origin = input.origin;
  if (input.thread) doc.thread = input.thread;
  if (input.base_branch) doc.base_branch = input.base_branch;
  if (input.report_to) doc.report_to = input.report_to;
  if (input.parent_task_id) doc.parent_task_id = input.parent_task_id;
  if (input.follow_up) doc.follow_up = input.follow_up;
  return doc;
}

/** Creates a task in QUEUED after claiming one task of the account's monthly allowance. */
export async function createTask(
  deps: TaskDeps,
  accountId: string,
  input: CreateTaskInput,
  options: {
    /**
     * The task's id, chosen by a caller that may run twice for one request (a job retried
     * after a crash): when a task with this id exists already, it is answered (with
     * `existed`) and nothing else is done. See taskIdFor.
     */
    id?: string;
  } = {},
): Promise<TaskRecord & { existed?: true }> {
  if (options.id) {
    const existing = await tasksOf(deps.models).findOne({ _id: options.id });
    if (existing) return existingTask(existing, accountId);
  }
  await deps.checkStorage?.();
  await checkSkillAndAgent(deps.models, accountId, input);
  const cache = deps.cache;
  const [{ workspace, repo }, cachedTier, notify] = await Promise.all([
    resolveRepo(
      deps.models,
      accountId,
      input.workspace_id,
      input.repo_id,
      cache ? (id) => cache.workspace(id) : undefined,
    ),
    cache?.tier(accountId),
    // Automation and CI-failure tasks report to the account's Slack notification channel.
    input.report_to ? null : notificationTarget(deps.models, accountId, input.source),
  ]);
  if (notify) input = { ...input, report_to: notify };
  const claim = await claimQuota(deps.models, accountId, 1, new Date(), {
    cachedTier: cachedTier ?? undefined,
  });
  try {
    const doc = taskDocument(
      options.id ?? newId("task"),
      accountId,
      workspace._id,
      repo.repo_id,
      input,
      {
        month: claim.month,
        slot: claim.slots[0] ?? null,
        now: new Date(),
      },
    );
    // The driver directly: one insert, no document hydration on the hot path.
    if (deps.insertTask) await deps.insertTask(doc);
    else await newTaskCollection(deps.models).insertOne(doc);
    deps.kick?.();
    deps.signalQueued?.();
    return doc as unknown as TaskRecord;
  } catch (error) {
    await claim.release();
    // Created by a concurrent run of the same request meanwhile.
    if (options.id && isDuplicateKey(error)) {
      const existing = await tasksOf(deps.models).findOne({ _id: options.id });
      if (existing) return existingTask(existing, accountId);
    }
    throw error;
  }
}

function existingTask(task: TaskRecord, accountId: string): TaskRecord & { existed: true } {
  // Ids are derived per integration and delivery; another account's task is never answered.
  if (task.account_id !== accountId) throw errors.conflict("A task with this id exists.");
  return { ...task, existed: true };
}

/**
 * A task id derived from what a request is (an integration and its delivery), in the shape of
 * newId's: a request handled twice (a job run again after a crash, a redelivery) names the
 * same task, so createTask with `{ id }` makes it once.
 */
export function taskIdFor(...parts: string[]): string {
  return `task_${createHash("sha256").update(parts.join("\n")).digest("base64url").slice(0, 16)}`;
}

/** One task of a batch (createTasks). */
export interface BatchTaskInput extends CreateTaskInput {
  /** Positions in the same batch of the tasks this one depends on (added to depends_on). */
  depends_on_batch?: number[] | undefined;
}

/**
 * Creates several tasks at once, all or nothing (docs/api.md, "POST /prism/queue"): repositories
 * are resolved first, one quota claim covers every task, and when the insert fails the tasks
 * it wrote are removed and the claim released. Skill and agent names are the caller's to check.
 */
export async function createTasks(
  deps: TaskDeps,
  accountId: string,
  inputs: BatchTaskInput[],
): Promise<TaskRecord[]> {
  if (inputs.length === 0) return [];
  await deps.checkStorage?.();
  const repos = new Map<string, Awaited<ReturnType<typeof resolveRepo>>>();
  for (const input of inputs) {
    const key = `${input.workspace_id}\n${input.repo_id}`;
    if (!repos.has(key))
      repos.set(key, await resolveRepo(deps.models, accountId, input.workspace_id, input.repo_id));
  }
  const ids = inputs.map(() => newId("task"));
  const dependsOn = inputs.map((input) => [
    ...new Set([
      ...(input.depends_on ?? []),
      ...(input.depends_on_batch ?? []).map((position) => {
        const id = ids[position];
        if (id === undefined) throw new Error(`depends_on_batch names position ${position}`);
        return id;
      }),
    ]),
  ]);
  const claim = await claimQuota(deps.models, accountId, inputs.length, new Date());
  const now = new Date();
  const docs = inputs.map((input, i) => {
    const { workspace, repo } = repos.get(`${input.workspace_id}\n${input.repo_id}`)!;
    const doc = taskDocument(
      ids[i]!,
      accountId,
      workspace._id,
      repo.repo_id,
      { ...input, depends_on: dependsOn[i] },
      { month: claim.month, slot: claim.slots[i] ?? null, now },
    );
    return doc;
  });
  try {
    await newTaskCollection(deps.models).insertMany(docs, { ordered: true });
  } catch (error) {
    // The ids are fresh, so removing them removes only what this insert wrote.
    await tasksOf(deps.models)
      .deleteMany({ _id: { $in: ids } })
      .catch(() => undefined);
    await claim.release().catch(() => undefined);
    throw error;
  }
  deps.kick?.();
  deps.signalQueued?.();
  return docs as unknown as TaskRecord[];
}

/** One task of the account; an unknown id or another account's task is `not_found`. */
/** A task by id whatever its account (for notices, which know only the id), or null. */
export function taskById(models: Models, taskId: string): Promise<TaskRecord | null> {
  return tasksOf(models).findOne({ _id: taskId });
}

/** Where a task reports (its GitHub thread, its integration conversation), or null. */
export function taskConversations(
  models: Models,
  taskId: string,
): Promise<Pick<TaskRecord, "_id" | "thread" | "report_to"> | null> {
  return tasksOf(models).findOne({ _id: taskId }, { projection: { thread: 1, report_to: 1 } });
}

/** The newest tasks of a GitHub thread (issue or pull request) of a repository. */
export function threadTasks(
  models: Models,
  accountId: string,
  repoId: string,
  threadNumber: number,
  limit = 20,
): Promise<TaskRecord[]> {
  return tasksOf(models)
    .find({ account_id: accountId, repo_id: repoId, "thread.number": threadNumber })
    .sort({ created_at: -1 })
    .limit(limit)
    .toArray();
}

/** The id of a task of the thread that has not ended yet, or null. */
export async function openThreadTask(
  models: Models,
  accountId: string,
  repoId: string,
  threadNumber: number,
): Promise<string | null> {
  const running = await tasksOf(models).findOne(
    {
      account_id: accountId,
      repo_id: repoId,
      "thread.number": threadNumber,
      status: { $nin: ["completed", "failed", "cancelled"] },
    },
    { projection: { _id: 1 } },
  );
  return running?._id ?? null;
}

/** The newest tasks an integration started (its conversations), newest first. */
export function integrationTasks(
  models: Models,
  accountId: string,
  integrationId: string,
  limit: number,
): Promise<TaskRecord[]> {
  return tasksOf(models)
    .find({ account_id: accountId, "report_to.integration_id": integrationId })
    .sort({ created_at: -1 })
    .limit(limit)
    .toArray();
}

/** The newest task an integration started from one tracker issue, or null. */
export function trackerIssueTask(
  models: Models,
  accountId: string,
  integrationId: string,
  issueId: string,
): Promise<TaskRecord | null> {
  return tasksOf(models).findOne(
    {
      account_id: accountId,
      "report_to.integration_id": integrationId,
      "report_to.ref.issue_id": issueId,
    },
    { sort: { created_at: -1 } },
  );
}

/** Records the chat thread a task's reports go to, unless one was recorded first. */
export async function setReportThread(
  models: Models,
  taskId: string,
  threadTs: string,
): Promise<void> {
  await tasksOf(models).updateOne(
    { _id: taskId, "report_to.ref.thread_ts": { $exists: false } },
    { $set: { "report_to.ref.thread_ts": threadTs } },
  );
}

/** One task of the account, or null for an unknown id or another account's task. */
export async function findTask(
  models: Models,
  accountId: string,
  taskId: string,
): Promise<TaskRecord | null> {
  const task = await tasksOf(models).findOne({ _id: taskId });
  return task && task.account_id === accountId ? task : null;
}

export async function getTask(
  models: Models,
  accountId: string,
  taskId: string,
): Promise<TaskRecord> {
  const task = await tasksOf(models).findOne({ _id: taskId });
  if (!task || task.account_id !== accountId) throw errors.notFound("task");
  return task;
}

export interface TaskFilter {
  limit: number;
  before?: string | undefined;
  /** A cursor key `[created_at, id]` (domain/paging.ts): the page continues after it. */
  after?: SortKey | undefined;
  workspace_id?: string | undefined;
  repo_id?: string | undefined;
  status?: TaskStatus | undefined;
  phase?: TaskPhase | undefined;
}

/** The account's tasks, newest first, paged with `before` (a task id). */
export async function listTasks(
  models: Models,
  accountId: string,
  filter: TaskFilter,
): Promise<TaskRecord[]> {
  const query: Record<string, unknown> = { account_id: accountId };
  if (filter.workspace_id) query.workspace_id = filter.workspace_id;
  if (filter.repo_id) query.repo_id = filter.repo_id;
  if (filter.status) query.status = filter.status;
  if (filter.phase) query.phase = filter.phase;
  if (filter.after) {
    Object.assign(query, afterFilter(filter.after));
  } else if (filter.before) {
    const cursor = await tasksOf(models).findOne(
      { _id: filter.before },
      { projection: { account_id: 1, created_at: 1 } },
    );
    if (!cursor || cursor.account_id !== accountId)
      throw errors.validation([{ path: "before", message: "No such task on this account." }]);
    query.$or = [
      { created_at: { $lt: cursor.created_at } },
      { created_at: cursor.created_at, _id: { $lt: filter.before } },
    ];
  }
  const docs = await tasksOf(models)
    .find(query)
    .sort({ created_at: -1, _id: -1 })
    .limit(filter.limit)
    .toArray();
  return docs as unknown as TaskRecord[];
}

export interface Ending {
  status: Extract<TaskStatus, "completed" | "failed" | "cancelled">;
  error?: string | null;
  pr_url?: string | null;
}

/**
 * Ends a task once: the first caller wins a unique marker that records the outcome, then
 * writes it and emits the FAILED/DONE phase and the `error`/`done` event. Returns false when
 * the task had already ended (the caller lost the race).
 */
export async function endTask(deps: TaskDeps, taskId: string, ending: Ending): Promise<boolean> {
  const won = await claimMarker(deps.models, markers.taskEnd(taskId), {
    ending: { status: ending.status, error: ending.error ?? null, pr_url: ending.pr_url },
  });
  if (!won) return false;
  recordTaskEnded(ending.status);
  // Removed before the ending is shown: a retry asked for as soon as the `error` event is
  // seen (task-revisions.ts) must not find this removal still to come in its working copy.
  if (deps.workdirOf)
    await rm(deps.workdirOf(taskId), { recursive: true, force: true }).catch(() => undefined);
  await applyEnding(deps, taskId, ending);
  deps.reportProgress?.(taskId, "end");
  await deps.notifyThread?.(taskId, "end").catch(() => undefined);
  return true;
}

/**
 * Writes an ending to the task and its event log. Safe to repeat: a process that stopped
 * half-way through an ending is completed by whoever looks at the task next.
 */
async function applyEnding(deps: TaskDeps, taskId: string, ending: Ending): Promise<void> {
  const phase: TaskPhase = ending.status === "completed" ? "DONE" : "FAILED";
  const now = new Date();
  const set: Record<string, unknown> = {
    status: ending.status,
    phase,
    error: ending.error ?? null,
    finished_at: now,
    updated_at: now,
  };
  if (ending.pr_url !== undefined) set.pr_url = ending.pr_url;
  await tasksOf(deps.models).updateOne({ _id: taskId }, { $set: set });
  const lastSeq = await deps.events.lastSeq(taskId);
  const [last] = await deps.events.readNext(taskId, lastSeq - 1, 1);
  if (last && isTerminalEvent(last)) return;
  if (!(last?.event_type === "phase" && last.phase === phase))
    await deps.events.append(taskId, { event_type: "phase", phase, status: ending.status });
  const final =
    ending.status === "completed"
      ? await deps.events.append(taskId, { event_type: "done", pr_url: ending.pr_url ?? null })
      : await deps.events.append(taskId, {
          event_type: "error",
          error: ending.error ?? "The task failed.",
        });
  await tasksOf(deps.models).updateOne({ _id: taskId }, { $set: { event_seq: final.seq } });
  deps.events.forget(taskId);
}

/**
 * Completes the ending of a task whose marker exists but whose document or events do not
 * show it yet (the ending process stopped, or a racing write overwrote it).
 */
export async function repairEnding(deps: TaskDeps, taskId: string): Promise<void> {
  const marker = await markersOf(deps.models).findOne({
    _id: markers.taskEnd(taskId).id,
  });
  const ending = marker?.ending as Ending | undefined;
  if (!ending) return;
  await applyEnding(deps, taskId, {
    status: ending.status,
    error: ending.error ?? null,
    ...(ending.pr_url !== undefined && ending.pr_url !== null ? { pr_url: ending.pr_url } : {}),
  });
}

/** True once a task has ended (cancelled, failed or completed), from its unique marker. */
export async function hasEnded(models: Models, taskId: string): Promise<boolean> {
  return Boolean(
    await markersOf(models).findOne(
      { _id: markers.taskEnd(taskId).id },
      { projection: { _id: 1 } },
    ),
  );
}

export type Decision = "approve" | "reject" | "approve-diff" | "reject-diff";

const GATES: Record<Decision, { status: TaskStatus; gate: "plan" | "diff"; label: string }> = {
  approve: { status: "awaiting_approval", gate: "plan", label: "plan approval" },
  reject: { status: "awaiting_approval", gate: "plan", label: "plan approval" },
  "approve-diff": { status: "awaiting_diff_approval", gate: "diff", label: "diff approval" },
  "reject-diff": { status: "awaiting_diff_approval", gate: "diff", label: "diff approval" },
};

/**
 * Applies a caller's decision at a gate. 409 `invalid_state` unless the task waits at that
 * gate; concurrent decisions on one gate are settled by a unique marker (one wins, the rest
 * get 409). Approving the plan moves the task to IMPLEMENTING and starts that stage.
 */
export async function decide(
  deps: TaskDeps,
  accountId: string,
  taskId: string,
  decision: Decision,
  who: string,
  /** A rejection's reason, kept in `error` and in the repository's memory. */
  options: { reason?: string | undefined } = {},
): Promise<TaskRecord> {
  const task = await getTask(deps.models, accountId, taskId);
  const gate = GATES[decision];
  if (task.status !== gate.status) {
    throw errors.invalidState(
      `The task is not awaiting ${gate.label} (status ${task.status}, phase ${task.phase}).`,
    );
  }
  // Stored as mongoose's `Once.create` stored it before: the schema's expires_at and timestamps.
  const now = new Date();
  // Each round has its own gate (a revision decides the earlier round's: task-revisions.ts).
  const decided = await claimMarker(deps.models, markers.gate(taskId, gate.gate, task.round ?? 0), {
    expires_at: null,
    created_at: now,
    updated_at: now,
  });
  if (!decided)
    throw errors.invalidState(`The ${gate.label} of this task has already been decided.`);
  if (decision === "reject" || decision === "reject-diff") {
    const what = decision === "reject" ? "plan" : "diff";
    const reason = options.reason ? sanitizeUntrusted(options.reason) : "";
    await endTask(deps, taskId, {
      status: "cancelled",
      error: `The ${what} was rejected by ${who}; nothing was pushed.${reason ? ` Reason: ${reason}` : ""}`,
    });
    await (
      reason
        ? rememberFeedback(deps.models, task, { kind: "rejection", what, text: reason })
        : rememberRejection(deps.models, task, what)
    ).catch(() => undefined);
  } else if (decision === "approve") {
    await moveTo(deps, taskId, "IMPLEMENTING", "running");
    await deps.events.append(taskId, { event_type: "log", message: `Plan approved by ${who}.` });
    await deps.enqueueStage(taskId, "implement", task.round ?? 0);
  } else {
    await moveTo(deps, taskId, "REVIEWING", "running");
    await deps.events.append(taskId, { event_type: "log", message: `Diff approved by ${who}.` });
    await deps.enqueueStage(taskId, "publish", task.round ?? 0);
  }
  return getTask(deps.models, accountId, taskId);
}

/** A rejection becomes repository memory, so later plans know what was not wanted. */
async function rememberRejection(
  models: Models,
  task: TaskRecord,
  what: "plan" | "diff",
): Promise<void> {
  const asked = task.description.trim().split("\n")[0]!.slice(0, 200);
  const proposal = (what === "plan" ? task.plan_summary : task.implement_summary) ?? "";
  const text = `A ${what} was rejected for the task "${asked}"${proposal ? `. It proposed: ${proposal.slice(0, 400)}` : ""}`;
  await remember(models, memoryScopeOf(task), task._id, [{ kind: "rejection", text }]);
}

/** Stops a task at any non-terminal point (docs/api.md, "POST /tasks/{id}/cancel (extension)"). */
export async function cancelTask(
  deps: TaskDeps,
  accountId: string,
  taskId: string,
  who: string,
): Promise<TaskRecord> {
  const task = await getTask(deps.models, accountId, taskId);
  if (isTerminal(task.status))
    throw errors.invalidState(`The task has already ended (status ${task.status}).`);
  const ended = await endTask(deps, taskId, {
    status: "cancelled",
    error: `Cancelled by ${who} during ${task.phase}.`,
  });
  if (!ended) throw errors.invalidState("The task ended before it could be cancelled.");
  return getTask(deps.models, accountId, taskId);
}

/**
 * Moves a running task to a phase and emits the phase event. A task that has ended stays
 * as it ended: the check after the write repairs a write that raced the ending.
 */
export async function moveTo(
  deps: TaskDeps,
  taskId: string,
  phase: TaskPhase,
  status: TaskStatus,
  extra: Record<string, unknown> = {},
  /** The caller looked up `hasEnded` itself just before: skip the first lookup. */
  options: { endChecked?: boolean } = {},
): Promise<boolean> {
  if (!options.endChecked && (await hasEnded(deps.models, taskId))) return false;
  const now = new Date();
  await tasksOf(deps.models).updateOne(
    { _id: taskId },
    { $set: { phase, status, updated_at: now, ...extra } },
  );
  if (await hasEnded(deps.models, taskId)) {
    await repairEnding(deps, taskId);
    return false;
  }
  const event = await deps.events.append(taskId, { event_type: "phase", phase, status });
  await tasksOf(deps.models).updateOne({ _id: taskId }, { $set: { event_seq: event.seq } });
  deps.reportProgress?.(taskId, event.seq);
  return true;
}

/** How a pull request a task opened was closed (the GitHub door's pull_request.closed). */
export interface PullRequestOutcome {
  pr_url: string;
  merged: boolean;
  closed_at: Date;
  merged_at: Date | null;
}

/**
 * Records on the tasks that opened a pull request how it was closed (velocity analytics
 * count merges from it) and, for a merge, tells the places those tasks report to, so a
 * tracker issue moves to its done state only when the change is in. Answers the tasks
 * changed.
 */
export async function recordPullRequestOutcome(
  deps: TaskDeps,
  outcome: PullRequestOutcome,
): Promise<number> {
  const tasks = await deps.models.Task.collection
    .find({ pr_url: outcome.pr_url }, { projection: { _id: 1, pr_state: 1 } })
    .toArray();
  if (tasks.length === 0) return 0;
  const result = await deps.models.Task.collection.updateMany(
    { pr_url: outcome.pr_url },
    {
      $set: {
        pr_state: outcome.merged ? "merged" : "closed",
        pr_closed_at: outcome.closed_at,
        pr_merged_at: outcome.merged ? (outcome.merged_at ?? outcome.closed_at) : null,
        updated_at: new Date(),
      },
    },
  );
  if (outcome.merged)
    for (const task of tasks)
      if (task.pr_state !== "merged") await deps.notifyThread?.(String(task._id), "merged");
  return result.modifiedCount;
}
