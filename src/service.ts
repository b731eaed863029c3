import type { Config } from "./config/env.js";
import type { Database } from "./db/connection.js";
import { AccountViewCache } from "./domain/accounts/views.js";
import { loadAccountView } from "./domain/accounts/keys.js";
import { TaskEventHub } from "./domain/tasks/event-hub.js";
import type { TaskEventLog } from "./domain/tasks/events.js";
import { noGithubApp } from "./github-api/receiver.js";
import { createMcpDoor, type McpDoor } from "./mcp/door.js";
import { createTaskStreams } from "./http/task-streams.js";
import { createIntake, type Intake } from "./pipeline/intake.js";
import type { Pipeline } from "./pipeline/runner.js";
import { createTaskSweep, type TaskSweep } from "./pipeline/sweeper.js";
import { createGithubReceiver } from "./github/receiver.js";
import { createSetupToken, mountManifestFlow, REGISTER_PATH } from "./github/manifest.js";
import { createRateLimiters } from "./http/rate-limit.js";
import { ensureRateLimitIndexes } from "./durable/request-records.js";
import { startHttpServer, type RunningServer } from "./http/server.js";
import { noPages, type HttpDeps } from "./http/types.js";
import { reconcileCronJobs } from "./jobs/cron.js";
import { HEALTH_SWEEP_JOB } from "./jobs/health-scan.js";
import type { Scheduler } from "./queue/scheduler.js";
import { startMetricsServer, type MetricsServer } from "./metrics/http.js";
import { detachMetricsDatabase } from "./metrics/index.js";
import type { Logger } from "./util/logger.js";
import { SERVICE_VERSION } from "./util/version.js";
import { retakeFromDeadPredecessors } from "./queue/identity.js";
import { buildContext, type ServiceContext } from "./context.js";
import { heldElsewhere, reclaimWorkdirs, releaseDataMounts } from "./pipeline/workdir-mounts.js";

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
  /** The METRICS_PORT listener, when one is configured. */
  metrics: MetricsServer | undefined;
  pipeline: Pipeline;
  events: TaskEventLog;
  /** The WebSocket task streams of a web process (their buffered bytes, for tests). */
  streams: { buffered(): { sockets: number; bytes: number } } | undefined;
  /** The MCP door of a web process (its open sessions, for tests). */
  mcp: { readonly sessions: number; readonly waits: { open: number; tasks: number } } | undefined;
  /** Every part of the service, built once (src/context.ts). */
  context: ServiceContext;
  stop(): Promise<void>;
}

/** How often workers look for locks of dead processes of their DATA_DIR (queue/identity.ts). */
const RETAKE_CHECK_MS = 30_000;

/**
 * Starts the roles asked for on the service's one context (src/context.ts): the context first
 * (database, scheduler, every part), then the workers, the metrics listener, the HTTP door.
 */
export async function startService(options: ServiceOptions): Promise<Service> {
  const context = await buildContext(options);
  const { config, logger, db, scheduler } = context;
  const workers = options.workers ? await startWorkers(context) : undefined;

  // Both roles can serve their own metrics apart from the API (a worker has no other port).
  const metricsPort = config.metrics.port;
  const metricsServer =
    metricsPort === undefined
      ? undefined
      : await startMetricsServer({ ...config.metrics, port: metricsPort }, logger);
  if (metricsServer) logger.info({ url: metricsServer.url }, "metrics listening");

  let web: WebRole | undefined;
  if (options.web) {
    try {
      web = await startWeb(context, options.workers);
    } catch (error) {
      await metricsServer?.close();
      workers?.stop();
      context.close();
      await scheduler.stop(0);
      await db.close();
      throw error;
    }
  }

  let stopping: Promise<void> | undefined;
  return {
    config,
    logger,
    db,
    scheduler,
    http: web?.http,
    metrics: metricsServer,
    pipeline: context.pipeline,
    events: context.events,
    streams: web?.streams,
    mcp: web?.mcp,
    context,
    stop() {
      stopping ??= (async () => {
        workers?.stop();
        context.close();
        await web?.mcp.close();
        await web?.http.close();
        await metricsServer?.close();
        web?.stop();
        await scheduler.stop(config.jobs.shutdownGraceMs);
        // Read while the database is open: the working copies a sibling worker still holds.
        const held = workers ? await heldMounts(context) : undefined;
        detachMetricsDatabase(db.connection.db);
        await db.close();
        // Closed, no stage left in this process can record anything: its mounts can go.
        if (held) await releaseMounts(context, held);
      })();
      return stopping;
    },
  };
}

