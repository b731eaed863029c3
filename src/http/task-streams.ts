import type { WebSocket } from "ws";
import type { Models } from "../db/models.js";
import { isKeyWithdrawn, type Principal } from "../domain/accounts/keys.js";
import { subscribeOrdered, type TaskEventHub } from "../domain/tasks/event-hub.js";
import { isTerminalEvent, type TaskEvent, type TaskEventLog } from "../domain/tasks/events.js";
import { findTask } from "../domain/tasks/store.js";
import { isTerminal } from "../domain/tasks/model.js";
import type { TaskRecord } from "../db/models.js";
import { ConcurrencyBounds } from "../util/concurrency-bounds.js";
import type { Logger } from "../util/logger.js";
import type { TaskStreams } from "./ws.js";

/*
 * /tasks/{id}/ws (docs/api.md, "WebSocket /tasks/{id}/ws"): replay, then live events, each
 * message `{event_type, ...payload, seq, ts}`; closed with 1000 after `done` or `error`.
 * Sockets are pinged, slow readers are closed, and a socket whose key is revoked is closed
 * (1008) within KEY_CHECK_MS.
 *
 * Slow readers: all sockets of the process together may hold `bufferBudgetBytes` unsent
 * (WS_BUFFER_BUDGET_KB). Each open socket gets an equal share of it (at least MIN_SHARE, at
 * most MAX_SHARE); an event that would take a socket past its share closes it with 1013
 * and a reason naming the `?since=` to resume from, and nothing more is queued on it. So
 * the process holds at most about max(budget, sockets × MIN_SHARE) plus one event per
 * socket, however many clients stop reading (400 of them once held 121 MB).
 */

const PING_MS = 25_000;
const KEY_CHECK_MS = 5_000;
const MAX_SHARE = 8 * 1024 * 1024;
const MIN_SHARE = 16 * 1024;
/** As WS_STREAMS_PER_KEY / _PER_ACCOUNT's defaults (config/env.ts), for callers without config. */
const DEFAULT_STREAMS_PER_KEY = 50;
const DEFAULT_STREAMS_PER_ACCOUNT = 200;
/** Retry-After of a refused stream: a stream lasts as long as its task, so no end is known. */
const STREAM_RETRY_S = 10;
/** Close code "try again later" (RFC 6455 §7.4.1 registry). */
export const SLOW_READER_CLOSE = 1013;

const serialized = new WeakMap<TaskEvent, string>();

function messageOf(event: TaskEvent): string {
  let text = serialized.get(event);
  if (text === undefined) {
    text = JSON.stringify(event);
    serialized.set(event, text);
  }
  return text;
}

