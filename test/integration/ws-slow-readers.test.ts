// test-matrix: runtime-sensitive: socket back-pressure of slow WebSocket readers (Node's
// streams and buffers).
import WebSocket from "ws";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { openTaskStream } from "../helpers/ws.js";

/*
 * Clients that stop reading (their socket paused, as a stuck browser tab or a dead network
 * path leaves it): the process holds at most WS_BUFFER_BUDGET_KB for all of them together,
 * each is closed with 1013 and the `?since=` to resume from, and a client that reads is not
 * disturbed.
 */

const BUDGET = 2 * 1024 * 1024;
const EVENT_BYTES = 64 * 1024;
const EVENTS = 120;
const PAUSED = 4;

let server: TestServer;
let key: string;
let taskId: string;

beforeAll(async () => {
  server = await startTestServer({
    env: { WS_BUFFER_BUDGET_KB: String(BUDGET / 1024), EVENT_POLL_MS: "50" },
  });
  key = (await server.signup()).key;
  const ws = await server.api("POST", "/workspaces", {
    key,
    body: {
      name: "ws-limits",
      repos: [{ name: "acme/app", clone_url: "https://git.example.com/acme/app.git" }],
    },
  });
  const task = await server.api("POST", "/tasks", {
    key,
    body: { workspace_id: ws.body.id, repo_id: "acme/app", description: "stream me" },
  });
  expect(task.status).toBe(201);
  taskId = task.body.id;
}, 60_000);

afterAll(async () => {
  await server?.stop();
});

interface PausedClient {
  socket: WebSocket;
  closed: Promise<{ code: number; reason: string }>;
}

async function pausedClient(): Promise<PausedClient> {
  const socket = new WebSocket(`${server.url.replace(/^http/, "ws")}/tasks/${taskId}/ws`, {
    headers: { "x-api-key": key },
  });
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    socket.on("close", (code, reason) => resolve({ code, reason: String(reason) })),
  );
  await new Promise<void>((resolve, reject) => {
    socket.once("open", () => resolve());
    socket.once("error", reject);
  });
  // Stop reading: the server's writes pile up in the kernel, then in the process.
  (socket as unknown as { _socket: { pause(): void } })._socket.pause();
  return { socket, closed };
}

describe("WebSocket clients that do not read", () => {
  it("are closed with 1013 within a global budget, and resume with ?since=", async () => {
    const paused = await Promise.all(Array.from({ length: PAUSED }, () => pausedClient()));
    const reader = await openTaskStream(server.url, taskId, key);
    let last = 0;
    for (let i = 0; i < EVENTS; i += 1) {
      const event = await server.service.events.append(taskId, {
        event_type: "log",
        message: `${i} ${"x".repeat(EVENT_BYTES)}`,
      });
      last = event.seq;
    }
    await reader.waitFor((e) => e.seq === last, 60_000);

    // Everything held for the paused clients: within the budget plus one event each.
    const held = server.service.streams!.buffered();
    expect(held.sockets).toBe(PAUSED + 1);
    expect(held.bytes).toBeLessThanOrEqual(BUDGET + held.sockets * (EVENT_BYTES + 1024));
    // The reader got every event, in order, and is still open.
    expect(reader.events.map((e) => e.seq)).toEqual(Array.from({ length: last }, (_, i) => i + 1));

    // Reading again, each paused client finds the close frame after what it was sent.
    for (const client of paused)
      (client.socket as unknown as { _socket: { resume(): void } })._socket.resume();
    const closes = await Promise.all(paused.map((c) => c.closed));
    for (const close of closes) {
      expect(close.code).toBe(1013);
      expect(close.reason).toMatch(/^slow reader: reconnect with \?since=\d+$/);
    }
    const since = Number(/since=(\d+)/.exec(closes[0]!.reason)![1]);
    expect(since).toBeLessThan(last);
    const resumed = await openTaskStream(server.url, taskId, key, { since });
    await resumed.waitFor((e) => e.seq === last, 60_000);
    expect(resumed.events[0]!.seq).toBe(since + 1);
    resumed.close();
    reader.close();
  }, 180_000);
});
