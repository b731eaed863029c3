import mongoose from "mongoose";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { loadConfig } from "../../src/config/env.js";
import { withDatabaseName } from "../../src/db/connection.js";
import { startEmbeddedDatabase } from "../../src/db/embedded.js";
import { removeWorkdir, workdirNames } from "../../src/workcopy/volume.js";
import { startService, type Service } from "../../src/service.js";
import type { Cleanup } from "./harness.js";

/*
 * What every benchmark stands on: an embedded database in a temporary folder (FerretDB where
 * it can be built, as in development) and the real service on it, web only, with its stop
 * steps registered on the benchmark's cleanup.
 */

export interface BenchStack {
  /** Connection string of the benchmark's database (bare handlers connect to it too). */
  uri: string;
  service: Service;
  /** The embedded engine that serves it (ferretdb or mongodb-memory-server). */
  engine: string;
  /** A temporary folder of this benchmark's own, removed at cleanup. */
  tmp: string;
}

/** Starts the embedded database and the service (workers only when asked) for one benchmark. */
export async function startBenchStack(
  cleanup: Cleanup,
  database: string,
  env: Record<string, string> = {},
  options: { workers?: boolean } = {},
): Promise<BenchStack> {
  const tmp = await mkdtemp(path.join(os.tmpdir(), "foreman-bench-"));
  cleanup.defer("remove temp dir", () => rm(tmp, { recursive: true, force: true }));
  // Before that, once the service has stopped: the working copies it left, kept ones for a
  // follow-up included, whose volumes are still mounted (a removal unmounts them).
  cleanup.defer("remove working copies", async () => {
    const root = path.join(tmp, "data", "work");
    for (const name of await workdirNames(root)) await removeWorkdir(path.join(root, name));
  });
  const db = await startEmbeddedDatabase({ dataDir: path.join(tmp, "db") });
  cleanup.defer("stop database", () => db.stop());
  const uri = withDatabaseName(db.uri, database);
  console.log(`  database: ${db.engine} at ${db.uri}`);
  const service = await startService({
    config: loadConfig({
      NODE_ENV: "production",
      HOST: "127.0.0.1",
      PORT: "0",
      LOG_LEVEL: "silent",
      MONGODB_URI: uri,
      DATA_DIR: path.join(tmp, "data"),
      SIGNUP_RATE_LIMIT: "1000000",
      // The benchmarks' repositories are local folders, refused by default (README, "Sandbox").
      ALLOW_LOCAL_REPOS: "true",
      SHUTDOWN_GRACE_S: "5",
      ...env,
    }),
    web: true,
    workers: options.workers ?? false,
  });
  cleanup.defer("stop service", () => service.stop());
  return { uri, service, engine: db.engine, tmp };
}

/** A second connection to the benchmark's database, for bare handlers or a second writer. */
export async function openBareConnection(
  cleanup: Cleanup,
  uri: string,
  maxPoolSize: number,
): Promise<mongoose.Connection> {
  const connection = mongoose.createConnection(uri, {
    serverSelectionTimeoutMS: 10_000,
    maxPoolSize,
    autoIndex: false,
    autoCreate: false,
  });
  cleanup.defer("close bare connection", () => connection.close());
  await connection.asPromise();
  return connection;
}
