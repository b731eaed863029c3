import path from "node:path";
import type { Config } from "../config/env.js";
import type { Models, OnceRecord, TaskRecord } from "../db/models.js";
import { endedTasksAmong, untouchedOpenTasks } from "../domain/tasks/store.js";
import { claimMarker, dropMarkers, markerKind, markersFields } from "../durable/markers.js";
import { taskEndMarker } from "../domain/tasks/endings.js";
import { gateMarker } from "../domain/tasks/gates.js";
import { stageDoneMarker } from "../domain/tasks/model.js";
import { stageLease } from "../durable/lease.js";
import { stageKey } from "../domain/tasks/revisions.js";
import { repairEnding } from "../domain/tasks/endings.js";
import { STAGE_NAMES, type StageName, type TaskDeps } from "../domain/tasks/model.js";
import { jobsInFlight } from "../queue/scheduler.js";
import type { Logger } from "../util/logger.js";
import { isKept, removeWorkdir, workdirNames } from "../workcopy/volume.js";
import { removeExpiredWorkdirs } from "./kept-workdirs.js";
import { STAGE_JOB_NAME } from "./runner.js";
import type { StageOutcome } from "./stage.js";
import { STAGES } from "./stages/index.js";

/** One slot of the task sweep, run once across workers. */
export const taskSweepMarker = markerKind("task-sweep", "task-sweep", (slot: Date) => [
  slot.toISOString(),
]);

/*
 * The task sweep: the backstop that no task stays `running` without work that will move it.
 * A stage job that dies with its worker comes back when its lock expires (runner.ts), and a
 * run that finds a live lease queues itself again for the lease's expiry; but a job can still
 * be lost (a run that failed before taking its lease, a job removed, a crash between a
 * decision and its job), and then nothing would look at the task again.
 *
 * Every TASK_SWEEP_INTERVAL_S each worker tries to claim the interval's slot (a once-marker,
 * so one worker sweeps it however many run). The sweep takes the running tasks (and the
 * queued ones whose first stage was started) untouched for a lock lifetime, and for each finds
 * the stage it is at from the stages' stored outcomes (the done markers). A task with no
 * queued or locked stage job and no live lease on that stage is resumed: that stage is queued
 * again as a job unique to the slot, whose run takes the next lease attempt, or fails the task
 * once STAGE_MAX_ATTEMPTS runs were used, or re-applies an outcome that was stored but not
 * acted on. A task whose ending was claimed but not written is repaired.
 *
 * Bound: a worker's lease lapses JOB_LOCK_LIFETIME_S after its last heartbeat, so a task whose
 * worker died is resumed within JOB_LOCK_LIFETIME_S + TASK_SWEEP_INTERVAL_S (plus a poll).
 */

/** Tasks looked at per sweep, oldest update first; the rest wait for the next one. */
const MAX_TASKS = 500;
/** Sweep slot markers older than this many slots are dropped by the sweep that follows. */
const KEPT_SLOTS = 10;

/** The stage a phase belongs to (FIXING is part of VERIFYING's stage). */
const STAGE_OF_PHASE: Partial<Record<string, StageName>> = { FIXING: "verify" };
for (const name of [...STAGE_NAMES].reverse()) STAGE_OF_PHASE[STAGES[name].phase] = name;

export interface SweepResult {
  /** Tasks whose stage was queued again, with that stage. */
  resumed: Array<{ task_id: string; stage: StageName }>;
  /** Tasks whose claimed ending was written. */
  repaired: string[];
}

export interface TaskSweep {
  start(): void;
  stop(): void;
  /** One sweep now, as the winner of `slot` (the timer claims the slot first). */
  sweep(slot: Date): Promise<SweepResult>;
}

export interface TaskSweepDeps {
  config: Config;
  models: Models;
  taskDeps: TaskDeps;
  /** Queues a stage again as a job unique to `key` (runner.ts resumeStage). */
  resumeStage(
    taskId: string,
    stage: StageName,
    key: string,
    at?: Date,
    round?: number,
  ): Promise<boolean>;
  logger: Logger;
}

