import path from "node:path";
import { leaseExpiry, runLeased } from "../durable/lease.js";
import { z } from "zod";
import type { Config } from "../config/env.js";
import type { Models, TaskPhase, TaskRecord } from "../db/models.js";
import { isTerminalEvent, type TaskEventLog } from "../domain/tasks/events.js";
import { endTask, hasEnded, repairEnding } from "../domain/tasks/endings.js";
import { isTerminal, STAGE_NAMES, type StageName, type TaskDeps } from "../domain/tasks/model.js";
import { moveTo } from "../domain/tasks/gates.js";
import {
  addCommandMs,
  applyUpdate,
  raiseRound,
  taskById,
  taskFields,
  updateTask,
  type TaskUpdate,
} from "../domain/tasks/store.js";
import type { RepoIndex } from "../indexer/index.js";
import type { ReadyModelClient } from "../llm/provider.js";
import type { JobKind, Scheduler } from "../queue/scheduler.js";
import { recordStage } from "../metrics/index.js";
import type { Logger } from "../util/logger.js";
import type { GithubClient } from "../github-api/client.js";
import { BudgetExceededError, describeFailure, StageError } from "./errors.js";
import { STAGES } from "./stages/index.js";
import { resolveRepo } from "../domain/workspaces/workspaces.js";
import { claimMarker, markerExists, markerFields } from "../durable/markers.js";
import { gateMarker } from "../domain/tasks/gates.js";
import { stageDoneMarker } from "../domain/tasks/model.js";
import { stageLease } from "../durable/lease.js";
import { AppError } from "../errors.js";
import { stageKey } from "../domain/tasks/revisions.js";
import { BaseRuns } from "../verify/baseline.js";
import { CommandTimeBudget } from "../sandbox/command-time.js";
import { redactError, withSecretScope } from "../util/redact.js";
import { taskSecretScope } from "./mcp.js";

/*
 * The task pipeline: a task's stages run in Agenda jobs (`pipeline.stage`): a job runs its
 * stage, then the stages that follow, until the task waits at a gate or ends (stageJob
 * below); a gate's decision queues the next stage's job. What keeps this correct when workers die or Agenda's
 * lock is taken twice (its locking is not atomic on FerretDB):
 *
 * - a lease per stage run, taken by a unique insert (`lease:<task>:<stage>:<attempt>`) and
 *   kept alive by a heartbeat; a run finding a live lease leaves the stage to its holder, a
 *   run finding a stale one (its worker died) takes the next attempt and resumes the stage;
 * - a done marker per stage that records its outcome, so a stage that finished is never run
 *   again, only its outcome re-applied (queueing the next stage is idempotent);
 * - Agenda's lock lifetime (JOB_LOCK_LIFETIME_S) brings a dead worker's job back to another
 *   worker, and STAGE_MAX_ATTEMPTS bounds how often, after which the task fails;
 * - a run finding a live lease queues the stage again for when that lease expires (its job
 *   lock may have expired before the lease did: the lock was taken first), and the task
 *   sweep (sweeper.ts) resumes a running task that no job moves any more.
 */

export type { Stage, StageContext, StageOutcome } from "./stage.js";
import type { StageContext, StageOutcome } from "./stage.js";

/** The driver collection of once-markers, typed by its records (db/models.ts). */

export interface PipelineDeps {
  config: Config;
  models: Models;
  events: TaskEventLog;
  scheduler: Scheduler;
  /** The task operations (src/context.ts builds them, with this file's `enqueueStage`). */
  tasks: TaskDeps;
  logger: Logger;
  modelClient(): ReadyModelClient;
  cloneUrl(task: TaskRecord): Promise<string>;
  buildIndex(root: string): Promise<RepoIndex>;
  github: GithubClient;
}

const stageJobSchema = z.strictObject({
  task_id: z.string().min(1),
  stage: z.enum(STAGE_NAMES),
  /** Set on a run queued again (see resumeStage): what makes its job unique. */
  resume: z.string().min(1).max(200).optional(),
  /** The task's round the stage runs in (domain/tasks/revisions.ts); absent: 0. */
  round: z.number().int().min(1).optional(),
});
export type StageJob = z.infer<typeof stageJobSchema>;
/** The job kind of a pipeline stage. */
export const STAGE_JOB_NAME = "pipeline.stage";
const ENDED_CHECK_MS = 2000;
/** A stage queued again for a busy lease runs this long after the lease's expiry. */
const AFTER_LEASE_MS = 500;

