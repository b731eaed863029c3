import mongoose from "mongoose";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { createScheduler, type Scheduler } from "../../src/queue/scheduler.js";
import { createLogger } from "../../src/util/logger.js";
import { until } from "../helpers/github-fake.js";
import { testDatabaseUri } from "../helpers/server.js";

/*
 * Agenda's lock is one findOneAndUpdate, which FerretDB does not apply atomically: two
 * workers polling at once could both lock one job and run it twice. The scheduler's job
 * store takes a marker by unique insert with each lock, so every job runs exactly once
 * however many workers look for it at the same moment.
 */

let connection: mongoose.Connection;
const schedulers: Scheduler[] = [];

beforeAll(async () => {
  connection = await mongoose.createConnection(testDatabaseUri("locks")).asPromise();
});
// Each test's workers stop after it, passed or failed: three workers left polling every
// 20 ms load the shared database under the next tests (which timed out behind them on a
// loaded machine).
afterEach(async () => {
  await Promise.all(schedulers.splice(0).map((s) => s.stop(1000)));
});
afterAll(async () => {
  await connection.close();
});

describe("job locks", () => {
  it("runs each job once with three workers polling every 20 ms", async () => {
    const runs = new Map<number, number>();
    const kind = {
      name: "test.count",
      schema: z.object({ n: z.number().int() }),
      async run({ n }: { n: number }) {
        runs.set(n, (runs.get(n) ?? 0) + 1);
        await new Promise((r) => setTimeout(r, 5));
      },
    };
    for (let i = 0; i < 3; i += 1) {
      const scheduler = await createScheduler({
        db: connection.db!,
        logger: createLogger({ level: "silent" }),
        name: `worker-${i}`,
        concurrency: 4,
        lockLifetimeMs: 60_000,
        processEveryMs: 20,
      });
      scheduler.define(kind);
      schedulers.push(scheduler);
    }
    // Queued by a process without workers, so only the workers' polls find them, all at once.
    const producer = await createScheduler({
      db: connection.db!,
      logger: createLogger({ level: "silent" }),
      name: "producer",
      concurrency: 1,
      lockLifetimeMs: 60_000,
    });
    const jobs = 60;
    await Promise.all(
      Array.from({ length: jobs }, (_, n) => producer.enqueue(kind, { n }, undefined)),
    );
    await Promise.all(schedulers.map((s) => s.start()));
    // until's default bound: the database is shared with the rest of the suite, and on a
    // loaded 2-core machine 60 jobs took longer than 30 s.
    await until("every job run", async () => runs.size === jobs);
    await new Promise((r) => setTimeout(r, 500)); // a second run would come within the polls
    expect([...runs.values()].filter((count) => count !== 1)).toEqual([]);
    const markers = await connection.db!.collection("once_markers").countDocuments({
      scope: "job-lock",
    });
    expect(markers).toBe(jobs);
  });

  it("takes over a job a dead worker had locked but not started, once its lock expired", async () => {
    const ran: number[] = [];
    const kind = {
      name: "test.orphan",
      schema: z.object({ n: z.number().int() }),
      async run({ n }: { n: number }) {
        ran.push(n);
      },
    };
    const producer = await scheduler("orphan-producer", 60_000);
    await producer.enqueue(kind, { n: 1 }, undefined);
    // What a worker that died right after locking leaves: an expired lock and its marker.
    const jobs = connection.db!.collection("jobs");
    const job = (await jobs.findOne({ name: kind.name }))!;
    await jobs.updateOne({ _id: job._id }, { $set: { lockedAt: new Date(Date.now() - 600_000) } });
    await connection.db!.collection("once_markers").insertOne({
      _id: `job-lock:${String(job._id)}:${(job.nextRunAt as Date).getTime()}:-:-` as never,
      scope: "job-lock",
      created_at: new Date(),
    });
    const worker = await scheduler("orphan-worker", 60_000, 50);
    worker.define(kind);
    await worker.start();
    await until("the orphaned job run", async () => ran.length > 0);
    expect(ran).toEqual([1]);
  });

  it("releases at stop the jobs it locked but had not started", async () => {
    const runs: Array<{ n: number; by: string }> = [];
    const kind = (by: string) => ({
      name: "test.slow",
      schema: z.object({ n: z.number().int() }),
      concurrency: 1,
      async run({ n }: { n: number }) {
        runs.push({ n, by });
        await new Promise((r) => setTimeout(r, 300));
      },
    });
    const producer = await scheduler("slow-producer", 60_000);
    for (let n = 0; n < 3; n += 1) await producer.enqueue(kind("producer"), { n }, undefined);
    const first = await scheduler("slow-a", 60_000, 50);
    first.define(kind("a"));
    await first.start();
    await until("a job started", async () => runs.length > 0);
    await first.stop(5_000);
    // Locks of 60 s: what A did not start must be free at once, not after they expire.
    const second = await scheduler("slow-b", 60_000, 50);
    second.define(kind("b"));
    await second.start();
    await until("every job run", async () => runs.length === 3);
    expect(runs.map((r) => r.n).sort()).toEqual([0, 1, 2]);
    expect(runs.filter((r) => r.by === "b").length).toBeGreaterThan(0);
  });
});

async function scheduler(name: string, lockLifetimeMs: number, processEveryMs?: number) {
  const created = await createScheduler({
    db: connection.db!,
    logger: createLogger({ level: "silent" }),
    name,
    concurrency: 4,
    lockLifetimeMs,
    ...(processEveryMs ? { processEveryMs } : {}),
  });
  schedulers.push(created);
  return created;
}
