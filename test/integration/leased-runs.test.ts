import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Models } from "../../src/db/models.js";
import { healthLease } from "../../src/durable/lease.js";
import { runLeased } from "../../src/durable/lease.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

/*
 * The one durable-job runner (durable/lease.ts) of the pipeline's stages and the health scans,
 * on the real database: one holder at a time, heartbeats, timeout, release or keep.
 */

let server: TestServer;
let models: Models;

beforeAll(async () => {
  server = await startTestServer();
  models = server.service.db.models;
}, 120_000);

afterAll(async () => {
  await server?.stop();
});

/* Leases of a made-up health report: a real marker kind, ids no other test uses. */
const options = (prefix: string, extra: Partial<Parameters<typeof runLeased>[1]> = {}) => ({
  attempt: (attempt: number) => healthLease(prefix, attempt),
  ttlMs: 60_000,
  maxAttempts: 2,
  onBeatError: (error: unknown) => {
    throw error;
  },
  ...extra,
});

describe("runLeased", () => {
  it("runs the work once at a time: a second caller finds it busy while the first holds it", async () => {
    const prefix = `lease-test:${randomUUID()}`;
    let release!: () => void;
    const holding = new Promise<void>((resolve) => (release = resolve));
    const first = runLeased(models, options(prefix), async (run) => {
      await holding;
      return run.lease.attempt;
    });
    await new Promise((r) => setTimeout(r, 50));
    expect(await runLeased(models, options(prefix), async () => "ran")).toBe("busy");
    release();
    expect(await first).toEqual({ value: 0 });
    // Released at the end: the next run takes the next attempt at once.
    expect(await runLeased(models, options(prefix), async (run) => run.lease.attempt)).toEqual({
      value: 1,
    });
    // Both attempts used: given up.
    expect(await runLeased(models, options(prefix), async () => "ran")).toBe("exhausted");
  });

  it("keeps the lease taken when the work says its outcome is stored", async () => {
    const prefix = `lease-test:${randomUUID()}`;
    await runLeased(models, options(prefix), async (run) => run.keep());
    expect(await runLeased(models, options(prefix), async () => "ran")).toBe("busy");
  });

  it("beats while the work runs and aborts it at its timeout, releasing the lease", async () => {
    const prefix = `lease-test:${randomUUID()}`;
    let beats = 0;
    const result = await runLeased(
      models,
      options(prefix, {
        ttlMs: 1000,
        beat: async () => {
          beats += 1;
        },
        timeout: { ms: 800, reason: "too slow" },
      }),
      (run) =>
        new Promise<string>((resolve) =>
          run.signal.addEventListener("abort", () => resolve(String(run.signal.reason))),
        ),
    );
    expect(result).toEqual({ value: "Error: too slow" });
    expect(beats).toBeGreaterThanOrEqual(2);
    const lease = await models.Once.collection.findOne({
      _id: healthLease(prefix, 0).id as never,
    });
    expect(lease?.released).toBe(true);
  });
});