/** The working copies another live process holds (kept mounted at a stop); undefined: unknown. */
async function heldMounts(context: ServiceContext): Promise<Set<string> | undefined> {
  const { config, models, logger } = context;
  try {
    return await heldElsewhere(models, config.dataDir, config.jobs.lockLifetimeMs);
  } catch (error) {
    logger.warn({ err: error }, "could not read what other workers hold; mounts left in place");
    return undefined;
  }
}

/** A graceful stop's last step: DATA_DIR's mounts off but kept copies' (workdir-mounts.ts). */
async function releaseMounts(context: ServiceContext, held: Set<string>): Promise<void> {
  const { config, logger } = context;
  try {
    const released = await releaseDataMounts(config.dataDir, held);
    if (released.length > 0) logger.info({ mounts: released.length }, "released DATA_DIR mounts");
  } catch (error) {
    logger.warn({ err: error }, "could not release DATA_DIR's mounts (npm run data:release does)");
  }
}

/** At a worker's start: what a stop left unmounted is taken back or removed. */
async function reclaimMounts(context: ServiceContext): Promise<void> {
  const { config, models, logger } = context;
  try {
    const { taken, removed } = await reclaimWorkdirs(
      models,
      config.dataDir,
      config.dataDirMinFreeMb * 1024 * 1024,
    );
    if (taken.length + removed.length > 0)
      logger.info({ taken: taken.length, removed: removed.length }, "working copies reclaimed");
  } catch (error) {
    logger.warn({ err: error }, "could not reclaim the working copies a stop left");
  }
}

/** The worker role: the intake, the task sweep, dead workers' locks, the scheduler's jobs. */
async function startWorkers(context: ServiceContext): Promise<{ stop(): void }> {
  const { config, logger, db, models, scheduler, pipeline, tasks } = context;
  const intake: Intake = createIntake({
    models,
    taskDeps: tasks,
    enqueueStage: pipeline.enqueueStage,
    pollMs: config.pipeline.taskPollMs,
    logger,
  });
  const stopKicks = context.kicks.listen(() => intake.kick());
  // After a crash: the dead predecessor's stages are retaken now, not after the lock
  // lifetime; checked again now and then for a sibling worker of this DATA_DIR that died.
  const retake = () =>
    retakeFromDeadPredecessors(db.connection.db!, config.jobs.lockLifetimeMs, logger);
  await retake();
  await reclaimMounts(context);
  const retakeTimer = setInterval(
    () =>
      void retake().catch((error: unknown) =>
        logger.warn({ err: error }, "looking for dead workers' locks failed"),
      ),
    RETAKE_CHECK_MS,
  );
  retakeTimer.unref();
  await scheduler.start();
  await scheduler.agenda.every("1 hour", context.housekeeping.name, {});
  await scheduler.agenda.every("1 minute", HEALTH_SWEEP_JOB, {});
  intake.start();
  // No running task without a job that will move it (pipeline/sweeper.ts).
  const sweep: TaskSweep = createTaskSweep({
    config,
    models,
    taskDeps: tasks,
    resumeStage: pipeline.resumeStage,
    logger,
  });
  sweep.start();
  try {
    await reconcileCronJobs(models, db.connection.db!, context.cron);
  } catch (error) {
    logger.error({ err: error }, "bringing cron automation jobs in step failed");
  }
  return {
    stop() {
      stopKicks();
      intake.stop();
      sweep.stop();
      clearInterval(retakeTimer);
    },
  };
}