export function createTaskStreams(deps: {
  models: Models;
  events: TaskEventLog;
  hub: TaskEventHub;
  logger: Logger;
  pingMs?: number;
  bufferBudgetBytes?: number;
  /** Streams one key / account may hold open (WS_STREAMS_PER_KEY, _PER_ACCOUNT). */
  limits?: { perKey: number; perAccount: number };
}): TaskStreams & { close(): void; buffered(): { sockets: number; bytes: number } } {
  const byKey = new Map<string, Set<WebSocket>>();
  const alive = new WeakMap<WebSocket, boolean>();
  const budget = deps.bufferBudgetBytes ?? 64 * 1024 * 1024;
  let open = 0;
  const bounds = new ConcurrencyBounds({
    what: "task streams",
    perKey: deps.limits?.perKey ?? DEFAULT_STREAMS_PER_KEY,
    perKeySetting: "WS_STREAMS_PER_KEY",
    perAccount: deps.limits?.perAccount ?? DEFAULT_STREAMS_PER_ACCOUNT,
    perAccountSetting: "WS_STREAMS_PER_ACCOUNT",
    retryAfterS: STREAM_RETRY_S,
  });
  const share = () => Math.min(MAX_SHARE, Math.max(MIN_SHARE, Math.floor(budget / open)));

  const pinger = setInterval(() => {
    for (const sockets of byKey.values()) {
      for (const socket of sockets) {
        if (alive.get(socket) === false) {
          socket.terminate();
          continue;
        }
        alive.set(socket, false);
        socket.ping();
      }
    }
  }, deps.pingMs ?? PING_MS);
  pinger.unref();

  const keyCheck = setInterval(() => {
    void (async () => {
      for (const [keyId, sockets] of byKey) {
        if (await isKeyWithdrawn(deps.models, keyId)) {
          for (const socket of sockets) socket.close(1008, "API key revoked");
        }
      }
    })().catch((error: unknown) => deps.logger.warn({ err: error }, "websocket key check failed"));
  }, KEY_CHECK_MS);
  keyCheck.unref();

  function loadTask(principal: Principal, taskId: string): Promise<TaskRecord | null> {
    return findTask(deps.models, principal.accountId, taskId);
  }

  async function attach(
    socket: WebSocket,
    principal: Principal,
    taskId: string,
    since: number | undefined,
  ): Promise<void> {
    const sockets = byKey.get(principal.keyId) ?? new Set<WebSocket>();
    byKey.set(principal.keyId, sockets);
    sockets.add(socket);
    open += 1;
    alive.set(socket, true);
    socket.on("pong", () => alive.set(socket, true));
    // Clients only listen; anything they send is ignored.
    socket.on("message", () => undefined);
    // A frame that breaks the protocol (not masked, not UTF-8, over maxPayload, a bad close
    // code, …): ws closes the connection with the matching code (1002, 1007, 1009) and then
    // emits `error`. Heard here: an `error` event nobody listens to is thrown, and one
    // client's bad frame stopped the whole process, workers included.
    socket.on("error", (error: Error & { code?: string }) =>
      deps.logger.info(
        { code: error.code, task_id: taskId },
        "websocket client broke the protocol",
      ),
    );

    let lastSeq = since ?? 0;
    let closed = false;
    let unsubscribe: (() => void) | undefined;
    const finish = (code: number, reason: string) => {
      if (closed) return;
      closed = true;
      unsubscribe?.();
      socket.close(code, reason);
    };
    socket.on("close", () => {
      closed = true;
      unsubscribe?.();
      open -= 1;
      sockets.delete(socket);
      if (sockets.size === 0) byKey.delete(principal.keyId);
    });

    const task = await loadTask(principal, taskId);
    if (!task) return finish(1008, "task not found");
    const send = (event: TaskEvent) => {
      if (closed) return;
      const message = messageOf(event);
      const queued = socket.bufferedAmount;
      // One event always fits an empty queue, however large; past the share, the reader is
      // told where to resume instead of the process holding more for it.
      if (queued > 0 && queued + Buffer.byteLength(message) > share()) {
        deps.logger.info(
          { task: taskId, buffered: queued, share: share() },
          "websocket closed: slow reader",
        );
        return finish(SLOW_READER_CLOSE, `slow reader: reconnect with ?since=${lastSeq}`);
      }
      lastSeq = event.seq;
      socket.send(message);
      // A retried task has an earlier run's `error` in its log: a terminal event closes the
      // stream only when nothing follows it (a plain read: the log's cached top is not touched).
      if (isTerminalEvent(event))
        void deps.events
          .readNext(taskId, event.seq, 1)
          .then((later) => {
            if (later.length === 0) finish(1000, "task ended");
          })
          .catch(() => finish(1000, "task ended"));
    };
    try {
      const stop = await subscribeOrdered(deps.hub, deps.events, task, since ?? 0, send);
      if (closed) return stop();
      unsubscribe = stop;
    } catch (error) {
      deps.logger.warn({ err: error, task: taskId }, "websocket replay failed");
      return finish(1011, "could not read the task's events");
    }
    // Asked to resume after the end: nothing more will come.
    const current = await loadTask(principal, taskId);
    if (current && isTerminal(current.status) && lastSeq >= (await deps.events.lastSeq(taskId)))
      finish(1000, "task ended");
  }

  return {
    async canWatch(principal, taskId) {
      return Boolean(await loadTask(principal, taskId));
    },
    reserve(principal) {
      return bounds.acquire(principal);
    },
    attach(socket, principal, taskId, since) {
      void attach(socket, principal, taskId, since).catch((error: unknown) => {
        deps.logger.error({ err: error, task: taskId }, "websocket stream failed");
        socket.close(1011, "stream failed");
      });
    },
    close() {
      clearInterval(pinger);
      clearInterval(keyCheck);
    },
    buffered() {
      let bytes = 0;
      for (const set of byKey.values()) for (const socket of set) bytes += socket.bufferedAmount;
      return { sockets: open, bytes };
    },
  };
}
