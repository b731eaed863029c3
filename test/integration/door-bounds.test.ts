import { spawn } from "node:child_process";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import WebSocket from "ws";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createGitRepo, type GitFixture } from "../helpers/git-repo.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { connectMcp, waitForTask, type FloodPlan, type FloodReport } from "../helpers/mcp-flood.js";
import { openTaskStream, type EventStream } from "../helpers/ws.js";

/*
 * The red team's floods (issue #40, "wait_for_task has no bound", "Sessions") as bounded
 * regression tests against the real service and the SDK's own MCP client: what one key and
 * one account may hold open (MCP waits, MCP sessions, WebSocket streams) is bounded, refused
 * with 429 `rate_limited` (a tool error on MCP), and another account's calls stay fast and
 * its idle session open meanwhile. Keys per account are capped (409 `conflict`).
 */

const LIMITS = {
  MCP_WAITS_PER_KEY: "5",
  MCP_WAITS_PER_ACCOUNT: "8",
  MCP_REQUESTS_PER_KEY: "12",
  MCP_REQUESTS_PER_ACCOUNT: "20",
  MCP_SESSIONS_PER_KEY: "3",
  MCP_SESSIONS_PER_ACCOUNT: "5",
  MCP_MAX_SESSIONS: "20",
  WS_STREAMS_PER_KEY: "2",
  WS_STREAMS_PER_ACCOUNT: "3",
  KEYS_PER_ACCOUNT: "4",
};

let repo: GitFixture;
let server: TestServer;
const clients: Client[] = [];
const streams: EventStream[] = [];

/** An account with a workspace on the local repository and one queued task (no workers). */
async function account(name: string) {
  const { key } = await server.signup(name);
  const ws = await server.api("POST", "/workspaces", {
    key,
    body: { name: `${name}-ws`, repos: [{ name: "acme/greeter", clone_url: repo.dir }] },
  });
  expect(ws.status).toBe(201);
  const task = await server.api("POST", "/tasks", {
    key,
    body: { workspace_id: ws.body.id, repo_id: "acme/greeter", description: "Add greet()" },
  });
  expect(task.status).toBe(201);
  return { key, taskId: task.body.id as string };
}

function addKey(key: string) {
  return server.api("POST", "/keys/generate", { key, body: { name: "more" } });
}

async function connect(key: string): Promise<Client> {
  const client = await connectMcp(server.url, key);
  clients.push(client);
  return client;
}

const wait = waitForTask;

/** Runs test/helpers/mcp-flood.ts in a process of its own; resolves with its report. */
function runFlood(plan: Omit<FloodPlan, "url">): Promise<FloodReport> {
  const child = spawn(
    process.execPath,
    ["--import", "tsx", "test/helpers/mcp-flood.ts", JSON.stringify({ url: server.url, ...plan })],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  let out = "";
  child.stdout.on("data", (chunk: Buffer) => (out += String(chunk)));
  return new Promise((resolve, reject) =>
    child.once("exit", (code) =>
      code === 0
        ? resolve(JSON.parse(out) as FloodReport)
        : reject(new Error(`flood exited ${code}`)),
    ),
  );
}

/** GET /keys/me of `key` every `everyMs` until stopped: latencies (ms) and statuses. */
function probe(key: string, everyMs = 25) {
  const times: number[] = [];
  const statuses: number[] = [];
  const shots: Promise<void>[] = [];
  const timer = setInterval(() => {
    shots.push(
      (async () => {
        const started = performance.now();
        const res = await fetch(`${server.url}/keys/me`, { headers: { "x-api-key": key } }).catch(
          () => undefined,
        );
        await res?.text();
        times.push(performance.now() - started);
        statuses.push(res?.status ?? 0);
      })(),
    );
  }, everyMs);
  return async () => {
    clearInterval(timer);
    await Promise.all(shots);
    const sorted = [...times].sort((a, b) => a - b);
    const p99 = sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))] ?? 0;
    return { p99, count: times.length, statuses };
  };
}

beforeAll(async () => {
  repo = await createGitRepo({ "README.md": "# greeter\n" });
  server = await startTestServer({ env: LIMITS });
}, 60_000);

afterAll(async () => {
  for (const stream of streams) stream.close();
  await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
  await server?.stop();
  await repo?.remove();
});

