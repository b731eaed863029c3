import { createHash } from "node:crypto";
import { type FollowUpRecord, type Models, type TaskRecord } from "../../db/models.js";
import { errors } from "../../errors.js";
import { newId } from "../../util/ids.js";
import { isDuplicateKey } from "../../util/duplicate-key.js";
import { findAgent } from "../agents/catalog.js";
import { claimQuota } from "../accounts/quota.js";
import { findSkill } from "../agents/skills.js";
import { resolveRepo } from "../workspaces/workspaces.js";
import { notificationTarget } from "../integrations/notify.js";
import type { TaskDeps } from "./model.js";
import { deleteTasks, insertTasks, taskById, type NewTask } from "./store.js";

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
  /** Start from this commit (full or abbreviated id) instead of the branch's head (docs/api.md,
   * `POST /tasks`). */
  base_sha?: string | undefined;
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
  if (input.base_sha) doc.pinned_sha = input.base_sha;
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
    const existing = await taskById(deps.models, options.id);
    if (existing) return existingTask(existing, accountId);
  }
  await deps.checkStorage();
  await checkSkillAndAgent(deps.models, accountId, input);
  const cache = deps.cache;
  const [{ workspace, repo }, cachedTier, notify] = await Promise.all([
    resolveRepo(deps.models, accountId, input.workspace_id, input.repo_id, (id) =>
      cache.workspace(id),
    ),
    cache.tier(accountId),
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
    await deps.insertTask(doc);
    deps.kick();
    deps.signalQueued();
    return doc as unknown as TaskRecord;
  } catch (error) {
    await claim.release();
    // Created by a concurrent run of the same request meanwhile.
    if (options.id && isDuplicateKey(error)) {
      const existing = await taskById(deps.models, options.id);
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
  await deps.checkStorage();
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
    await insertTasks(deps.models, docs);
  } catch (error) {
    // The ids are fresh, so removing them removes only what this insert wrote.
    await deleteTasks(deps.models, ids).catch(() => undefined);
    await claim.release().catch(() => undefined);
    throw error;
  }
  deps.kick();
  deps.signalQueued();
  return docs as unknown as TaskRecord[];
}
