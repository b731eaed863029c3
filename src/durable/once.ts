import { createHash } from "node:crypto";
import type { Collection } from "mongodb";
import type { OnceRecord } from "../db/models.js";
import { isDuplicateKey } from "../util/duplicate-key.js";

/*
 * Once-markers: unique-`_id` documents of `once_markers` whose insert decides, across
 * processes, that something happens once (a delivery, a command, a notice, a stage's
 * outcome, a job lock, a lease attempt...). Their ids are stored for days (pruned after 14),
 * so they are built here and nowhere else: one builder per kind, its prefix and scope
 * written once. test/unit/markers.test.ts pins every builder to the id format stored
 * before this catalogue existed; changing one orphans the markers of running databases.
 *
 * Doors do not import this module (the layering of docs/architecture.md): they build and
 * claim markers through durable/markers.ts, which re-exports the catalogue.
 */

/** A once-marker to claim, look up or drop: its `_id` and the scope it is stored under. */
export interface Marker<S extends string = string> {
  readonly id: string;
  readonly scope: S;
}

type Part = string | number;

/** A builder of one marker kind; `scope` and `prefix` are readable for queries by kind. */
export interface MarkerKind<S extends string, A extends unknown[]> {
  (...args: A): Marker<S>;
  readonly prefix: string;
  readonly scope: S;
}

/** A kind whose id is `<prefix>:<part>:<part>...`, its parts typed by `parts`' parameters. */
function kind<const S extends string, A extends unknown[]>(
  prefix: string,
  scope: S,
  parts: (...args: A) => Part[],
): MarkerKind<S, A> {
  const build = (...args: A): Marker<S> => ({
    id: [prefix, ...parts(...args)].join(":"),
    scope,
  });
  return Object.assign(build, { prefix, scope });
}

/** A job-lock time part: the epoch milliseconds, or `-` when there is none. */
const lockTime = (date: Date | null | undefined): Part => (date ? new Date(date).getTime() : "-");

/** A link state is stored as its sha256, so the database never holds the value. */
const stateHash = (state: string): string => createHash("sha256").update(state).digest("base64url");

/**
 * The shared generation markers (durable/marker-cache.ts): fixed ids whose `value` changes
 * whenever what they stand for changes. Upserted, never claimed.
 */
export type GenerationName =
  | "tasks-queued"
  | "workspaces-generation"
  | "account-tiers-generation"
  | "accounts-generation"
  | "integrations-generation";