describe("bounds per key and account", () => {
  it("refuses a key's wait past its bound and an account's past its own, with a tool error", async () => {
    const a = await account("waiter");
    const other = await account("bystander");
    const second = await addKey(a.key);
    expect(second.status).toBe(201);
    const lastSeq = vi.spyOn(server.service.context.events, "lastSeq");
    const client = await connect(a.key);
    const held = new AbortController();
    const first = Array.from({ length: 5 }, () => wait(client, a.taskId, { signal: held.signal }));
    await expect.poll(() => server.service.mcp!.waits.open, { timeout: 15_000 }).toBe(5);
    // Five waits of one account on one task share one watcher: one read of the log's top.
    expect(server.service.mcp!.waits.tasks).toBe(1);
    expect(lastSeq).toHaveBeenCalledTimes(1);

    const refused = await wait(client, a.taskId);
    expect(refused).toMatchObject({
      ok: false,
      body: { error: { code: "rate_limited", details: { scope: "key", limit: 5 } } },
    });
    if (!refused.ok)
      expect(refused.body.error.message).toMatch(/MCP_WAITS_PER_KEY.*retry in \d+ second/);

    // The account's second key gets the rest of the account's bound, then is refused too.
    const other2 = await connect(second.body.key);
    const more = Array.from({ length: 3 }, () => wait(other2, a.taskId, { signal: held.signal }));
    await expect.poll(() => server.service.mcp!.waits.open, { timeout: 15_000 }).toBe(8);
    expect(await wait(other2, a.taskId)).toMatchObject({
      ok: false,
      body: { error: { code: "rate_limited", details: { scope: "account", limit: 8 } } },
    });

    // Another account is not touched by either bound.
    const bystander = await connect(other.key);
    expect(await wait(bystander, other.taskId, { timeout_s: 1 })).toEqual({
      ok: true,
      reached: "timeout",
    });

    // Cancelled waits give their places back.
    held.abort();
    await Promise.allSettled([...first, ...more]);
    await expect.poll(() => server.service.mcp!.waits.open, { timeout: 15_000 }).toBe(0);
    expect(server.service.mcp!.waits.tasks).toBe(0);
    expect(await wait(client, a.taskId, { timeout_s: 1 })).toEqual({
      ok: true,
      reached: "timeout",
    });
    lastSeq.mockRestore();
  });

  it("keeps another account's GET /keys/me p99 under 1 s during a flood of waits and sessions", async () => {
    const a = await account("flooder");
    const victim = await account("victim");
    const stop = probe(victim.key);
    // The red team's flood, bounded: 2,000 waits over one session of one key, 100 at a time
    // (each admitted one holds its place 2 s), and 500 session openings beside them.
    const report = await runFlood({
      keys: [a.key],
      waits: { taskId: a.taskId, count: 2_000, concurrency: 100, timeoutS: 2 },
      sessions: { count: 500, concurrency: 50 },
    });
    const { p99, count, statuses } = await stop();
    process.stdout.write(
      `flood of 2000 waits and 500 sessions: ${report.ms} ms; victim GET /keys/me ${count} calls, p99 ${p99.toFixed(0)} ms; ${JSON.stringify(report)}\n`,
    );
    expect(statuses.every((s) => s === 200)).toBe(true);
    expect(count).toBeGreaterThan(10);
    expect(p99).toBeLessThan(1_000);
    // At most five waits held places at a time (MCP_WAITS_PER_KEY), each for its 2 s; every
    // other one was refused at once.
    const admitted = report.waits["reached:timeout"] ?? 0;
    expect(admitted + (report.waits.rate_limited ?? 0)).toBe(2_000);
    expect(admitted).toBeGreaterThanOrEqual(5);
    expect(admitted).toBeLessThanOrEqual(5 * (Math.ceil(report.ms / 2_000) + 1));
    expect((report.sessions[429] ?? 0) + (report.sessions[200] ?? 0)).toBe(500);
    expect(report.sessions[200] ?? 0).toBeLessThanOrEqual(2);
    expect(Number(report.sample.session?.retryAfter)).toBeGreaterThanOrEqual(1);
    expect(report.sample.session?.body).toMatchObject({
      error: {
        code: "rate_limited",
        message: expect.stringMatching(/MCP_(SESSIONS|REQUESTS)_PER_/),
      },
    });
  });

  it("never closes another account's idle session because of one account's session flood", async () => {
    const a = await account("sessions");
    const victim = await account("idle");
    const idle = await connect(victim.key);
    const before = server.service.mcp!.sessions;
    const keys = [a.key];
    for (let i = 0; i < 50; i++) {
      const res = await addKey(a.key);
      if (res.status !== 201) break;
      keys.push(res.body.key as string);
    }
    const report = await runFlood({ keys, sessions: { count: 2_100, concurrency: 200 } });
    // The victim's session, idle all along, still answers.
    expect((await idle.listTools()).tools.length).toBeGreaterThan(0);
    expect(report.sessions[200] ?? 0).toBeLessThanOrEqual(5);
    expect(server.service.mcp!.sessions).toBeLessThanOrEqual(before + 5);
  });

  it("caps the keys of an account, under concurrent creation too", async () => {
    const { id: own, key } = await server.signup("keys");
    const created = await Promise.all(Array.from({ length: 10 }, () => addKey(key)));
    const statuses = created.map((c) => c.status);
    expect(statuses.filter((s) => s === 201).length).toBeLessThanOrEqual(3);
    const conflict = created.find((c) => c.status === 409);
    expect(conflict?.body).toMatchObject({
      error: { code: "conflict", message: expect.stringMatching(/KEYS_PER_ACCOUNT/) },
    });
    const listed = await server.api("GET", "/keys", { key });
    const active = (listed.body as Array<{ id: string; revoked_at: string | null }>).filter(
      (k) => k.revoked_at === null,
    );
    expect(active.length).toBeLessThanOrEqual(4);
    for (let i = active.length; i < 4; i++) {
      const res = await addKey(key);
      expect(res.status).toBe(201);
      active.push({ id: res.body.id as string, revoked_at: null });
    }
    expect((await addKey(key)).status).toBe(409);
    // A revoked key makes room for one more.
    const other = active.find((k) => k.id !== own)!;
    expect((await server.api("DELETE", `/keys/${other.id}`, { key })).status).toBe(204);
    expect((await addKey(key)).status).toBe(201);
    expect((await addKey(key)).status).toBe(409);
  });

  it("refuses a WebSocket stream past the key's and the account's bound with 429", async () => {
    const a = await account("streams");
    const other = await account("watcher");
    const second = await addKey(a.key);
    expect(second.status).toBe(201);
    const upgrade = (key: string, taskId: string) =>
      new Promise<{ status: number; retryAfter: string | undefined; body: string }>(
        (resolve, reject) => {
          const socket = new WebSocket(`${server.url.replace(/^http/, "ws")}/tasks/${taskId}/ws`, {
            headers: { "x-api-key": key },
          });
          socket.once("open", () => reject(new Error("the upgrade was accepted")));
          socket.once("unexpected-response", (_req, res) => {
            let body = "";
            res.on("data", (chunk: Buffer) => (body += String(chunk)));
            res.on("end", () =>
              resolve({
                status: res.statusCode ?? 0,
                retryAfter: res.headers["retry-after"],
                body,
              }),
            );
          });
        },
      );
    for (let i = 0; i < 2; i++) streams.push(await openTaskStream(server.url, a.taskId, a.key));
    const byKey = await upgrade(a.key, a.taskId);
    expect(byKey.status).toBe(429);
    expect(Number(byKey.retryAfter)).toBeGreaterThanOrEqual(1);
    expect(JSON.parse(byKey.body)).toMatchObject({
      error: { code: "rate_limited", message: expect.stringMatching(/WS_STREAMS_PER_KEY/) },
    });
    streams.push(await openTaskStream(server.url, a.taskId, second.body.key));
    const byAccount = await upgrade(second.body.key, a.taskId);
    expect(byAccount.status).toBe(429);
    expect(JSON.parse(byAccount.body).error.message).toMatch(/WS_STREAMS_PER_ACCOUNT/);
    // Another account streams as before; a closed stream gives its place back.
    streams.push(await openTaskStream(server.url, other.taskId, other.key));
    const [first] = streams.splice(0, 1);
    first!.close();
    await first!.closed;
    await expect
      .poll(() => server.service.streams!.buffered().sockets, { timeout: 15_000 })
      .toBe(3);
    streams.push(await openTaskStream(server.url, a.taskId, a.key));
  });
});
