import type { Logger } from "../../util/logger.js";
import type { TaskEvent, TaskEventLog } from "./events.js";

/*
 * Live delivery of task events to the subscribers of one process. Events appended in this
 * process arrive at once; events appended by workers in other processes are found by polling
 * the next sequence number's `_id` every EVENT_POLL_MS, only for tasks somebody here watches.
 * The hub hands events to subscribers in sequence order without gaps; a subscriber that
 * joins late fills what it missed from the log itself (see subscribeOrdered).
 */

type Listener = (event: TaskEvent) => void;

interface Channel {
  last: number;
  listeners: Set<Listener>;
  timer: NodeJS.Timeout;
  unsubscribeLocal: () => void;
  polling: boolean;
}

export class TaskEventHub {
  private readonly channels = new Map<string, Channel>();

  constructor(
    private readonly log: TaskEventLog,
    private readonly pollMs: number,
    private readonly logger: Logger,
  ) {}

  /**
   * Subscribes to a task's events after sequence `from`. The listener receives each event
   * once, in order, starting wherever the hub is; use `subscribeOrdered` for gap filling.
   */
  subscribe(taskId: string, from: number, listener: Listener): () => void {
    let channel = this.channels.get(taskId);
    if (!channel) {
      const created: Channel = {
        last: from,
        listeners: new Set(),
        timer: setInterval(() => void this.poll(taskId), this.pollMs),
        unsubscribeLocal: this.log.onLocal(taskId, (event) => this.offer(taskId, event)),
        polling: false,
      };
      created.timer.unref();
      this.channels.set(taskId, created);
      channel = created;
    }
    channel.listeners.add(listener);
    return () => {
      const current = this.channels.get(taskId);
      if (!current) return;
      current.listeners.delete(listener);
      if (current.listeners.size === 0) this.close(taskId);
    };
  }

  /**
   * Moves a channel past events a subscriber already read from the log, so the poll does
   * not read them again; other subscribers fill any gap this leaves from the log.
   */
  advance(taskId: string, seq: number): void {
    const channel = this.channels.get(taskId);
    if (channel && seq > channel.last) channel.last = seq;
  }

  /** Number of tasks with subscribers here (for tests and metrics). */
  get watchedTasks(): number {
    return this.channels.size;
  }

  stop(): void {
    for (const taskId of [...this.channels.keys()]) this.close(taskId);
  }

  private close(taskId: string): void {
    const channel = this.channels.get(taskId);
    if (!channel) return;
    clearInterval(channel.timer);
    channel.unsubscribeLocal();
    this.channels.delete(taskId);
  }

  private offer(taskId: string, event: TaskEvent): void {
    const channel = this.channels.get(taskId);
    if (!channel || event.seq <= channel.last) return;
    if (event.seq !== channel.last + 1) {
      // Another process wrote the events in between: read them first, in order.
      void this.poll(taskId);
      return;
    }
    this.deliver(channel, event);
  }

  private deliver(channel: Channel, event: TaskEvent): void {
    channel.last = event.seq;
    for (const listener of channel.listeners) {
      try {
        listener(event);
      } catch (error) {
        this.logger.warn({ err: error }, "task event listener failed");
      }
    }
  }

  private async poll(taskId: string): Promise<void> {
    const channel = this.channels.get(taskId);
    if (!channel || channel.polling) return;
    channel.polling = true;
    try {
      const events = await this.log.readNext(taskId, channel.last);
      for (const event of events) {
        if (this.channels.get(taskId) !== channel) return;
        if (event.seq === channel.last + 1) this.deliver(channel, event);
      }
    } catch (error) {
      this.logger.warn({ err: error, task: taskId }, "polling task events failed");
    } finally {
      channel.polling = false;
    }
  }
}

/**
 * Subscribes with replay: first the stored events after `since`, then live ones, each
 * exactly once and in order. `send` may be called before this function's promise settles.
 */
export async function subscribeOrdered(
  hub: TaskEventHub,
  log: TaskEventLog,
  task: { _id: string; created_at: Date },
  since: number,
  send: (event: TaskEvent) => void,
): Promise<() => void> {
  let lastSent = since;
  let replaying = true;
  const pending: TaskEvent[] = [];
  let filling: Promise<void> = Promise.resolve();

  const emit = (event: TaskEvent) => {
    if (event.seq !== lastSent + 1) return;
    lastSent = event.seq;
    send(event);
  };
  const accept = (event: TaskEvent) => {
    if (event.seq <= lastSent) return;
    if (event.seq === lastSent + 1) return emit(event);
    // A gap between what was sent and what arrives: read it from the log, then go on.
    filling = filling.then(async () => {
      if (event.seq <= lastSent) return;
      for (const missed of await log.read(task, lastSent, event.seq - lastSent - 1))
        if (missed.seq < event.seq) emit(missed);
      emit(event);
    });
  };

  const unsubscribe = hub.subscribe(task._id, since, (event) => {
    if (replaying) pending.push(event);
    else accept(event);
  });
  try {
    for (const event of await log.read(task, since)) emit(event);
    hub.advance(task._id, lastSent);
    replaying = false;
    for (const event of pending.splice(0)) accept(event);
    await filling;
  } catch (error) {
    unsubscribe();
    throw error;
  }
  return unsubscribe;
}