/** A stage job's round field: absent in round 0, as jobs were before rounds existed. */
function inRound(round: number): { round?: number } {
  return round > 0 ? { round } : {};
}

/** The part of a stage job's unique key that names its round (none in round 0). */
function roundKey(round: number): Record<string, number> {
  return round > 0 ? { "data.round": round } : {};
}

/** Where a task's working copy lives. */
export function workdirFor(config: Config, taskId: string): string {
  return path.join(config.dataDir, "work", taskId);
}

/** Queues a stage of a task (TaskDeps.enqueueStage): one unique job per task, stage and round. */
export async function enqueueStage(
  scheduler: Scheduler,
  taskId: string,
  stage: StageName,
  round = 0,
): Promise<void> {
  // Round 0 keeps the job key it had before rounds existed.
  await scheduler.enqueue(
    { name: STAGE_JOB_NAME, schema: stageJobSchema },
    { task_id: taskId, stage, ...inRound(round) },
    { unique: { "data.task_id": taskId, "data.stage": stage, ...roundKey(round) } },
  );
}

/** Builds the pipeline: the job kind workers run, over the task operations it is given. */
export function createPipeline(deps: PipelineDeps) {
  const { config, models, events, scheduler, tasks: taskDeps } = deps;
  const indexes = new Map<string, RepoIndex>();
  // The base runs PLANNING starts beside the model, for VERIFYING (verify/baseline.ts).
  const baseRuns = new BaseRuns();
  // Each task's TASK_COMMAND_TIME_LIMIT_S, shared by its stages and its base run.
  const commandTimes = new Map<string, CommandTimeBudget>();
  const holder = `${process.pid}`;

  /**
   * Queues a stage again, as a job of its own that is unique for `key` (the lease attempt and
   * due time it waits for, or the sweep slot that found the task stranded): a repeated
   * request is one job, and the run finds the stage's outcome when its holder finished.
   */
  async function resumeStage(
    taskId: string,
    stage: StageName,
    key: string,
    at?: Date,
    round = 0,
  ): Promise<boolean> {
    return scheduler.enqueue(
      { name: STAGE_JOB_NAME, schema: stageJobSchema },
      { task_id: taskId, stage, resume: key, ...inRound(round) },
      {
        unique: {
          "data.task_id": taskId,
          "data.stage": stage,
          "data.resume": key,
          ...roundKey(round),
        },
        ...(at ? { at } : {}),
      },
    );
  }

  /**
   * Applies a stage's outcome. The next stage is returned for this worker to run at once (see
   * stageJob) while it runs jobs; queued as a job of its own when it is stopping.
   */
  async function applyOutcome(
    task: TaskRecord,
    outcome: StageOutcome,
    round: number,
  ): Promise<StageJob | undefined> {
    if ("next" in outcome) {
      const nextRound = outcome.round ?? round;
      if (scheduler.running)
        return { task_id: task._id, stage: outcome.next, ...inRound(nextRound) };
      await taskDeps.enqueueStage(task._id, outcome.next, nextRound);
    } else if ("wait" in outcome) {
      // Applied again (a repeated run found the stored outcome) after the gate was decided:
      // the task has gone on, and must not be moved back to the gate.
      const gate = outcome.wait.status === "awaiting_diff_approval" ? "diff" : "plan";
      if (await markerExists(models, gateMarker(task._id, gate, round))) return undefined;
      const current = await taskFields(models, task._id, ["phase", "status"]);
      if (current?.phase !== outcome.wait.phase || current.status !== outcome.wait.status)
        await moveTo(taskDeps, task._id, outcome.wait.phase, outcome.wait.status);
      if (task.thread || task.report_to)
        await taskDeps.notifyThread(
          task._id,
          outcome.wait.status === "awaiting_diff_approval" ? "diff" : "plan",
        );
    } else await endTask(taskDeps, task._id, outcome.end);
    return undefined;
  }

  /**
   * The time budget of `task`'s commands in this process: started from what its finished
   * commands took (`command_ms`, also another worker's), adding each command's time there.
   */
  function commandTimeOf(task: TaskRecord): CommandTimeBudget {
    const kept = commandTimes.get(task._id);
    if (kept) {
      kept.atLeast(task.command_ms ?? 0);
      return kept;
    }
    const made = new CommandTimeBudget(
      config.pipeline.commandTimeLimitS * 1000,
      task.command_ms ?? 0,
      async (ms) => {
        await addCommandMs(models, task._id, ms);
      },
    );
    if (commandTimes.size >= 256) commandTimes.delete(commandTimes.keys().next().value!);
    commandTimes.set(task._id, made);
    return made;
  }

  function forgetTask(taskId: string): void {
    commandTimes.delete(taskId);
    indexes.delete(taskId);
    events.forget(taskId);
  }

  /**
   * Runs one stage of one task: lease, phase, stage function, outcome or failure. Returns the
   * stage to run next, if the outcome says to go on now.
   */
  async function runStage(
    job: StageJob,
    touch: () => Promise<void>,
  ): Promise<StageJob | undefined> {
    const stage = STAGES[job.stage];
    const taskId = job.task_id;
    const logger = deps.logger.child({ task: taskId, stage: stage.name });
    const round = job.round ?? 0;
    const key = stageKey(stage.name, round);
    const doneMarker = stageDoneMarker(taskId, key);
    // Three independent `_id` lookups, in parallel: the task, its end marker, the stage's
    // stored outcome.
    const [found, ended, done] = await Promise.all([
      taskById(models, taskId),
      hasEnded(models, taskId),
      markerFields(models, doneMarker),
    ]);
    const task: TaskRecord | null = found;
    if (!task) return undefined;
    // A job of an earlier round (a revision or retry started a later one) is over.
    if (round < (task.round ?? 0)) return undefined;
    if (ended) {
      if (!isTerminal(task.status)) await repairEnding(taskDeps, taskId);
      forgetTask(taskId);
      return undefined;
    }
    // Found done (a repeated run): its outcome is applied again.
    if (done?.outcome) return applyOutcome(task, done.outcome as StageOutcome, round);
    const claimed: TaskRecord = task;
    let next: StageJob | undefined;
    const leaseOptions = {
      attempt: (attempt: number) => stageLease(taskId, key, attempt),
      ttlMs: config.jobs.lockLifetimeMs,
      maxAttempts: config.pipeline.stageMaxAttempts,
    };
    const result = await runLeased(
      models,
      {
        ...leaseOptions,
        holder,
        beat: touch,
        onBeatError: (error) => logger.warn({ err: error }, "stage heartbeat failed"),
      },
      async (run) => {
        let task = claimed;
        // A cancel in this process ends the stage at once; one in another process within
        // ENDED_CHECK_MS (one `_id` lookup each time).
        const stopLocal = events.onLocal(taskId, (event) => {
          if (isTerminalEvent(event)) run.abort(new Error("task ended"));
        });
        const endedCheck = setInterval(() => {
          hasEnded(models, taskId).then(
            (ended) => ended && run.abort(new Error("task ended")),
            () => undefined,
          );
        }, ENDED_CHECK_MS);
        endedCheck.unref();
        const started = performance.now();
        // Set once the stage's outcome is stored: the lease no longer matters (a repeated job
        // finds the outcome first), and a task going on has not ended.
        let finished: StageOutcome | undefined;
        try {
          if (task.phase !== stage.phase) {
            const extra = task.started_at ? {} : { started_at: new Date() };
            // hasEnded was looked up above, before the lease.
            const moved = await moveTo(taskDeps, taskId, stage.phase, "running", extra, {
              endChecked: true,
            });
            if (!moved) return;
            task = { ...task, phase: stage.phase, status: "running", ...extra };
          } else if (run.lease.attempt > 0) {
            await ensurePhaseEvent(taskId, stage.phase);
            await events.append(taskId, {
              event_type: "log",
              message: `Resuming ${stage.phase} (attempt ${run.lease.attempt + 1}): the worker running it stopped.`,
            });
          }
          if (round > (task.round ?? 0)) {
            // The first stage of a round a stage outcome started (a self-review round).
            await raiseRound(models, taskId, round);
            task = { ...task, round };
          }
          task = await withRepo(task);
          const ctx = createContext(task, run.lease.attempt, run.signal, logger);
          logger.info({ attempt: run.lease.attempt }, "stage started");
          const outcome = await stage.run(ctx);
          // Stopped by the ending: its status is put back (see the catch below).
          if (run.signal.aborted) return await repairEnding(taskDeps, taskId);
          // Another worker recorded an outcome first (it took the lease over): this run fails the
          // task as the duplicate-key error of the unique insert did before claimMarker.
          if (!(await claimMarker(models, doneMarker, { outcome })))
            throw new Error(`the outcome of stage ${stage.name} was recorded by another worker`);
          finished = outcome;
          run.keep();
          logger.info({ ms: Math.round(performance.now() - started) }, "stage finished");
          recordStage(stage.name, "done", started);
          next = await applyOutcome(task, outcome, round);
        } catch (error) {
          if (run.signal.aborted || (await hasEnded(models, taskId))) {
            logger.info("stage stopped: the task ended");
            // The stage's last writes may have landed over the ending's (FerretDB applies an
            // update as read, change, write back: a cost `$inc` racing the cancel wrote the old
            // `running` status back). Its writes have settled now: the ending is put back.
            return await repairEnding(taskDeps, taskId);
          }
          logger.warn(
            { err: error, ms: Math.round(performance.now() - started) },
            "stage failed; failing the task",
          );
          const cause = (await baseFilledDisk(taskId, error)) ?? error;
          // The base's checks may still run beside the stage (started while planning): they
          // stop, and their checkout goes, before the task is seen failed.
          await baseRuns.stop(taskId);
          await endTask(taskDeps, taskId, {
            status: "failed",
            error: describeFailure(cause, stage.phase),
          });
          recordStage(stage.name, "failed", started);
        } finally {
          clearInterval(endedCheck);
          stopLocal();
          if (finished && "end" in finished) forgetTask(taskId);
          else if (!finished || "wait" in finished) {
            if (await hasEnded(models, taskId).catch(() => false)) forgetTask(taskId);
          }
        }
      },
    );
    if (result === "busy") {
      // Held by a worker that beat its lease lately. It may have died since: its job lock,
      // taken before the lease, can expire first and bring this run here while the lease
      // still looks live. Nothing else would look at the stage again, so it is queued for
      // when the lease expires: that run takes the stage over, or finds its outcome stored.
      const live = await leaseExpiry(models, leaseOptions);
      const at = new Date(Math.max(live?.at.getTime() ?? 0, Date.now()) + AFTER_LEASE_MS);
      await resumeStage(
        taskId,
        stage.name,
        `after-lease:${live?.attempt ?? "-"}:${at.getTime()}`,
        at,
        round,
      );
      logger.debug({ at }, "stage is held by another worker; looking again when its lease expires");
      return undefined;
    }
    if (result === "exhausted") {
      await endTask(taskDeps, taskId, {
        status: "failed",
        error: `The worker running ${stage.phase} stopped before finishing it, ${config.pipeline.stageMaxAttempts === 1 ? "and STAGE_MAX_ATTEMPTS allows one run" : `${config.pipeline.stageMaxAttempts} times (STAGE_MAX_ATTEMPTS)`}; the task was given up. The workers' logs say why they stopped.`,
      });
      forgetTask(taskId);
      return undefined;
    }
    return next;
  }

  /**
   * The base's checks run beside the stages on the task's volume (pipeline/base.ts): a stage
   * that ran out of space while they ran past TASK_DISK_LIMIT_MB failed because of them, and
   * the task fails naming the budget and their command rather than the stage's git error.
   */
  async function baseFilledDisk(taskId: string, error: unknown) {
    const text =
      error instanceof Error
        ? `${error.message} ${String((error as { stderr?: unknown }).stderr ?? "")}`
        : "";
    // git words it its own way when a write of its index or objects fails ("write error. Out of
    // diskspace"), seen in a full CI run while the base filled the volume.
    if (!/No space left on device|ENOSPC|Disk quota exceeded|EDQUOT|Out of diskspace/i.test(text))
      return undefined;
    return baseRuns.overBudget(taskId);
  }

  /**
   * The task with its repository: as recorded when work started, or read from the
   * workspace now (tasks are created without it, to keep creation one small insert).
   */
  async function withRepo(task: TaskRecord): Promise<TaskRecord> {
    if (task.repo?.clone_url) return task;
    let found;
    try {
      found = await resolveRepo(models, task.account_id, task.workspace_id, task.repo_id);
    } catch (error) {
      if (!(error instanceof AppError)) throw error;
      // A suspended installation (409) says so in its own words.
      if (error.status !== 404) throw new StageError(error.message);
      throw new StageError(
        `The repository ${task.repo_id} is no longer part of workspace ${task.workspace_id}.`,
      );
    }
    const { workspace, repo } = found;
    const snapshot = {
      kind: workspace.kind as "git" | "github",
      full_name: repo.full_name,
      clone_url: repo.clone_url,
      // Empty: not known yet (GitHub installation events do not carry it); CLONING clones
      // the remote's HEAD and records the branch it finds.
      default_branch: repo.default_branch ?? "",
      installation_id: workspace.github?.installation_id ?? null,
    };
    await updateTask(models, task._id, { repo: snapshot });
    return { ...task, repo: snapshot };
  }

  /** After a crash between writing a phase and storing its event, the event is written. */
  async function ensurePhaseEvent(taskId: string, phase: TaskPhase): Promise<void> {
    if ((await events.lastPhase(taskId)) !== phase)
      await events.append(taskId, { event_type: "phase", phase, status: "running" });
  }

  function createContext(
    task: TaskRecord,
    attempt: number,
    signal: AbortSignal,
    logger: Logger,
  ): StageContext {
    const taskId = task._id;
    const workdir = workdirFor(config, taskId);
    const cost = {
      input_tokens: task.cost?.input_tokens ?? 0,
      output_tokens: task.cost?.output_tokens ?? 0,
      usd: task.cost?.usd ?? 0,
      cached_input_tokens: task.cost?.cached_input_tokens ?? 0,
      cache_write_tokens: task.cost?.cache_write_tokens ?? 0,
    };
    const ctx: StageContext = {
      task,
      config,
      models,
      logger,
      workdir,
      attempt,
      signal,
      async log(message) {
        await events.append(taskId, { event_type: "log", message });
      },
      async emit(payload) {
        await events.append(taskId, payload);
      },
      async update(fields) {
        const written: TaskUpdate = { ...fields, updated_at: new Date() };
        await updateTask(models, taskId, written);
        ctx.task = applyUpdate(ctx.task, written);
      },
      async addUsage(usage) {
        cost.input_tokens += usage.inputTokens;
        cost.output_tokens += usage.outputTokens;
        cost.usd += usage.usd;
        cost.cached_input_tokens += usage.cachedInputTokens ?? 0;
        cost.cache_write_tokens += usage.cacheWriteTokens ?? 0;
        await ctx.update({ cost: { ...cost } });
        if (cost.usd >= config.llm.maxTaskCostUsd)
          throw new BudgetExceededError(cost.usd, config.llm.maxTaskCostUsd);
      },
      async index() {
        const cached = indexes.get(taskId);
        if (cached) return cached;
        await ctx.log("Rebuilding the index of the working copy (built by another worker).");
        return ctx.buildIndex();
      },
      async buildIndex() {
        const built = await deps.buildIndex(workdir);
        if (indexes.size >= 64) indexes.delete(indexes.keys().next().value as string);
        indexes.set(taskId, built);
        return built;
      },
      model: () => deps.modelClient(),
      cloneUrl: () => deps.cloneUrl(task),
      async setPhase(phase) {
        if (!(await moveTo(taskDeps, taskId, phase, "running"))) {
          signal.throwIfAborted();
          throw new Error("task ended");
        }
      },
      github: deps.github,
      baseRuns,
      commandTime: commandTimeOf(task),
    };
    return ctx;
  }

  const stageJob: JobKind<StageJob> = {
    name: STAGE_JOB_NAME,
    schema: stageJobSchema,
    concurrency: config.pipeline.taskConcurrency,
    /*
     * The job's stage, then each stage its outcome goes on to, in turn: a task moves from stage
     * to stage in this job while the worker runs jobs, without a job of its own per stage (queueing
     * one and picking it up took 5 to 10 ms of database writes a stage). Each stage still
     * stores its outcome before the next starts, so a worker dying in a later stage leaves this
     * job's lock to expire: the job runs again, finds the stored outcomes and goes on from the
     * stage that did not finish, as a job of that stage would. A task keeps its
     * TASK_CONCURRENCY slot until it waits at a gate or ends.
     */
    async run(data, job) {
      const touch = async () => {
        await job.touch();
      };
      for (let stage: StageJob | undefined = data; stage;) {
        // Everything the stage produces is redacted with its account's secrets, and only its
        // (util/redact.ts); an error escaping to the job's record too. Looked up per stage:
        // secrets added while the task runs count from its next stage.
        const scope = await taskSecretScope(models, stage.task_id);
        const current: StageJob = stage;
        stage = await withSecretScope(scope, async () => {
          try {
            return await runStage(current, touch);
          } catch (error) {
            throw error instanceof Error ? redactError(error) : error;
          }
        });
      }
    },
  };

  return {
    taskDeps,
    stageJob,
    enqueueStage: taskDeps.enqueueStage,
    resumeStage,
  };
}

export type Pipeline = ReturnType<typeof createPipeline>;
