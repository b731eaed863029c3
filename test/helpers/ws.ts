import WebSocket from "ws";
import type { TestServer } from "./server.js";

export interface StreamEvent {
  event_type: string;
  seq: number;
  ts: string;
  [field: string]: unknown;
}

export interface EventStream {
  events: StreamEvent[];
  /** Resolves with the close code once the server closes the socket. */
  closed: Promise<number>;
  /** Resolves with the first event (seen or future) matching `predicate`. */
  waitFor(predicate: (event: StreamEvent) => boolean, timeoutMs?: number): Promise<StreamEvent>;
  close(): void;
}

/** Opens /tasks/{id}/ws with a key and collects every message. */
export async function openTaskStream(
  baseUrl: string,
  taskId: string,
  key: string,
  options: { since?: number } = {},
): Promise<EventStream> {
  const url = `${baseUrl.replace(/^http/, "ws")}/tasks/${taskId}/ws${
    options.since !== undefined ? `?since=${options.since}` : ""
  }`;
  const socket = new WebSocket(url, { headers: { "x-api-key": key } });
  const events: StreamEvent[] = [];
  const waiters: Array<{ predicate: (e: StreamEvent) => boolean; resolve(e: StreamEvent): void }> =
    [];
  socket.on("message", (data) => {
    const event = JSON.parse(String(data)) as StreamEvent;
    events.push(event);
    for (const waiter of [...waiters]) {
      if (waiter.predicate(event)) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve(event);
      }
    }
  });
  const closed = new Promise<number>((resolve) => socket.on("close", (code) => resolve(code)));
  await new Promise<void>((resolve, reject) => {
    socket.once("open", () => resolve());
    socket.once("unexpected-response", (_req, res) =>
      reject(new Error(`upgrade answered ${res.statusCode}`)),
    );
    socket.once("error", reject);
  });
  return {
    events,
    closed,
    waitFor(predicate, timeoutMs = 20_000) {
      const seen = events.find(predicate);
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () =>
            reject(
              new Error(
                `no matching event within ${timeoutMs} ms; got ${JSON.stringify(events.map((e) => [e.seq, e.event_type, e.phase ?? e.message ?? e.error]))}`,
              ),
            ),
          timeoutMs,
        );
        waiters.push({
          predicate,
          resolve: (e) => {
            clearTimeout(timer);
            resolve(e);
          },
        });
      });
    },
    close: () => socket.close(),
  };
}

/** Creates a task with `body` (POST /tasks, which must answer 201) and opens its stream. */
export async function startTask(
  server: TestServer,
  key: string,
  body: Record<string, unknown>,
): Promise<{ id: string; stream: EventStream }> {
  const created = await server.api("POST", "/tasks", { key, body });
  if (created.status !== 201)
    throw new Error(`POST /tasks answered ${created.status}: ${JSON.stringify(created.body)}`);
  const id = created.body.id as string;
  return { id, stream: await openTaskStream(server.url, id, key) };
}
