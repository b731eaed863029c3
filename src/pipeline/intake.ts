import type { Models, TaskRecord } from "../db/models.js";
import { endTask, type StageName, type TaskDeps } from "../domain/tasks.js";
import { bumpMarkerSoon, readMarker } from "../domain/marker-cache.js";
import type { Logger } from "../util/logger.js";

/*
 * The intake: workers look for queued tasks and start their first stage. Creating a task is
 * then one insert (the task document is the queue entry), and a task waits in QUEUED until
 * every task it depends on is DONE. Starting is idempotent (a unique stage job), so several
 * workers polling at once start each task once. A worker in the creating process is kicked
 * at once; others see the queued-tasks marker change within TASK_POLL_MS and scan then.
 */

const QUEUED_MARKER = "tasks-queued";
const SAFETY_SCAN_MS = 30_000;
const COALESCE_MS = 50;

/**
 * Tells every worker that tasks were queued, by bumping a marker that workers read by `_id`
 * (cheap) instead of scanning the tasks (FerretDB scans on anything but `_id`). Signals
 * within COALESCE_MS are sent as one write.
 */
export function signalQueued(models: Models): void {
  bumpMarkerSoon(models, QUEUED_MARKER, COALESCE_MS);
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

  /** Scans only when the queued marker changed, or every SAFETY_SCAN_MS in any case. */
  async function poll(): Promise<void> {
    try {
      const value = await readMarker(deps.models, QUEUED_MARKER);
      if (value === marker && Date.now() - lastScan < SAFETY_SCAN_MS) return;
      marker = value;
    } catch (error) {
      logger.warn({ err: error }, "reading the queued-tasks marker failed");
    }
    await scan();
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
        const queued = (await deps.models.Task.collection
          .find({ status: "queued" }, { projection: { _id: 1, depends_on: 1 } })
          .sort({ created_at: 1 })
          .limit(200)
          .toArray()) as unknown as Array<Pick<TaskRecord, "_id" | "depends_on">>;
        const now = Date.now();
        for (const [id, at] of started) if (now - at > 60_000) started.delete(id);
        for (const task of queued) {
          if (stopped) return;
          if (started.has(task._id)) continue;
          if (!(await dependenciesReady(task))) continue;
          started.set(task._id, now);
          await deps.enqueueStage(task._id, "clone");
        }
      } while (again && !stopped);
    } catch (error) {
      logger.warn({ err: error }, "scanning queued tasks failed");
    } finally {
      running = false;
    }
  }

  /** True when every dependency is DONE; fails the task when one failed or was cancelled. */
  async function dependenciesReady(task: Pick<TaskRecord, "_id" | "depends_on">) {
    const ids = task.depends_on ?? [];
    if (ids.length === 0) return true;
    const deps_ = await deps.models.Task.collection
      .find({ _id: { $in: ids as never[] } }, { projection: { status: 1 } })
      .toArray();
    const byId = new Map(deps_.map((d) => [String(d._id), d.status as string]));
    for (const id of ids) {
      const status = byId.get(id);
      if (status === "failed" || status === "cancelled" || status === undefined) {
        await endTask(deps.taskDeps, task._id, {
          status: "failed",
          error: `Dependency ${id} ${status === undefined ? "no longer exists" : `ended ${status}`}; this task was not started.`,
        });
        return false;
      }
    }
    return ids.every((id) => byId.get(id) === "completed");
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
