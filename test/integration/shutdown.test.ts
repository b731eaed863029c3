// test-matrix: runtime-sensitive: graceful shutdown of open HTTP and WebSocket connections.
import mongoose from "mongoose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { createScheduler } from "../../src/queue/scheduler.js";
import { createLogger } from "../../src/util/logger.js";
import { until } from "../helpers/github-fake.js";
import { startTestServer, testDatabaseUri } from "../helpers/server.js";
import { openTaskStream } from "../helpers/ws.js";

/*
 * What a graceful stop (SIGTERM, SIGINT: src/main.ts calls service.stop()) does, as
 * docs/operations.md "Graceful shutdown" states it: WebSocket clients get 1001 "going
 * away"; a job still running when SHUTDOWN_GRACE_S ends keeps its lock (it is resumed
 * elsewhere once the lock expires), while jobs locked but not started are released at once
 * (test/integration/scheduler-locks.test.ts).
 */

let connection: mongoose.Connection;
beforeAll(async () => {
  connection = await mongoose.createConnection(testDatabaseUri("shutdown")).asPromise();
});
afterAll(async () => {
  await connection.close();
});

describe("graceful shutdown", () => {
  it("closes task streams with 1001 going away", async () => {
    const server = await startTestServer();
    const { key } = await server.signup();
    const ws = await server.api("POST", "/workspaces", {
      key,
      body: {
        name: "shutdown",
        repos: [{ name: "acme/app", clone_url: "https://git.example.com/acme/app.git" }],
      },
    });
    const task = await server.api("POST", "/tasks", {
      key,
      body: { workspace_id: ws.body.id, repo_id: "acme/app", description: "watch me" },
    });
    const stream = await openTaskStream(server.url, task.body.id, key);
    await stream.waitFor((e) => e.seq === 1);
    await server.stop();
    expect(await stream.closed).toBe(1001);
  }, 60_000);

  it("keeps the lock of a job still running when the grace period ends", async () => {
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let started = 0;
    const kind = {
      name: "test.long-stage",
      schema: z.object({ n: z.number().int() }),
      concurrency: 1,
      async run() {
        started += 1;
        await held;
      },
    };
    const worker = await createScheduler({
      db: connection.db!,
      logger: createLogger({ level: "silent" }),
      name: "stopping-worker",
      concurrency: 1,
      lockLifetimeMs: 60_000,
      processEveryMs: 50,
    });
    worker.define(kind);
    await worker.start();
    await worker.enqueue(kind, { n: 1 });
    await until("the job started", async () => started === 1, 10_000);
    await worker.stop(200);
    const job = await connection.db!.collection("jobs").findOne({ name: kind.name });
    // Still locked by the stopped worker: no other worker starts it before the lock expires.
    expect(job?.lockedAt).toBeInstanceOf(Date);
    expect(new Date(job!.lockedAt as Date).getTime()).toBeGreaterThan(Date.now() - 60_000);
    release();
  }, 30_000);
});
