import mongoose from "mongoose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { createScheduler, type Scheduler } from "../../src/queue/scheduler.js";
import { createLogger } from "../../src/util/logger.js";
import { redactText, SecretScope, withSecretScope } from "../../src/util/redact.js";
import { testDatabaseUri } from "../helpers/server.js";

/*
 * A job saved from inside one task's redaction scope starts at once in this process (the
 * in-memory notification channel), in the async context of the code that saved it. It may
 * be another account's job (a notice, another task's stage): it must not run with the
 * saving task's secrets redacted from its text (issue #40, finding 1).
 */

let connection: mongoose.Connection;
let scheduler: Scheduler;

beforeAll(async () => {
  connection = await mongoose.createConnection(testDatabaseUri("redaction-jobs")).asPromise();
  scheduler = await createScheduler({
    db: connection.db!,
    logger: createLogger({ level: "silent" }),
    name: "redaction-jobs",
    concurrency: 2,
    lockLifetimeMs: 60_000,
    processEveryMs: 60_000,
  });
});

afterAll(async () => {
  await scheduler?.stop(1000);
  await connection?.close();
});

describe("jobs and redaction scopes", () => {
  it("runs a job saved inside a task's scope outside any scope", async () => {
    let seen!: (text: string) => void;
    const ran = new Promise<string>((resolve) => (seen = resolve));
    scheduler.define({
      name: "test.redaction-scope",
      schema: z.object({ text: z.string() }),
      async run({ text }) {
        await Promise.resolve();
        seen(redactText(text));
      },
    });
    await scheduler.start();
    const a = new SecretScope("account-a", ["export function"]);
    await withSecretScope(a, () =>
      scheduler.enqueue(
        { name: "test.redaction-scope", schema: z.object({ text: z.string() }) },
        { text: "B's text: export function add(a, b) {" },
        undefined,
      ),
    );
    expect(await ran).toBe("B's text: export function add(a, b) {");
  });
});