interface WebRole {
  http: RunningServer;
  streams: ReturnType<typeof createTaskStreams>;
  mcp: McpDoor;
  /** Stops the account views, the event hub and the streams (the server is closed apart). */
  stop(): void;
}

/** The web role: the HTTP server with its account views and task streams. */
async function startWeb(context: ServiceContext, workers: boolean): Promise<WebRole> {
  const { config, logger, db, models, github } = context;
  // No App yet: registering one needs this token, printed below once the server listens.
  const setupToken = !config.github ? createSetupToken() : undefined;
  const accountViews = new AccountViewCache(
    models,
    (accountId, now) => loadAccountView(models, accountId, now),
    config.accountViewPollMs,
  );
  await accountViews.start();
  const hub = new TaskEventHub(context.events, config.eventPollMs, logger);
  const streams = createTaskStreams({
    models,
    events: context.events,
    hub,
    logger,
    bufferBudgetBytes: config.wsBufferBudgetBytes,
    limits: config.bounds.wsStreams,
  });
  // The fourth door (mcp/door.ts): the same domain calls as the REST routes, at /mcp.
  const mcp = createMcpDoor({
    config,
    models,
    tasks: context.tasks,
    events: context.events,
    hub,
    logger,
    githubClient: context.githubClient,
    modelClient: context.modelClient,
    healthScans: context.healthScans,
  });
  const stop = () => {
    streams.close();
    hub.stop();
    accountViews.stop();
  };
  let http: RunningServer;
  try {
    await ensureRateLimitIndexes(db.connection);
    const deps: HttpDeps = Object.freeze({
      config,
      db,
      models,
      logger,
      limiters: createRateLimiters({
        signupMax: config.signupRateLimit.max,
        signupWindowMs: config.signupRateLimit.windowMs,
        webhookMax: config.automationWebhookRateLimit.max,
        webhookWindowMs: config.automationWebhookRateLimit.windowMs,
        connection: db.connection,
      }),
      github:
        github && config.github
          ? createGithubReceiver({
              probot: github.probot,
              secret: config.github.webhookSecret,
              models,
              logger,
            })
          : noGithubApp,
      vendorRoutes: context.vendorRoutes,
      vendorInstalls: context.vendorInstalls,
      mountPages: setupToken
        ? (router) => mountManifestFlow(router, { config, logger, setupToken })
        : noPages,
      accountViews,
      tasks: context.tasks,
      githubClient: context.githubClient,
      modelClient: context.modelClient,
      cron: context.cron,
      healthScans: context.healthScans,
      mcp,
    } satisfies HttpDeps);
    http = await startHttpServer({ ...deps, streams });
  } catch (error) {
    await mcp.close();
    stop();
    throw error;
  }
  // Short lines a person reads on a terminal: where the API, the dashboard and the docs are
  // (on PUBLIC_URL when it is set: the address people use).
  const base = (config.manifest.publicUrl ?? http.url).replace(/\/+$/, "");
  logger.info(
    { url: http.url, version: SERVICE_VERSION, workers, github: Boolean(github) },
    `listening on ${http.url}: foreman ${SERVICE_VERSION}, ${workers ? "web and workers" : "web only (RUN_WORKERS=false)"}`,
  );
  logger.info(`dashboard: ${base}/dashboard/`);
  logger.info(
    `API: ${base}/ (OpenAPI /openapi.json, task events /asyncapi.json, MCP /mcp); docs: README.md "First task", docs/api.md`,
  );
  // The token is the operator's key to the registration page: it goes to the log, the
  // place only the operator reads (docs/operations.md, "Registering the GitHub App").
  if (setupToken) {
    logger.info(
      `GitHub App not configured: open ${base}${REGISTER_PATH}?token=${setupToken} to register it`,
    );
  }
  return { http, streams, mcp, stop };
}
