import { afterFilter, type PageRequest } from "../../util/paging.js";
import { claimMarker, dropMarker, markerKind } from "../../durable/markers.js";
import { mapConcurrently } from "../../util/concurrency.js";
import { collectionOf, type AutomationTrigger, type Models } from "../../db/models.js";
import { errors, isAppError } from "../../errors.js";
import { newId } from "../../util/ids.js";
import type { Logger } from "../../util/logger.js";
import { DEFAULT_TIMEZONE, dateIn, latestSlot } from "./cron.js";
import { renderTemplate } from "./templates.js";
import {
  SECRET_PLACEHOLDER,
  TRIGGERS,
  triggerKind,
  type CiFailureConfig,
  type CronConfig,
  type StoredConfig,
  type TriggerConfigs,
  type WebhookConfig,
} from "./triggers.js";
import { createTask, type CreateTaskInput } from "../tasks/create.js";
import { type TaskDeps } from "../tasks/model.js";
import { listWorkspaces, resolveRepo } from "../workspaces/workspaces.js";

/** One slot of a cron automation, fired once. */
export const cronSlotMarker = markerKind(
  "cron",
  "automation-cron",
  (automationId: string, slot: Date) => [automationId, slot.toISOString()],
);

/** The driver collections this module uses, typed by their records (db/models.ts). */
const automationsOf = (models: Models) => collectionOf<AutomationRecord>(models.Automation);

/*
 * Automations (docs/api.md, "Automations"): rules of an account that create tasks on a cron
 * schedule, from an incoming webhook, or when a GitHub check fails. Every firing goes through
 * `createTask`, so it claims the owner's quota like any other task; a firing that creates no
 * task (quota used up, repository gone, empty description) is recorded on the automation as
 * `last_refusal`. Cron slots fire once across all workers: each firing first inserts a unique
 * marker `cron:<automation>:<slot>` (atomic on FerretDB and MongoDB alike).
 */

/** Longest task template accepted. */
export const TEMPLATE_MAX_CHARS = 10_000;
/**
 * Tasks take descriptions up to this length (docs/api.md, "POST /tasks"); longer renderings
 * are cut.
 */
const DESCRIPTION_MAX_CHARS = 20_000;
const TRUNCATED = "\n[truncated]";
/** A cron slot reached later than this (workers down or busy) is skipped, not fired late. */
export const CRON_MAX_LATENESS_MS = 10 * 60_000;
/**
 * A cron job that runs up to this much before a slot fires that slot: clocks of workers may
 * disagree a little with the one that scheduled the job.
 */
export const CRON_CLOCK_SKEW_MS = 5_000;
/** Automations fired at once by one webhook delivery. */
const FIRE_CONCURRENCY = 8;

export type { AutomationTrigger };

export { SECRET_PLACEHOLDER };
export type { CiFailureConfig, CronConfig, WebhookConfig };

/** An automation as clients write it (validated by the route's schema), of trigger kind K. */
export type AutomationInputOf<K extends AutomationTrigger> = {
  workspace_id?: string | undefined;
  repo_id: string;
  task_template: string;
  enabled: boolean;
  auto_approve: boolean;
  trigger_type: K;
  trigger_config: TriggerConfigs[K];
};

/** An automation as clients write it, of any trigger kind (triggers.ts). */
export type AutomationInput = { [K in AutomationTrigger]: AutomationInputOf<K> }[AutomationTrigger];

export interface Refusal {
  at: Date;
  code: string;
  reason: string;
}

