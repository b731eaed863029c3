import { z } from "zod";
import type { Models, TaskRecord, TaskStatus } from "../db/models.js";
import { subscribeOrdered } from "../domain/tasks/event-hub.js";
import { isTerminalEvent, type TaskEvent } from "../domain/tasks/events.js";
import { isTerminal } from "../domain/tasks/model.js";
import { getTask } from "../domain/tasks/store.js";
import { toTaskView } from "../domain/tasks/views.js";
import { task, taskParams } from "../http/routes/tasks/schema.js";
import type { ConcurrencyBounds } from "../util/concurrency-bounds.js";
import type { Principal } from "../domain/accounts/keys.js";
import type { TaskEventHub } from "../domain/tasks/event-hub.js";
import type { TaskEventLog } from "../domain/tasks/events.js";

/** What the waits read through (the door's McpDeps fits; named here so types.ts can name TaskWaits). */
interface WaitDeps {
  models: Models;
  events: TaskEventLog;
  hub: TaskEventHub;
}

/** What a wait knows of its tool call (the door's ToolCall fits). */
interface WaitCall {
  principal: Principal;
  progress(progress: number, message: string): Promise<void>;
  signal: AbortSignal;
}

/*
 * wait_for_task: the task's event log (domain/tasks/events.ts) through the process's event hub,
 * the same feed as /tasks/{id}/ws. Each phase event is an MCP progress notification; the call
 * answers at the next gate or the end, or when its bound runs out. A client's request timeout
 * (60 s in the SDK's) is reset by each notification when it asks so (resetTimeoutOnProgress).
 */

export const DEFAULT_WAIT_S = 50;
export const MAX_WAIT_S = 600;

export const waitInput = taskParams.extend({
  until: z
    .enum(["gate", "end"])
    .default("gate")
    .describe("gate: the next plan or diff gate, or the end; end: only the end"),
  timeout_s: z
    .number()
    .int()
    .min(1)
    .max(MAX_WAIT_S)
    .default(DEFAULT_WAIT_S)
    .describe(`at most this long, in seconds (default ${DEFAULT_WAIT_S})`),
});

export const waitOutput = z.object({
  reached: z
    .enum(["gate", "end", "timeout"])
    .describe(
      "gate: waiting for approval; end: completed, failed or cancelled; timeout: neither yet",
    ),
  task,
});

const GATES: readonly TaskStatus[] = ["awaiting_approval", "awaiting_diff_approval"];

function reachedBy(status: TaskStatus, until: "gate" | "end"): "gate" | "end" | undefined {
  if (isTerminal(status)) return "end";
  if (until === "gate" && GATES.includes(status)) return "gate";
  return undefined;
}

/** Reads of the task as fresh as the last event, shared by the waits answering within this. */
const SHARED_READ_MS = 1_000;

/** One task watched for the waits of one account: one event subscription, however many waits. */
interface Watcher {
  accountId: string;
  taskId: string;
  status: TaskStatus;
  /** A `done` or `error` event came after the last phase event. */
  ended: boolean;
  /** Events seen; a read of the task made before the last one is stale. */
  version: number;
  read: { version: number; at: number | undefined; promise: Promise<TaskRecord> } | undefined;
  listeners: Set<(event: TaskEvent) => void>;
  users: number;
  ready: Promise<void>;
  stop: (() => void) | undefined;
}

type Reached = "gate" | "end" | "timeout";

/**
 * wait_for_task for the whole door. Waits are bounded per key and per account
 * (MCP_WAITS_PER_KEY, MCP_WAITS_PER_ACCOUNT: 429 `rate_limited` as a tool error, before any
 * database call), and all waits of an account on one task share one watcher: one ownership
 * check, one event subscription (the hub polls once per task) and one read of the task per
 * event, so N waits on a task cost the database what one does.
 */
export class TaskWaits {
  private readonly watchers = new Map<string, Watcher>();
  private open = 0;

  constructor(
    private readonly deps: WaitDeps,
    private readonly bounds: ConcurrencyBounds,
  ) {}

  /** Tasks watched now (tests, metrics). */
  get watched(): number {
    return this.watchers.size;
  }

  /** Waits open now (tests, metrics). */
  get waiting(): number {
    return this.open;
  }

  /** Waits for the task's next gate or its end (see above). */
  async wait(
    input: z.output<typeof waitInput>,
    call: WaitCall,
  ): Promise<z.output<typeof waitOutput>> {
    const release = this.bounds.acquire(call.principal, Date.now() + input.timeout_s * 1000);
    this.open += 1;
    try {
      const watcher = await this.join(call.principal.accountId, input.id);
      try {
        const reached =
          reachedNow(watcher, input.until) ?? (await this.until(watcher, input, call));
        return { reached, task: toTaskView(await this.current(watcher)) };
      } finally {
        this.leave(watcher);
      }
    } finally {
      this.open -= 1;
      release();
    }
  }