/**
 * The stage a task is at, from its stages' stored outcomes: the first stage along the chain of
 * `next` outcomes (and decided gates) that has none, or the one whose stored ending is still
 * to be applied. Never behind the stage of the task's phase (outcomes are pruned after days).
 */
export function currentStage(
  phase: string,
  outcomes: ReadonlyMap<StageName, StageOutcome>,
  decidedGates: ReadonlySet<"plan" | "diff">,
  first: StageName = "clone",
): StageName {
  let stage: StageName = first;
  for (let step = 0; step < STAGE_NAMES.length; step++) {
    const outcome = outcomes.get(stage);
    if (!outcome || "end" in outcome) break;
    if ("next" in outcome) {
      stage = outcome.next;
      continue;
    }
    const gate = outcome.wait.status === "awaiting_diff_approval" ? "diff" : "plan";
    if (!decidedGates.has(gate)) break;
    // A running task past a decided gate was approved (a rejection ends it).
    stage = gate === "plan" ? "implement" : "publish";
  }
  const ofPhase = STAGE_OF_PHASE[phase];
  return ofPhase && STAGE_NAMES.indexOf(ofPhase) > STAGE_NAMES.indexOf(stage) ? ofPhase : stage;
}

/**
 * The stage a stalled task is at in its round, from the markers found for it: its stages'
 * outcomes and decided gates.
 */
function stageOf(
  task: Pick<TaskRecord, "_id" | "phase" | "round" | "instruction">,
  found: ReadonlyMap<string, OnceRecord>,
): StageName {
  const round = task.round ?? 0;
  const outcomes = new Map<StageName, StageOutcome>();
  for (const stage of STAGE_NAMES) {
    const outcome = found.get(stageDoneMarker(task._id, stageKey(stage, round)).id)?.outcome;
    if (outcome) outcomes.set(stage, outcome as StageOutcome);
  }
  const gates = new Set<"plan" | "diff">();
  for (const gate of ["plan", "diff"] as const)
    if (found.has(gateMarker(task._id, gate, round).id)) gates.add(gate);
  // A later round starts at the stage its revision or retry queued: the phase it set
  // (FIXING with a revision's instruction of this round is its round of changes).
  const first =
    round === 0
      ? "clone"
      : task.phase === "FIXING" &&
          task.instruction?.round === round &&
          task.instruction.kind !== "retry" &&
          !outcomes.has("rework")
        ? "rework"
        : (STAGE_OF_PHASE[task.phase] ?? "clone");
  return currentStage(task.phase, outcomes, gates, first);
}