/** Every kind of once-marker the service stores. */
export const markers = {
  // GitHub door
  /** An installation event's delivery, claimed before it writes (github/delivery.ts). */
  githubDelivery: kind("delivery", "github-delivery", (deliveryId: string) => [deliveryId]),
  /** A comment command, carried out once (github/commands.ts). */
  githubCommand: kind("gh-command", "github-command", (commentId: number) => [commentId]),
  /** A notice posted in a task's GitHub thread (github/notices.ts). */
  githubNotice: kind("gh-notice", "github-notice", (taskId: string, notice: string) => [
    taskId,
    notice,
  ]),
  /** Feedback on a task's pull request (a review, a comment), acted on once (github/follow-ups.ts). */
  githubFollowUp: kind("gh-follow-up", "github-follow-up", (key: string) => [key]),
  /** A task's progress check run, created once; it holds the run's id (domain/progress.ts). */
  githubProgress: kind("gh-progress", "github-progress", (taskId: string) => [taskId]),
  /** The report lock of a task's progress check run, held while a job talks to GitHub. */
  githubProgressLock: kind("gh-progress-lock", "github-progress-lock", (taskId: string) => [
    taskId,
  ]),
  /** A labelled issue turned into a task (github/issues.ts). */
  githubLabel: kind("gh-label", "github-label", (deliveryKey: string) => [deliveryKey]),
  /** A CI failure of one head commit, fixed once (github/ci.ts). */
  ciFix: kind("ci-fix", "github-ci", (repoId: string, headSha: string) => [repoId, headSha]),
  /** The automatic review of one head commit of a pull request (github/auto-review.ts). */
  githubAutoReview: kind(
    "gh-auto-review",
    "github-auto-review",
    (repoId: string, number: number, headSha: string) => [repoId, number, headSha],
  ),
  /** A CI fix of one branch at a time (github/ci.ts). */
  ciFixBranch: kind("ci-fix-branch", "github-ci", (repoId: string, branch: string) => [
    repoId,
    branch,
  ]),
  /** The first link of an installation to an account (domain/linking.ts). */
  githubLink: kind("github-link", "github-link", (installationId: number) => [installationId]),
  /** A link state of `POST /workspaces/link`, by its hash (domain/linking.ts). */
  linkState: kind("link-state", "github-link-state", (state: string) => [stateHash(state)]),
  /** The use of a link state: its one use is decided by this insert (domain/linking.ts). */
  linkStateUsed: kind("link-state", "github-link-state", (state: string) => [
    stateHash(state),
    "used",
  ]),
  /** The per-row lock of a workspace's read-compute-write (domain/linking.ts). */
  workspaceLock: kind("workspace-lock", "workspace-lock", (workspaceId: string) => [workspaceId]),

  // Integrations door
  /** A Slack event, slash command or button press (integrations/slack/, which owns it). */
  slackDelivery: kind("slack", "slack-delivery", (integrationId: string, deliveryId: string) => [
    integrationId,
    deliveryId,
  ]),
  /** A Slack install state of `POST /integrations/{id}/slack/install`, by its hash. */
  slackInstallState: kind("slack-install", "slack-install-state", (state: string) => [
    stateHash(state),
  ]),
  /** The use of a Slack install state: its one use is decided by this insert. */
  slackInstallStateUsed: kind("slack-install", "slack-install-state", (state: string) => [
    stateHash(state),
    "used",
  ]),
  /** A Linear webhook delivery (integrations/linear/, which owns it). */
  linearDelivery: kind("linear", "linear-delivery", (integrationId: string, deliveryId: string) => [
    integrationId,
    deliveryId,
  ]),
  /** A Jira webhook delivery (integrations/jira/, which owns it). */
  jiraDelivery: kind("jira", "jira-delivery", (integrationId: string, deliveryId: string) => [
    integrationId,
    deliveryId,
  ]),
  /** A notice posted to an integration (integrations/shared/notices.ts). */
  integrationNotice: kind("int-notice", "integration-notice", (taskId: string, notice: string) => [
    taskId,
    notice,
  ]),

  // Tasks and the pipeline
  /** A task's ending, holding the outcome (domain/tasks/endings.ts). */
  taskEnd: kind("task-end", "task-end", (taskId: string) => [taskId]),
  /** The decision at a task's gate (domain/tasks/gates.ts). */
  gate: kind("gate", "gate", (taskId: string, gate: "plan" | "diff", round: number = 0): Part[] =>
    round > 0 ? [taskId, gate, round] : [taskId, gate],
  ),
  /** A failed task's retry, once per round it failed in (domain/tasks/revisions.ts). */
  taskRetry: kind("task-retry", "task-retry", (taskId: string, round: number) => [taskId, round]),
  /** Attempt `attempt` of a stage's lease (pipeline/runner.ts, durable/lease.ts). */
  stageLease: kind("lease", "lease", (taskId: string, stage: string, attempt: number) => [
    taskId,
    stage,
    attempt,
  ]),
  /** A stage's stored outcome (pipeline/runner.ts). */
  stageDone: kind("stage-done", "stage-done", (taskId: string, stage: string) => [taskId, stage]),
  /** One slot of the task sweep, run once across workers (pipeline/sweeper.ts). */
  taskSweep: kind("task-sweep", "task-sweep", (slot: Date) => [slot.toISOString()]),

  // Health reports, automations, jobs
  /** A health report's ending (domain/health-reports.ts). */
  healthEnd: kind("health-end", "health-end", (reportId: string) => [reportId]),
  /** Attempt `attempt` of a health scan's lease (domain/health-scan.ts, durable/lease.ts). */
  healthLease: kind("health-lease", "health-lease", (reportId: string, attempt: number) => [
    reportId,
    attempt,
  ]),
  /** One slot of a cron automation, fired once (domain/automations.ts). */
  cronSlot: kind("cron", "automation-cron", (automationId: string, slot: Date) => [
    automationId,
    slot.toISOString(),
  ]),
  /**
   * One lock of an Agenda job in the job state a lookup saw: its `nextRunAt`, `lastRunAt`
   * and the expired lock it took over (durable/exclusive-locks.ts).
   */
  jobLock: kind(
    "job-lock",
    "job-lock",
    (
      jobId: string,
      nextRunAt: Date | null | undefined,
      lastRunAt: Date | null | undefined,
      seenLockedAt: Date | null | undefined,
    ) => [jobId, lockTime(nextRunAt), lockTime(lastRunAt), lockTime(seenLockedAt)],
  ),

  /** A shared generation marker (durable/marker-cache.ts): a fixed id, scope `marker`. */
  generation: (name: GenerationName): Marker<"marker"> => ({ id: name, scope: "marker" }),
} as const;

/** The scopes of the catalogue's kinds. */
export type MarkerScope = ReturnType<(typeof markers)[keyof typeof markers]>["scope"];

/**
 * Takes a once-marker (a unique `_id` insert into `once_markers`, atomic on MongoDB and
 * FerretDB alike): true for the one caller that inserted it, false for every other.
 * `fields` are stored with it (an outcome, an expiry); `created_at` is set for pruning,
 * to now unless `fields` gives it.
 */
export async function claimOnce(
  collection: Collection<OnceRecord>,
  marker: Marker,
  fields: Record<string, unknown> & { created_at?: Date } = {},
): Promise<boolean> {
  try {
    await collection.insertOne({
      ...fields,
      _id: marker.id,
      scope: marker.scope,
      created_at: fields.created_at ?? new Date(),
    });
    return true;
  } catch (error) {
    if (isDuplicateKey(error)) return false;
    throw error;
  }
}