  /** Stops every watcher (the door closes). */
  close(): void {
    for (const watcher of this.watchers.values()) watcher.stop?.();
    this.watchers.clear();
  }

  private async join(accountId: string, taskId: string): Promise<Watcher> {
    const id = `${accountId}/${taskId}`;
    let watcher = this.watchers.get(id);
    if (!watcher) {
      const created: Watcher = {
        accountId,
        taskId,
        status: "queued",
        ended: false,
        version: 0,
        read: undefined,
        listeners: new Set(),
        users: 0,
        ready: Promise.resolve(),
        stop: undefined,
      };
      created.ready = this.start(created).catch((error: unknown) => {
        if (this.watchers.get(id) === created) this.watchers.delete(id);
        throw error;
      });
      this.watchers.set(id, created);
      watcher = created;
    }
    watcher.users += 1;
    try {
      await watcher.ready;
    } catch (error) {
      watcher.users -= 1;
      throw error;
    }
    return watcher;
  }

  private leave(watcher: Watcher): void {
    watcher.users -= 1;
    if (watcher.users > 0) return;
    watcher.stop?.();
    const id = `${watcher.accountId}/${watcher.taskId}`;
    if (this.watchers.get(id) === watcher) this.watchers.delete(id);
  }

  /**
   * Ownership first (404 for a foreign task), then the log's top, then the task again: a
   * change after that top arrives as an event, one before it shows in the second read.
   */
  private async start(watcher: Watcher): Promise<void> {
    const { models, events, hub } = this.deps;
    await getTask(models, watcher.accountId, watcher.taskId);
    const since = await events.lastSeq(watcher.taskId);
    const record = await getTask(models, watcher.accountId, watcher.taskId);
    watcher.status = record.status;
    watcher.read = { version: 0, at: Date.now(), promise: Promise.resolve(record) };
    watcher.stop = await subscribeOrdered(hub, events, record, since, (event) => {
      watcher.version += 1;
      if (event.event_type === "phase") {
        watcher.status = event.status;
        watcher.ended = false;
      } else if (isTerminalEvent(event)) watcher.ended = true;
      for (const listener of watcher.listeners) listener(event);
    });
  }

  /** The task as of the watcher's last event; concurrent callers share one read. */
  private current(watcher: Watcher): Promise<TaskRecord> {
    const { read } = watcher;
    const fresh =
      read?.version === watcher.version &&
      (read.at === undefined || Date.now() - read.at < SHARED_READ_MS);
    if (fresh) return read.promise;
    const next: NonNullable<Watcher["read"]> = {
      version: watcher.version,
      at: undefined,
      promise: getTask(this.deps.models, watcher.accountId, watcher.taskId),
    };
    next.promise.then(
      () => (next.at = Date.now()),
      () => {
        if (watcher.read === next) watcher.read = undefined;
      },
    );
    watcher.read = next;
    return next.promise;
  }

  /** Until the watcher's events reach the wait's goal, its bound runs out or it is cancelled. */
  private until(
    watcher: Watcher,
    input: z.output<typeof waitInput>,
    call: Pick<WaitCall, "progress" | "signal">,
  ): Promise<Reached> {
    return new Promise<Reached>((resolve) => {
      let progress = 0;
      const finish = (why: Reached) => {
        clearTimeout(timer);
        call.signal.removeEventListener("abort", onAbort);
        watcher.listeners.delete(listener);
        resolve(why);
      };
      const onAbort = () => finish("timeout");
      const listener = (event: TaskEvent) => {
        if (event.event_type === "phase") {
          progress += 1;
          void call.progress(progress, `${event.phase} (${event.status})`).catch(() => undefined);
          const why = reachedBy(event.status, input.until);
          if (why) finish(why);
        } else if (isTerminalEvent(event)) finish("end");
      };
      const timer = setTimeout(() => finish("timeout"), input.timeout_s * 1000);
      timer.unref();
      watcher.listeners.add(listener);
      call.signal.addEventListener("abort", onAbort);
      if (call.signal.aborted) finish("timeout");
    });
  }
}

function reachedNow(watcher: Watcher, until: "gate" | "end"): Reached | undefined {
  return watcher.ended ? "end" : reachedBy(watcher.status, until);
}

/** The tool's run: the door's TaskWaits (see above). */
export function waitForTask(
  input: z.output<typeof waitInput>,
  call: WaitCall & { waits: TaskWaits },
): Promise<z.output<typeof waitOutput>> {
  return call.waits.wait(input, call);
}
