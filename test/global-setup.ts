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

let db: EmbeddedDatabase | undefined;
let dir: string | undefined;

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
  dir = await mkdtemp(path.join(os.tmpdir(), "foreman-test-db-"));
  db = await startEmbeddedDatabase({ dataDir: dir });
  project.provide("mongoUri", db.uri);
}

export async function teardown(): Promise<void> {
  await db?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
}
