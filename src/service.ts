import type { Config } from "./config/env.js";
import { registerConfigSecrets } from "./config/env.js";
import { connectDatabase, type Database } from "./db/connection.js";
import { AccountViewCache } from "./domain/account-views.js";
import { loadAccountView } from "./domain/keys.js";
import { createProbot } from "./github/app.js";
import { createGithubReceiver } from "./github/receiver.js";
import { createRateLimiters } from "./http/rate-limit.js";
import { startHttpServer, type RunningServer } from "./http/server.js";
import { pruneOnceMarkers } from "./jobs/housekeeping.js";
import { createScheduler, type Scheduler } from "./jobs/scheduler.js";
import { createLogger, type Logger } from "./util/logger.js";
import { hostname } from "node:os";

export interface ServiceOptions {
  config: Config;
  /** Serve HTTP, WebSocket and webhooks. */
  web: boolean;
  /** Run pipeline, cron and scan workers. */
  workers: boolean;
  logger?: Logger;
  /** Tests: Probot without retries and throttling. */
  testing?: boolean;
}

export interface Service {
  config: Config;
  logger: Logger;
  db: Database;
  scheduler: Scheduler;
  http: RunningServer | undefined;
  stop(): Promise<void>;
}

/** Starts the roles asked for: database first, then jobs, then the HTTP door. */
export async function startService(options: ServiceOptions): Promise<Service> {
  const { config } = options;
  registerConfigSecrets(config);
  const logger = options.logger ?? createLogger({ level: config.logLevel });
  const db = await connectDatabase(config, logger);

  const scheduler = await createScheduler({
    db: db.connection.db!,
    logger,
    name: `${hostname()}:${process.pid}`,
    concurrency: config.pipeline.taskConcurrency,
    lockLifetimeMs: config.jobs.lockLifetimeMs,
  });
  const housekeeping = pruneOnceMarkers(db.models);
  scheduler.define(housekeeping);
  if (options.workers) {
    await scheduler.start();
    await scheduler.agenda.every("1 hour", housekeeping.name, {});
  }

  let http: RunningServer | undefined;
  let accountViews: AccountViewCache | undefined;
  if (options.web) {
    const github = config.github
      ? createGithubReceiver({
          probot: createProbot(config.github, logger, { testing: options.testing ?? false }),
          secret: config.github.webhookSecret,
          models: db.models,
          logger,
        })
      : undefined;
    accountViews = new AccountViewCache(
      db.models,
      (accountId, now) => loadAccountView(db.models, accountId, now),
      config.accountViewPollMs,
    );
    await accountViews.start();
    try {
      http = await startHttpServer({
        config,
        db,
        models: db.models,
        logger,
        limiters: createRateLimiters({
          signupMax: config.signupRateLimit.max,
          signupWindowMs: config.signupRateLimit.windowMs,
        }),
        github,
        accountViews,
      });
    } catch (error) {
      accountViews.stop();
      await scheduler.stop(0);
      await db.close();
      throw error;
    }
    logger.info({ url: http.url, workers: options.workers, github: Boolean(github) }, "listening");
  }

  let stopping: Promise<void> | undefined;
  return {
    config,
    logger,
    db,
    scheduler,
    http,
    stop() {
      stopping ??= (async () => {
        await http?.close();
        accountViews?.stop();
        await scheduler.stop(config.jobs.shutdownGraceMs);
        await db.close();
      })();
      return stopping;
    },
  };
}