export interface AutomationRecord {
  _id: string;
  account_id: string;
  workspace_id: string;
  repo_id: string;
  trigger_type: AutomationTrigger;
  trigger_config: StoredConfig;
  task_template: string;
  enabled: boolean;
  auto_approve: boolean;
  last_triggered_at: Date | null;
  last_task_id: string | null;
  last_refusal: Refusal | null;
  armed_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

export interface AutomationView {
  id: string;
  repo_id: string;
  workspace_id: string;
  trigger_type: AutomationTrigger;
  trigger_config: Record<string, unknown>;
  task_template: string;
  enabled: boolean;
  auto_approve: boolean;
  last_triggered_at: string | null;
  last_task_id: string | null;
  last_refusal: { at: string; code: string; reason: string } | null;
  next_run_at: string | null;
  created_at: string;
  updated_at: string;
}

/** The Agenda side of cron automations (jobs/cron.ts): one repeating job per automation. */
export interface CronJobs {
  /** Creates or re-schedules the automation's job; its next run is the next slot from now. */
  arm(automation: { id: string; schedule: string; timezone: string }): Promise<void>;
  /** Removes the automation's job, if any. */
  disarm(automationId: string): Promise<void>;
}

function storeConfig<K extends AutomationTrigger>(input: AutomationInputOf<K>): StoredConfig {
  return triggerKind(input.trigger_type).store(input.trigger_config);
}

/** The automation as the API shows it. */
export function toAutomationView(a: AutomationRecord, now = new Date()): AutomationView {
  const next = a.enabled ? TRIGGERS[a.trigger_type].nextRun(a.trigger_config, now) : null;
  return {
    id: a._id,
    repo_id: a.repo_id,
    workspace_id: a.workspace_id,
    trigger_type: a.trigger_type,
    trigger_config: TRIGGERS[a.trigger_type].view(a.trigger_config ?? {}),
    task_template: a.task_template,
    enabled: a.enabled,
    auto_approve: a.auto_approve ?? false,
    last_triggered_at: a.last_triggered_at ? a.last_triggered_at.toISOString() : null,
    last_task_id: a.last_task_id ?? null,
    last_refusal: a.last_refusal
      ? {
          at: new Date(a.last_refusal.at).toISOString(),
          code: a.last_refusal.code,
          reason: a.last_refusal.reason,
        }
      : null,
    next_run_at: next ? next.toISOString() : null,
    created_at: a.created_at.toISOString(),
    updated_at: a.updated_at.toISOString(),
  };
}

/**
 * Finds the repository an automation works on: in `workspaceId` when given, otherwise in
 * whichever of the account's workspaces holds it (by id or `owner/name`). 404 when the
 * account has no such repository; 400 when several workspaces hold one of that name.
 */
export async function resolveAutomationRepo(
  models: Models,
  accountId: string,
  workspaceId: string | undefined,
  repoRef: string,
): Promise<{ workspace_id: string; repo_id: string }> {
  if (workspaceId) {
    const { workspace, repo } = await resolveRepo(models, accountId, workspaceId, repoRef);
    return { workspace_id: workspace._id, repo_id: repo.repo_id };
  }
  const ref = repoRef.toLowerCase();
  const hits: Array<{ workspace_id: string; repo_id: string }> = [];
  for (const workspace of await listWorkspaces(models, accountId)) {
    for (const repo of workspace.repos) {
      if (repo.repo_id === repoRef || repo.full_name.toLowerCase() === ref)
        hits.push({ workspace_id: workspace._id, repo_id: repo.repo_id });
    }
  }
  const [only, ...rest] = hits;
  if (!only) throw errors.notFound("repository in this account's workspaces");
  if (rest.length > 0)
    throw errors.validation([
      {
        path: "body.workspace_id",
        message: `Several workspaces hold the repository "${repoRef}"; give workspace_id.`,
      },
    ]);
  return only;
}

function isArmed(a: { trigger_type: AutomationTrigger; enabled: boolean }): boolean {
  return TRIGGERS[a.trigger_type].scheduled && a.enabled;
}

async function syncCron(cron: CronJobs | undefined, a: AutomationRecord): Promise<void> {
  if (!cron) return;
  if (isArmed(a))
    await cron.arm({
      id: a._id,
      schedule: a.trigger_config.schedule!,
      timezone: a.trigger_config.timezone ?? DEFAULT_TIMEZONE,
    });
  else await cron.disarm(a._id);
}

/** Creates an automation of the account; a cron automation gets its Agenda job at once. */
export async function createAutomation(
  models: Models,
  cron: CronJobs | undefined,
  accountId: string,
  input: AutomationInput,
): Promise<AutomationRecord> {
  const place = await resolveAutomationRepo(models, accountId, input.workspace_id, input.repo_id);
  const now = new Date();
  const doc: AutomationRecord = {
    _id: newId("auto"),
    account_id: accountId,
    workspace_id: place.workspace_id,
    repo_id: place.repo_id,
    trigger_type: input.trigger_type,
    trigger_config: storeConfig(input),
    task_template: input.task_template,
    enabled: input.enabled,
    auto_approve: input.auto_approve,
    last_triggered_at: null,
    last_task_id: null,
    last_refusal: null,
    armed_at: isArmed(input) ? now : null,
    created_at: now,
    updated_at: now,
  };
  await automationsOf(models).insertOne(doc);
  try {
    await syncCron(cron, doc);
  } catch (error) {
    // Without its job a cron automation would never fire: do not keep it.
    await automationsOf(models).deleteOne({ _id: doc._id });
    throw error;
  }
  return doc;
}

/** The account's automations, newest first; with `page`, at most `limit + 1` after its cursor. */
export async function listAutomations(
  models: Models,
  accountId: string,
  page?: PageRequest,
): Promise<AutomationRecord[]> {
  const docs = await automationsOf(models)
    .find({ account_id: accountId, ...afterFilter(page?.after) })
    .sort({ created_at: -1, _id: -1 })
    .limit(page ? page.limit + 1 : 0)
    .toArray();
  return docs;
}

/** One automation of the account; another account's or an unknown id is `not_found`. */
export async function getAutomation(
  models: Models,
  accountId: string,
  id: string,
): Promise<AutomationRecord> {
  const doc = await automationsOf(models).findOne({
    _id: id,
  });
  if (!doc || doc.account_id !== accountId) throw errors.notFound("automation");
  return doc;
}

/**
 * The automation in the form clients write it, with a PATCH body laid over it: the result
 * is validated as a whole by the caller. A webhook `secret` sent back as the placeholder
 * keeps the stored secret; `repo_id` without `workspace_id` is looked up across workspaces.
 */
export function mergePatch(
  current: AutomationRecord,
  patch: Record<string, unknown>,
): Record<string, unknown> {
  const c = current.trigger_config ?? {};
  const config = TRIGGERS[current.trigger_type].writable(c);
  const merged: Record<string, unknown> = {
    workspace_id: current.workspace_id,
    repo_id: current.repo_id,
    trigger_type: current.trigger_type,
    trigger_config: config,
    task_template: current.task_template,
    enabled: current.enabled,
    auto_approve: current.auto_approve ?? false,
    ...patch,
  };
  if ("repo_id" in patch && !("workspace_id" in patch)) delete merged.workspace_id;
  const next = merged.trigger_config;
  if (
    "trigger_config" in patch &&
    merged.trigger_type === "webhook" &&
    next !== null &&
    typeof next === "object" &&
    (next as Record<string, unknown>).secret === SECRET_PLACEHOLDER &&
    current.trigger_type === "webhook" &&
    c.secret
  ) {
    merged.trigger_config = { ...(next as Record<string, unknown>), secret: c.secret };
  }
  return merged;
}

/**
 * Replaces an automation's fields with `input` (the merged, validated PATCH). The repository
 * is resolved again only when the PATCH named one; the cron job follows schedule, time zone,
 * trigger type and `enabled`.
 */
export async function updateAutomation(
  models: Models,
  cron: CronJobs | undefined,
  current: AutomationRecord,
  input: AutomationInput,
  repoChanged: boolean,
): Promise<AutomationRecord> {
  const place = repoChanged
    ? await resolveAutomationRepo(models, current.account_id, input.workspace_id, input.repo_id)
    : { workspace_id: current.workspace_id, repo_id: current.repo_id };
  const config = storeConfig(input);
  const wasArmed = isArmed(current);
  const armed = isArmed(input);
  const rescheduled =
    armed &&
    (!wasArmed ||
      config.schedule !== current.trigger_config.schedule ||
      config.timezone !== (current.trigger_config.timezone ?? DEFAULT_TIMEZONE));
  const now = new Date();
  // Only what a PATCH edits: last_* fields belong to firings that may run meanwhile.
  const fields = {
    workspace_id: place.workspace_id,
    repo_id: place.repo_id,
    trigger_type: input.trigger_type,
    trigger_config: config,
    task_template: input.task_template,
    enabled: input.enabled,
    auto_approve: input.auto_approve,
    armed_at: armed ? (rescheduled ? now : current.armed_at) : null,
    updated_at: now,
  };
  const result = await automationsOf(models).updateOne(
    { _id: current._id, account_id: current.account_id },
    { $set: fields },
  );
  if (result.matchedCount === 0) throw errors.notFound("automation");
  const next: AutomationRecord = { ...current, ...fields };
  if (rescheduled || (wasArmed && !armed)) await syncCron(cron, next);
  const fresh = await automationsOf(models).findOne({
    _id: current._id,
  });
  return fresh ?? next;
}

/** Deletes an automation of the account and its cron job. */
export async function deleteAutomation(
  models: Models,
  cron: CronJobs | undefined,
  accountId: string,
  id: string,
): Promise<void> {
  const result = await automationsOf(models).deleteOne({
    _id: id,
    account_id: accountId,
  });
  if (result.deletedCount === 0) throw errors.notFound("automation");
  await cron?.disarm(id);
}

/* ------------------------------------------------------------------ firing */

export type FireResult =
  { outcome: "created"; task_id: string } | { outcome: "refused"; code: string; reason: string };

interface Firing {
  automation: AutomationRecord;
  vars: Record<string, unknown>;
  origin: Record<string, unknown>;
  thread?: CreateTaskInput["thread"];
  base_branch?: string | undefined;
}

function clip(text: string): string {
  return text.length <= DESCRIPTION_MAX_CHARS
    ? text
    : text.slice(0, DESCRIPTION_MAX_CHARS - TRUNCATED.length) + TRUNCATED;
}

/** Template variables every trigger has: `now` (ISO 8601 UTC) and `date` (YYYY-MM-DD). */
function clockVars(at: Date, timezone = DEFAULT_TIMEZONE): { now: string; date: string } {
  return { now: at.toISOString(), date: dateIn(timezone, at) };
}

async function recordRefusal(models: Models, id: string, code: string, reason: string) {
  await automationsOf(models).updateOne(
    { _id: id },
    { $set: { last_refusal: { at: new Date(), code, reason } } },
  );
}

/**
 * Creates the task of one firing, claiming the owner's quota. A refusal (quota used up,
 * repository gone, empty description) is recorded on the automation and returned; other
 * errors are thrown.
 */
async function fire(deps: TaskDeps, firing: Firing): Promise<FireResult> {
  const a = firing.automation;
  const description = clip(renderTemplate(a.task_template, firing.vars).trim());
  if (description === "") {
    const reason = "The task template rendered an empty description; no task was created.";
    await recordRefusal(deps.models, a._id, "empty_description", reason);
    return { outcome: "refused", code: "empty_description", reason };
  }
  try {
    const task = await createTask(deps, a.account_id, {
      workspace_id: a.workspace_id,
      repo_id: a.repo_id,
      description,
      auto_approve: a.auto_approve ?? false,
      source: "automation",
      origin: { automation_id: a._id, trigger: a.trigger_type, ...firing.origin },
      thread: firing.thread,
      base_branch: firing.base_branch,
    });
    await automationsOf(deps.models).updateOne(
      { _id: a._id },
      { $set: { last_triggered_at: new Date(), last_task_id: task._id } },
    );
    return { outcome: "created", task_id: task._id };
  } catch (error) {
    if (!isAppError(error)) throw error;
    await recordRefusal(deps.models, a._id, error.code, error.message);
    return { outcome: "refused", code: error.code, reason: error.message };
  }
}

/* ---------------------------------------------------------------- webhooks */

/**
 * Evaluates every enabled webhook automation of every account against an incoming payload
 * (`POST /automations/webhook`, no key). An automation with a `secret` matches only a body
 * signed `X-Hub-Signature-256: sha256=<HMAC of the raw body>`. Each match fires a task on
 * its owner's quota; `matched` counts matches, refused firings included.
 */
export async function evaluateWebhook(
  deps: TaskDeps,
  delivery: { payload: unknown; rawBody: string; signature: string | undefined },
  logger?: Logger,
): Promise<{ matched: number; tasks_created: string[] }> {
  const candidates = await automationsOf(deps.models)
    .find({ trigger_type: "webhook", enabled: true })
    .sort({ created_at: 1, _id: 1 })
    .toArray();
  const now = new Date();
  const matched = candidates.filter((a) =>
    TRIGGERS.webhook.matches(a.trigger_config ?? {}, delivery),
  );
  const results = await mapConcurrently(matched, FIRE_CONCURRENCY, async (automation) => {
    try {
      return await fire(deps, {
        automation,
        vars: { payload: delivery.payload, ...clockVars(now) },
        origin: {},
      });
    } catch (error) {
      // One automation's failure does not keep the others from firing.
      logger?.error({ err: error, automationId: automation._id }, "webhook automation failed");
      const reason = "An internal error kept the task from being created.";
      await recordRefusal(deps.models, automation._id, "internal", reason).catch(() => undefined);
      return { outcome: "refused", code: "internal", reason } satisfies FireResult;
    }
  });
  return {
    matched: matched.length,
    tasks_created: results.flatMap((r) => (r.outcome === "created" ? [r.task_id] : [])),
  };
}

/* ------------------------------------------------------------- CI failures */

export interface CiFailure {
  repo_id: string;
  workspace_id: string;
  account_id: string;
  check: {
    name: string;
    conclusion: string;
    head_branch: string;
    head_sha: string;
    details_url: string;
    summary: string;
    workflow: string | null;
  };
}

/**
 * Fires the enabled ci_failure automations of that repository whose workflow/branch globs
 * match, oldest first, until one creates a task (one fix task per head commit; a refused
 * firing is recorded and the next one is tried). The caller has already applied the
 * once-per-head-commit guard across events.
 */
export async function fireCiFailureAutomations(
  deps: TaskDeps,
  failure: CiFailure,
  extra?: { thread?: CreateTaskInput["thread"]; base_branch?: string },
): Promise<{ tasks_created: string[]; matched: number }> {
  const candidates = await automationsOf(deps.models)
    .find({
      workspace_id: failure.workspace_id,
      repo_id: failure.repo_id,
      trigger_type: "ci_failure",
      enabled: true,
    })
    .sort({ created_at: 1, _id: 1 })
    .toArray();
  const { check } = failure;
  const event = { workflow: check.workflow ?? check.name, branch: check.head_branch };
  const matched = candidates.filter(
    (a) =>
      a.account_id === failure.account_id &&
      TRIGGERS.ci_failure.matches(a.trigger_config ?? {}, event),
  );
  const now = new Date();
  const tasks: string[] = [];
  for (const automation of matched) {
    const result = await fire(deps, {
      automation,
      vars: {
        check: {
          name: check.name,
          conclusion: check.conclusion,
          head_branch: check.head_branch,
          head_sha: check.head_sha,
          details_url: check.details_url,
          summary: check.summary,
          workflow: check.workflow ?? check.name,
        },
        ...clockVars(now),
      },
      origin: {
        check: {
          name: check.name,
          workflow: check.workflow,
          conclusion: check.conclusion,
          head_branch: check.head_branch,
          head_sha: check.head_sha,
          details_url: check.details_url,
        },
      },
      thread: extra?.thread,
      base_branch: extra?.base_branch,
    });
    if (result.outcome === "created") {
      tasks.push(result.task_id);
      // At most one fix task per head commit (docs/api.md, "CI failures" under
      // "Automations"): the oldest matching automation's.
      break;
    }
  }
  return { tasks_created: tasks, matched: matched.length };
}

/* -------------------------------------------------------------------- cron */

export type CronFiring =
  | FireResult
  | {
      outcome: "skipped";
      reason: "gone" | "disabled" | "not_a_slot" | "before_armed" | "too_late" | "duplicate";
    };

/**
 * Fires one slot of a cron automation, at most once across every process: the first caller
 * inserts the marker `cron:<automation>:<slot>`, any other gets `duplicate`. Slots that are
 * not on the schedule, or at or before the moment it was (re)armed, are skipped.
 */
export async function fireCronSlot(
  deps: TaskDeps,
  automationId: string,
  slot: Date,
): Promise<CronFiring> {
  const a = await automationsOf(deps.models).findOne({
    _id: automationId,
  });
  if (!a) return { outcome: "skipped", reason: "gone" };
  return fireSlot(deps, a, slot);
}

/** fireCronSlot for an automation already read. */
async function fireSlot(deps: TaskDeps, a: AutomationRecord, slot: Date): Promise<CronFiring> {
  if (!isArmed(a)) return { outcome: "skipped", reason: "disabled" };
  const timezone = a.trigger_config.timezone ?? DEFAULT_TIMEZONE;
  if (!TRIGGERS.cron.matches(a.trigger_config, { slot }))
    return { outcome: "skipped", reason: "not_a_slot" };
  if (a.armed_at && slot.getTime() <= new Date(a.armed_at).getTime())
    return { outcome: "skipped", reason: "before_armed" };
  const marker = cronSlotMarker(a._id, slot);
  if (!(await claimMarker(deps.models, marker))) return { outcome: "skipped", reason: "duplicate" };
  try {
    return await fire(deps, {
      automation: a,
      vars: clockVars(slot, timezone),
      origin: { slot: slot.toISOString() },
    });
  } catch (error) {
    // Nothing was created: let another worker's run of the same slot try again.
    await dropMarker(deps.models, marker).catch(() => undefined);
    throw error;
  }
}

/**
 * One run of a cron automation's Agenda job at `now`: fires the slot that is due (the latest
 * one, allowing CRON_CLOCK_SKEW_MS of clock difference), unless it is more than
 * CRON_MAX_LATENESS_MS old. A job whose automation is gone or disabled removes itself; a job
 * whose schedule differs from the automation's is re-armed.
 */
export async function runCronJob(
  deps: TaskDeps,
  cron: CronJobs | undefined,
  automationId: string,
  job: { repeatInterval?: unknown; repeatTimezone?: unknown } | undefined,
  now = new Date(),
): Promise<CronFiring> {
  const a = await automationsOf(deps.models).findOne({
    _id: automationId,
  });
  if (!a || !isArmed(a)) {
    await cron?.disarm(automationId);
    return { outcome: "skipped", reason: a ? "disabled" : "gone" };
  }
  const schedule = a.trigger_config.schedule!;
  const timezone = a.trigger_config.timezone ?? DEFAULT_TIMEZONE;
  if (
    job &&
    (job.repeatInterval !== schedule || (job.repeatTimezone ?? DEFAULT_TIMEZONE) !== timezone)
  )
    await cron?.arm({ id: a._id, schedule, timezone });
  const slot = latestSlot(schedule, timezone, new Date(now.getTime() + CRON_CLOCK_SKEW_MS));
  if (now.getTime() - slot.getTime() > CRON_MAX_LATENESS_MS)
    return { outcome: "skipped", reason: "too_late" };
  return fireSlot(deps, a, slot);
}

/** Every enabled cron automation's schedule: what the cron jobs must match (jobs/cron.ts). */
export async function enabledCronSchedules(
  models: Models,
): Promise<Array<{ _id: string; trigger_config: { schedule: string; timezone?: string } }>> {
  const docs = await automationsOf(models)
    .find({ trigger_type: "cron", enabled: true }, { projection: { _id: 1, trigger_config: 1 } })
    .toArray();
  // Cron configs stored before time zones existed have none: the caller applies the default.
  return docs.map((doc) => ({
    _id: doc._id,
    trigger_config: doc.trigger_config as { schedule: string; timezone?: string },
  }));
}

/** True when the repository has an enabled CI-failure automation (github/ci.ts). */
export async function hasCiFailureAutomation(
  models: Models,
  accountId: string,
  repoId: string,
): Promise<boolean> {
  const count = await automationsOf(models).countDocuments(
    { account_id: accountId, repo_id: repoId, trigger_type: "ci_failure", enabled: true },
    { limit: 1 },
  );
  return count > 0;
}
