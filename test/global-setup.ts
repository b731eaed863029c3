import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { TestProject } from "vitest/node";
import { startEmbeddedDatabase, type EmbeddedDatabase } from "../src/db/embedded.js";

declare module "vitest" {
  export interface ProvidedContext {
    mongoUri: string;
  }
}

interface Shared {
  started: Promise<{ db: EmbeddedDatabase; dir: string }>;
  users: number;
}

/*
 * vitest calls this once per project (vitest.config.ts has two, and the root counts too), all
 * in its main process: they share one server through this process-wide slot, and the last
 * teardown stops it.
 */
const slot = globalThis as typeof globalThis & { __foremanTestDatabase?: Shared };

/**
 * One real MongoDB-compatible server for the whole run, started by the same launcher as the
 * service (FerretDB here, mongodb-memory-server where a MongoDB binary can be had), or the
 * server named by TEST_MONGODB_URI. Each test file uses its own database on it.
 */
export async function setup(project: TestProject): Promise<void> {
  if (process.env.TEST_MONGODB_URI) {
    project.provide("mongoUri", process.env.TEST_MONGODB_URI);
    return;
  }
  slot.__foremanTestDatabase ??= {
    started: (async () => {
      const dir = await mkdtemp(path.join(os.tmpdir(), "foreman-test-db-"));
      return { db: await startEmbeddedDatabase({ dataDir: dir }), dir };
    })(),
    users: 0,
  };
  const shared = slot.__foremanTestDatabase;
  shared.users += 1;
  project.provide("mongoUri", (await shared.started).db.uri);
}

export async function teardown(): Promise<void> {
  const shared = slot.__foremanTestDatabase;
  if (!shared) return;
  shared.users -= 1;
  if (shared.users > 0) return;
  slot.__foremanTestDatabase = undefined;
  const { db, dir } = await shared.started;
  await db.stop();
  await rm(dir, { recursive: true, force: true });
}
