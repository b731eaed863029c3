#!/usr/bin/env node
import dotenv from "dotenv";
import { ConfigError, loadConfig } from "./config/env.js";
import { startService } from "./service.js";
import { createLogger } from "./util/logger.js";
import { nodeRuntimeWarning } from "./util/version.js";

/**
 * Entry point. `node dist/main.js` serves HTTP and, unless RUN_WORKERS=false, runs the
 * workers; `node dist/main.js worker` runs only the workers (Procfile `worker`).
 */
async function main(): Promise<void> {
  // `.env` in the working directory, as Probot apps have it; variables already set win.
  dotenv.config({ path: process.env.ENV_FILE || ".env", quiet: true });
  let config;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(error.message);
      process.exit(2);
    }
    throw error;
  }
  const role = process.argv[2] ?? "web";
  if (role !== "web" && role !== "worker") {
    console.error(`Unknown role "${role}": use "web" (the default) or "worker".`);
    process.exit(2);
  }
  const logger = createLogger({ level: config.logLevel, format: config.logFormat });
  // First, before the database or the sandbox can fail in a way an older Node explains.
  const runtimeWarning = nodeRuntimeWarning();
  if (runtimeWarning) logger.warn({ node: process.version }, runtimeWarning);
  const service = await startService({
    config,
    logger,
    web: role === "web",
    workers: role === "worker" || config.runWorkers,
  });
  let signals = 0;
  const shutdown = (signal: string) => {
    signals += 1;
    if (signals > 1) process.exit(1);
    logger.info({ signal }, "shutting down");
    service.stop().then(
      () => process.exit(0),
      (error: unknown) => {
        logger.error({ err: error }, "shutdown failed");
        process.exit(1);
      },
    );
  };
  process.on("SIGTERM", () => shutdown("SIGTERM"));
  process.on("SIGINT", () => shutdown("SIGINT"));
}

main().catch((error: unknown) => {
  createLogger().fatal({ err: error }, "failed to start");
  process.exit(1);
});
