import type { Models, TaskRecord } from "../db/models.js";
import { endTask, repairEnding } from "../domain/tasks/endings.js";
import { type StageName, type TaskDeps } from "../domain/tasks/model.js";
import { anyTaskEnded, queuedTasks, taskOutcomes } from "../domain/tasks/store.js";
import { bumpMarkerSoon, readMarker } from "../durable/marker-cache.js";
import { generationMarker } from "../durable/markers.js";
import type { Logger } from "../util/logger.js";

/*
 * The intake: workers look for queued tasks and start their first stage. Creating a task is
 * then one insert (the task document is the queue entry), and a task waits in QUEUED until
 * every task it depends on is DONE. Starting is idempotent (a unique stage job), so several
 * workers polling at once start each task once. A worker in the creating process is kicked
 * at once; others see the queued-tasks marker change within TASK_POLL_MS and scan then.
 *
 * Dependencies (spec planner; docs/api.md, "POST /prism/queue"): the intake remembers which
 * unfinished tasks the waiting tasks depend on, and every poll asks (one `_id` lookup) whether
 * one of them has ended; if so it scans. A dependent therefore starts, or fails, within
 * TASK_POLL_MS of its dependency ending, in whichever process that ended, with nothing to
 * signal. Failing a dependent makes the scan run again, so the failure reaches dependents of
 * dependents (transitively) in the same pass.
 */

const QUEUED_MARKER = generationMarker("tasks-queued");
const SAFETY_SCAN_MS = 30_000;
const COALESCE_MS = 50;
/** Unfinished dependencies watched between scans, at most (beyond: the safety scan). */
const MAX_AWAITED = 1000;
/** How much of a failed dependency's error a dependent quotes. */
const MAX_CAUSE_CHARS = 1000;

/**
 * Tells every worker that tasks were queued, by bumping a marker that workers read by `_id`
 * (cheap) instead of scanning the tasks (FerretDB scans on anything but `_id`). Signals
 * within COALESCE_MS are sent as one write.
 */
export function signalQueued(models: Models): void {
  bumpMarkerSoon(models, QUEUED_MARKER, COALESCE_MS);
}

/**
 * This process's kicks of its intake (TaskDeps.kick). Made with the context, before the
 * intake that answers them (the intake needs the task operations): in a process without
 * workers nothing listens, and a kick has nothing to do.
 */
export class IntakeKicks {
  #listener: (() => void) | undefined;
  readonly kick = (): void => this.#listener?.();
  /** The intake of the worker role listens while it runs; returns the way to stop. */
  listen(listener: () => void): () => void {
    this.#listener = listener;
    return () => {
      if (this.#listener === listener) this.#listener = undefined;
    };
  }
}

export interface Intake {
  kick(): void;
  start(): void;
  stop(): void;
}

/** Polls for queued tasks every `pollMs` and whenever kicked. */
export function createIntake(deps: {
  models: Models;
  taskDeps: TaskDeps;
  enqueueStage(taskId: string, stage: StageName): Promise<void>;
  pollMs: number;
  logger: Logger;
}): Intake {
  const logger = deps.logger.child({ component: "intake" });
  const started = new Map<string, number>();
  let timer: NodeJS.Timeout | undefined;
  let running = false;
  let marker: unknown;
  let lastScan = 0;
  /** Unfinished tasks that queued tasks wait on, as of the last scan. */
  let awaited = new Set<string>();
  let nextAwaited = new Set<string>();

  /**
   * Scans when the queued marker changed, when a task that queued tasks wait on has ended,
   * or every SAFETY_SCAN_MS in any case.
   */
  async function poll(): Promise<void> {
    try {
      const value = await readMarker(deps.models, QUEUED_MARKER);
      if (value === marker && Date.now() - lastScan < SAFETY_SCAN_MS && !(await dependencyEnded()))
        return;
      marker = value;
    } catch (error) {
      logger.warn({ err: error }, "reading the queued-tasks marker failed");
    }
    await scan();
  }

  /** True when one of the awaited dependencies has ended (one lookup by `_id`). */
  async function dependencyEnded(): Promise<boolean> {
    if (awaited.size === 0) return false;
    return anyTaskEnded(deps.models, [...awaited]);
  }
  let again = false;
  let stopped = true;

  async function scan(): Promise<void> {
    if (running) {
      again = true;
      return;
    }
    running = true;
    try {
      do {
        again = false;
        lastScan = Date.now();
        nextAwaited = new Set();
        const queued = await queuedTasks(deps.models, 200);
        const now = Date.now();
        for (const [id, at] of started) if (now - at > 60_000) started.delete(id);
        for (const task of queued) {
          if (stopped) return;
          if (started.has(task._id)) continue;
          if (!(await dependenciesReady(task))) continue;
          started.set(task._id, now);
          await deps.enqueueStage(task._id, "clone");
        }
        awaited = nextAwaited;
      } while (again && !stopped);
    } catch (error) {
      logger.warn({ err: error }, "scanning queued tasks failed");
    } finally {
      running = false;
    }
  }

  /**
   * True when every dependency is DONE. When one failed or was cancelled the task fails,
   * with an error naming that dependency and quoting its error (so a chain names the root).
   */
  async function dependenciesReady(task: Pick<TaskRecord, "_id" | "depends_on">) {
    const ids = task.depends_on ?? [];
    if (ids.length === 0) return true;
    const deps_ = await taskOutcomes(deps.models, ids);
    const byId = new Map(
      deps_.map((d) => [String(d._id), { status: d.status as string, error: d.error as unknown }]),
    );
    for (const id of ids) {
      const dep = byId.get(id);
      if (dep === undefined || dep.status === "failed" || dep.status === "cancelled") {
        if (await endTask(deps.taskDeps, task._id, { status: "failed", error: blockedBy(id, dep) }))
          again = true; // its own dependents may be in this scan's list already: look again
        else await repairEnding(deps.taskDeps, task._id); // ended before; make it show
        return false;
      }
    }
    const waiting = ids.filter((id) => byId.get(id)?.status !== "completed");
    for (const id of waiting) if (nextAwaited.size < MAX_AWAITED) nextAwaited.add(id);
    return waiting.length === 0;
  }

  function blockedBy(id: string, dep: { status: string; error: unknown } | undefined): string {
    if (!dep) return `Not started because dependency ${id} no longer exists.`;
    const what = dep.status === "cancelled" ? "was cancelled" : "failed";
    const cause = typeof dep.error === "string" ? dep.error.trim() : "";
    if (!cause) return `Not started because dependency ${id} ${what}.`;
    const quoted = cause.length > MAX_CAUSE_CHARS ? `${cause.slice(0, MAX_CAUSE_CHARS)}…` : cause;
    return `Not started because dependency ${id} ${what}: ${quoted}`;
  }

  return {
    kick() {
      if (!stopped) void scan();
    },
    start() {
      stopped = false;
      timer = setInterval(() => void poll(), deps.pollMs);
      timer.unref();
      void scan();
    },
    stop() {
      stopped = true;
      if (timer) clearInterval(timer);
    },
  };
}
