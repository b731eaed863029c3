import { EventEmitter } from "node:events";
import type { z } from "zod";
import { collectionOf, type Models } from "../../db/models.js";
import { taskFields } from "./store.js";
import { redactDeep } from "../../util/redact.js";
import { isDuplicateKey } from "../../util/duplicate-key.js";
import type { taskEventPayload } from "./event-schema.js";

/*
 * The per-task event log (docs/api.md, "WebSocket /tasks/{id}/ws"; docs/architecture.md,
 * "Task events"). Every event is stored before anyone sees it, with a sequence number that
 * rises by one per task. Taking a sequence number is a unique `_id` insert (`${task}:${seq}`),
 * atomic on FerretDB and MongoDB alike, so two writers can never share a number and a number
 * is never skipped. Sequence 1 is the task's creation (phase QUEUED), read from the task
 * document itself so creating a task is one write.
 */

/** The payloads, inferred from their zod schemas (event-schema.ts, GET /asyncapi.json). */
export type TaskEventPayload = z.infer<typeof taskEventPayload>;

export type TaskEvent = TaskEventPayload & { seq: number; ts: string };
export type TaskEventType = TaskEventPayload["event_type"];

/** Events after which a task produces nothing more (the WebSocket closes after them). */
export function isTerminalEvent(event: { event_type: string }): boolean {
  return event.event_type === "done" || event.event_type === "error";
}

const SEQ_WIDTH = 10;
/** Ids per `$in` read; the embedded FerretDB serves up to 500 from its `_id` index. */
const READ_BATCH = 500;

export function eventId(taskId: string, seq: number): string {
  return `${taskId}:${String(seq).padStart(SEQ_WIDTH, "0")}`;
}

interface StoredEvent {
  _id: string;
  task_id: string;
  seq: number;
  ts: Date;
  type: string;
  payload: Record<string, unknown>;
}

/** The driver collection of the event log, typed by its records (db/models.ts). */
const eventsOf = (models: Models) => collectionOf<StoredEvent>(models.TaskEvent);

function fromStored(doc: StoredEvent): TaskEvent {
  return {
    event_type: doc.type,
    ...doc.payload,
    seq: doc.seq,
    ts: doc.ts.toISOString(),
  } as TaskEvent;
}

/** The first event of every task, derived from the task document. */
export function creationEvent(task: { created_at: Date }): TaskEvent {
  return {
    event_type: "phase",
    phase: "QUEUED",
    status: "queued",
    seq: 1,
    ts: task.created_at.toISOString(),
  };
}

/**
 * Stores and reads task events, and tells listeners in this process about new ones at once.
 * Listeners in other processes learn of them by polling (see TaskEventHub).
 */
export class TaskEventLog {
  private readonly top = new Map<string, number>();
  private readonly emitter = new EventEmitter();

  constructor(private readonly models: Models) {
    this.emitter.setMaxListeners(0);
  }

  /** Appends an event with the next sequence number; secrets are redacted before storing. */
  async append(taskId: string, payload: TaskEventPayload): Promise<TaskEvent> {
    const { event_type: type, ...rest } = redactDeep(payload) as TaskEventPayload;
    let seq = (await this.knownTop(taskId)) + 1;
    for (;;) {
      const ts = new Date();
      try {
        await eventsOf(this.models).insertOne({
          _id: eventId(taskId, seq),
          task_id: taskId,
          seq,
          ts,
          type,
          payload: rest,
        });
        this.top.set(taskId, seq);
        const event = { event_type: type, ...rest, seq, ts: ts.toISOString() } as TaskEvent;
        this.emitter.emit("event", taskId, event);
        return event;
      } catch (error) {
        if (!isDuplicateKey(error)) throw error;
        // Another writer took this number: walk up to the real top and try again.
        seq = (await this.walkUp(taskId, seq)) + 1;
      }
    }
  }

  /**
   * The highest sequence number this process has stored or seen for the task (never above
   * the real one); undefined when it has not looked.
   */
  storedTop(taskId: string): number | undefined {
    return this.top.get(taskId);
  }

  /** The phase of the task's latest phase event (undefined: none stored). */
  async lastPhase(taskId: string): Promise<string | undefined> {
    const last = await eventsOf(this.models)
      .find({ task_id: taskId, type: "phase" })
      .sort({ seq: -1 })
      .limit(1)
      .next();
    return (last?.payload as { phase?: string } | undefined)?.phase;
  }

  /** Highest stored sequence number of a task (1 when only the creation event exists). */
  async lastSeq(taskId: string): Promise<number> {
    return this.walkUp(taskId, await this.knownTop(taskId));
  }

  private async knownTop(taskId: string): Promise<number> {
    const cached = this.top.get(taskId);
    if (cached !== undefined) return cached;
    const task = await taskFields(this.models, taskId, ["event_seq"]);
    const hint = typeof task?.event_seq === "number" ? task.event_seq : 1;
    return this.walkUp(taskId, hint);
  }

  private async walkUp(taskId: string, from: number): Promise<number> {
    let top = Math.max(1, from);
    while (await eventsOf(this.models).findOne({ _id: eventId(taskId, top + 1) })) top += 1;
    this.top.set(taskId, top);
    if (this.top.size > 10_000) this.top.clear();
    return top;
  }

  /** Events of a task with a sequence number above `after`, in order (at most `limit`). */
  async read(
    task: { _id: string; created_at: Date },
    after = 0,
    limit = 10_000,
  ): Promise<TaskEvent[]> {
    const first = after < 1 ? [creationEvent(task)] : [];
    return [...first, ...(await this.readNext(task._id, after, limit - first.length))];
  }

  /**
   * Reads the events right after `after` by `_id`, stopping at the first one not stored
   * yet. On FerretDB only `_id` lookups use an index (and `_id: {$in}` of up to 500 ids, by
   * the embedded build's patch), so this keeps a read's cost to the task's own events; each
   * round asks for a growing run of ids in one query, so an idle poll costs one lookup and a
   * replay of 2,000 events about ten (it took 2,000 single lookups, ~9 s, before).
   */
  async readNext(taskId: string, after: number, max = 500): Promise<TaskEvent[]> {
    const events: TaskEvent[] = [];
    let next = Math.max(after, 1) + 1;
    let batch = 1; // an idle poll costs one lookup
    while (events.length < max) {
      const count = Math.min(batch, max - events.length);
      const ids = Array.from({ length: count }, (_, i) => eventId(taskId, next + i));
      const docs =
        count === 1
          ? [await eventsOf(this.models).findOne({ _id: ids[0] })]
          : await eventsOf(this.models)
              .find({ _id: { $in: ids } })
              .toArray();
      const bySeq = new Map(docs.filter((d) => d !== null).map((d) => [d.seq, d]));
      for (let i = 0; i < count; i++) {
        const doc = bySeq.get(next + i);
        if (!doc) return events;
        events.push(fromStored(doc));
      }
      next += count;
      batch = Math.min(batch * 4, READ_BATCH);
    }
    return events;
  }

  /** Calls `listener` for every event this process appends to the task. */
  onLocal(taskId: string, listener: (event: TaskEvent) => void): () => void {
    const handler = (id: string, event: TaskEvent) => {
      if (id === taskId) listener(event);
    };
    this.emitter.on("event", handler);
    return () => this.emitter.off("event", handler);
  }

  /** Forgets the cached top of a task (tests, and tasks that ended). */
  forget(taskId: string): void {
    this.top.delete(taskId);
  }
}