/** The task sweep of a worker process. */
export function createTaskSweep(deps: TaskSweepDeps): TaskSweep {
  const { config, models } = deps;
  const logger = deps.logger.child({ component: "task-sweep" });
  const intervalMs = config.pipeline.sweepIntervalMs;
  let timer: NodeJS.Timeout | undefined;
  let running = false;

  async function tick(): Promise<void> {
    if (running) return;
    running = true;
    try {
      // Every worker, for its own DATA_DIR: what ended tasks left here goes (a worker killed
      // while holding a working copy whose task another worker then finished).
      await removeEndedWorkdirs().catch((error: unknown) =>
        logger.warn({ err: error }, "could not remove the working copies of ended tasks"),
      );
      const slot = new Date(Math.floor(Date.now() / intervalMs) * intervalMs);
      if (!(await claimMarker(models, taskSweepMarker(slot)))) return;
      await dropMarkers(models, [
        taskSweepMarker(new Date(slot.getTime() - KEPT_SLOTS * intervalMs)),
      ]);
      await sweep(slot);
    } catch (error) {
      logger.warn({ err: error }, "the task sweep failed; the next slot tries again");
    } finally {
      running = false;
    }
  }

  async function removeEndedWorkdirs(): Promise<void> {
    const root = path.join(config.dataDir, "work");
    await removeExpiredWorkdirs(root, Date.now(), config.dataDirMinFreeMb * 1024 * 1024);
    const ids = (await workdirNames(root)).filter((name) => name.startsWith("task_"));
    if (ids.length === 0) return;
    // Not one just retried or revised (it is running again, or about to).
    const ended = await endedTasksAmong(models, ids, new Date(Date.now() - intervalMs));
    for (const id of ended) {
      const workdir = path.join(root, id);
      // Kept for a follow-up (kept-workdirs.ts): removed below once its time is up.
      if (!isKept(workdir)) await removeWorkdir(workdir);
    }
  }

  async function sweep(slot: Date): Promise<SweepResult> {
    const result: SweepResult = { resumed: [], repaired: [] };
    const now = Date.now();
    const ttlMs = config.jobs.lockLifetimeMs;
    const maxAttempts = config.pipeline.stageMaxAttempts;
    // Untouched for a lock lifetime: a task that just moved has its next job on the way.
    const open = await untouchedOpenTasks(models, new Date(now - ttlMs), MAX_TASKS);
    if (open.length === 0) return result;

    // One lookup by `_id` for every task's ending, stage outcomes, gates and first lease.
    // A revised or retried task (domain/tasks/revisions.ts) is in a later round: its stages'
    // markers carry the round.
    const ids = open.flatMap((task) => [
      taskEndMarker(task._id).id,
      gateMarker(task._id, "plan", task.round ?? 0).id,
      gateMarker(task._id, "diff", task.round ?? 0).id,
      ...STAGE_NAMES.map((stage) => stageDoneMarker(task._id, stageKey(stage, task.round)).id),
      ...(task.status === "queued" ? [stageLease(task._id, "clone", 0).id] : []),
    ]);
    const found = new Map(
      (await markersFields(models, ids, ["_id", "outcome"])).map((marker) => [marker._id, marker]),
    );
    const planned: Array<{ task_id: string; stage: StageName; round: number }> = [];
    for (const task of open) {
      if (found.has(taskEndMarker(task._id).id)) {
        await repairEnding(deps.taskDeps, task._id);
        result.repaired.push(task._id);
        continue;
      }
      // A queued task nobody started is the intake's (it may wait on its dependencies).
      if (task.status === "queued" && !found.has(stageLease(task._id, "clone", 0).id)) continue;
      planned.push({ task_id: task._id, stage: stageOf(task, found), round: task.round ?? 0 });
    }
    if (planned.length === 0) return result;

    // Work that will move the task: a stage job queued, due later, or locked (a dead
    // worker's lock expires and another worker takes the job over).
    const moving = await jobsInFlight(
      models,
      STAGE_JOB_NAME,
      "task_id",
      planned.map((p) => p.task_id),
    );
    const waiting = planned.filter((p) => !moving.has(p.task_id));
    if (waiting.length === 0) return result;
    // A lease beaten within its lifetime: its holder runs, or died less than a lifetime ago.
    const leaseIds = waiting.flatMap((p) =>
      Array.from(
        { length: maxAttempts },
        (_, n) => stageLease(p.task_id, stageKey(p.stage, p.round), n).id,
      ),
    );
    const leases = await markersFields(models, leaseIds, ["_id", "heartbeat_at", "released"]);
    const live = new Set<string>();
    for (const lease of leases) {
      const beat = lease.heartbeat_at instanceof Date ? lease.heartbeat_at.getTime() : 0;
      if (lease.released !== true && now - beat < ttlMs) live.add(lease._id);
    }
    for (const p of waiting) {
      const attempts = Array.from({ length: maxAttempts }, (_, n) => n);
      const key = stageKey(p.stage, p.round);
      if (attempts.some((n) => live.has(stageLease(p.task_id, key, n).id))) continue;
      await deps.resumeStage(p.task_id, p.stage, `sweep:${slot.toISOString()}`, undefined, p.round);
      result.resumed.push({ task_id: p.task_id, stage: p.stage });
    }
    if (result.resumed.length > 0 || result.repaired.length > 0)
      logger.warn(
        { resumed: result.resumed, repaired: result.repaired },
        "resumed tasks that no worker was moving",
      );
    return result;
  }

  return {
    start() {
      timer ??= setInterval(() => void tick(), intervalMs);
      timer.unref();
    },
    stop() {
      if (timer) clearInterval(timer);
      timer = undefined;
    },
    sweep,
  };
}
