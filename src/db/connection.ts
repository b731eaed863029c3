import mongoose, { type Connection } from "mongoose";
import { startEmbeddedDatabase, type EmbeddedDatabase } from "./embedded.js";
import type { Config } from "../config/env.js";
import type { Logger } from "../util/logger.js";
import { registerModels, type Models } from "./models.js";

export interface Database {
  connection: Connection;
  models: Models;
  /** Set when this process started the embedded server. */
  embedded: EmbeddedDatabase | undefined;
  close(): Promise<void>;
}

/** How long a database call waits for a server before it fails (see connectDatabase). */
export const DATABASE_WAIT_MS = 3000;

/** Appends a database name to a connection string that has none. */
export function withDatabaseName(uri: string, name: string): string {
  // mongodb+srv, multi-host and Unix-socket strings (`mongodb://%2Fpath%2Fdb.sock/`) are not
  // WHATWG URLs; find the path by hand.
  const match = /^(mongodb(?:\+srv)?:\/\/[^/?]+)(\/[^?]*)?(\?.*)?$/.exec(uri);
  if (!match) return uri;
  const [, base, path, query] = match;
  if (path && path !== "/") return uri;
  return `${base}/${name}${query ?? ""}`;
}

/**
 * Connects to MONGODB_URI, or starts the embedded server under DATA_DIR when it is unset,
 * registers the models and makes sure their indexes exist.
 */
export async function connectDatabase(
  config: Pick<Config, "mongodbUri" | "dataDir" | "dbEngine">,
  logger: Logger,
): Promise<Database> {
  let embedded: EmbeddedDatabase | undefined;
  let uri = config.mongodbUri ? withDatabaseName(config.mongodbUri, "foreman") : undefined;
  if (!uri) {
    embedded = await startEmbeddedDatabase({
      dataDir: `${config.dataDir}/db`,
      engine: config.dbEngine,
      logger,
    });
    uri = withDatabaseName(embedded.uri, "foreman");
  }
  const connection = mongoose.createConnection(uri, {
    // While the database is away (restarting, unreachable), calls fail within this time
    // instead of queueing: the API answers 503 upstream_unavailable (http/middleware/errors.ts)
    // rather than holding requests, and everything works again once the server is back.
    serverSelectionTimeoutMS: DATABASE_WAIT_MS,
    // A call that selected the server just as it went away waits at most this long for a
    // pooled connection (the driver's default wait is unbounded). A command already written
    // when the server died can still hang in mongodb 7 (its client-side timeoutMS is gone);
    // the API bounds those requests with HTTP_HANDLER_TIMEOUT_S (http/middleware/deadline.ts).
    waitQueueTimeoutMS: DATABASE_WAIT_MS,
    bufferCommands: false,
    maxPoolSize: 50,
    autoIndex: false,
  });
  try {
    await connection.asPromise();
  } catch (error) {
    await embedded?.stop();
    throw error;
  }
  const models = registerModels(connection);
  await Promise.all(Object.values(models).map((model) => model.createIndexes()));
  logger.info(
    { database: connection.name, embedded: embedded?.engine ?? null },
    "database connected",
  );
  return {
    connection,
    models,
    embedded,
    async close() {
      await connection.close();
      await embedded?.stop();
    },
  };
}

/** True when the database answers a ping. */
export async function pingDatabase(connection: Connection): Promise<boolean> {
  try {
    const db = connection.db;
    if (!db || connection.readyState !== 1) return false;
    await db.command({ ping: 1 }, { timeoutMS: 2000 });
    return true;
  } catch {
    return false;
  }
}
