import mongoose from "mongoose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { createScheduler, type Scheduler } from "../../src/jobs/scheduler.js";
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
afterAll(async () => {
  await Promise.all(schedulers.map((s) => s.stop(1000)));
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
    await until("every job run", async () => runs.size === jobs, 30_000);
    await new Promise((r) => setTimeout(r, 500)); // a second run would come within the polls
    expect([...runs.values()].filter((count) => count !== 1)).toEqual([]);
    const markers = await connection.db!.collection("once_markers").countDocuments({
      scope: "job-lock",
    });
    expect(markers).toBe(jobs);
  }, 60_000);
});
