import path from "node:path";
import type { Config } from "./config/env.js";
import { registerConfigSecrets } from "./config/env.js";
import { connectDatabase, type Database } from "./db/connection.js";
import { AccountViewCache } from "./domain/account-views.js";
import { loadAccountView } from "./domain/keys.js";
import { createInsertBatcher } from "./db/insert-batcher.js";
import { MarkerCache } from "./durable/marker-cache.js";
import { TIERS_MARKER } from "./domain/quota.js";
import { TaskEventHub } from "./domain/task-event-hub.js";
import { findWorkspace, WORKSPACES_MARKER, type WorkspaceRecord } from "./domain/workspaces.js";
import type { Tier } from "./db/models.js";
import { findTier } from "./domain/accounts.js";
import { startIntegrationCache } from "./domain/integrations/store.js";
import { newTaskCollection } from "./domain/tasks/model.js";
import { TaskEventLog } from "./domain/task-events.js";
import { createProbot } from "./github-api/app.js";
import { createGithubClient } from "./github-api/client.js";
import { createTaskStreams } from "./http/task-streams.js";
import { createMcpDoor, type McpDoor } from "./mcp/door.js";
import { buildIndex } from "./indexer/index.js";
import { createModelClient, requireModel, type ModelSettings } from "./llm/provider.js";
import { createIntake, type Intake } from "./pipeline/intake.js";
import { createPipeline, type Pipeline } from "./pipeline/runner.js";
import { createTaskSweep, type TaskSweep } from "./pipeline/sweeper.js";
import { StageError } from "./pipeline/errors.js";
import { createGithubReceiver } from "./github/receiver.js";
import { createSetupToken, mountManifestFlow, REGISTER_PATH } from "./github/manifest.js";
import { defineVendorJobs, vendorRoutes, vendorSettings } from "./integrations/registry.js";
import type { IntegrationDeps, IntegrationJobDeps } from "./integrations/plugin.js";
import { registerHandlers } from "./github/handlers.js";
import { githubJobs } from "./github/jobs.js";
import { createThreadNotifier } from "./github/notices.js";
import { createProgressReporter } from "./github/progress.js";
import { createIntegrationNotifier, integrationNoticeJob } from "./integrations/shared/notices.js";
import { TASK_REQUEST_JOB, type RequestTask } from "./integrations/shared/task-request.js";
import { taskRequestJob } from "./integrations/shared/task-requests.js";
import { createRateLimiters } from "./http/rate-limit.js";
import { ensureRateLimitIndexes } from "./durable/request-records.js";
import { startHttpServer, type RunningServer } from "./http/server.js";
import { createCronJobs, cronJobKind, reconcileCronJobs } from "./jobs/cron.js";
import {
  createHealthScanJob,
  createHealthSweepJob,
  enqueueHealthScan,
  HEALTH_SWEEP_JOB,
} from "./jobs/health-scan.js";
import { pruneOnceMarkers } from "./jobs/housekeeping.js";
import { createScheduler, type Scheduler } from "./queue/scheduler.js";
import { startMetricsServer, type MetricsServer } from "./metrics/http.js";
import { detachMetricsDatabase, enableMetrics } from "./metrics/index.js";
import { createLogger, type Logger } from "./util/logger.js";
import {
  processIdentity,
  retakeFromDeadPredecessors,
  setIdentityDataDir,
} from "./queue/identity.js";
import { checkSandbox, configureSandbox } from "./util/sandbox.js";
import { configureSandboxCaches } from "./util/sandbox-cache.js";
import { createStorageCheck } from "./domain/storage.js";

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
  mcp: { readonly sessions: number } | undefined;
  stop(): Promise<void>;
}

/** The model settings of the configuration, or undefined when no model is configured. */
export function modelSettings(config: Config): ModelSettings | undefined {
  const { llm } = config;
  if (!llm.provider) return undefined;
  return {
    provider: llm.provider,
    ...(llm.baseUrl ? { baseUrl: llm.baseUrl } : {}),
    ...(llm.apiKey ? { apiKey: llm.apiKey } : {}),
    ...(llm.model ? { model: llm.model } : {}),
    stream: llm.stream,
    timeoutMs: llm.timeoutMs,
    maxRetries: llm.maxRetries,
    ...(llm.prices ? { prices: llm.prices } : {}),
    ...(llm.contextTokens ? { contextTokens: llm.contextTokens } : {}),
  };
}

/** How often workers look for locks of dead processes of their DATA_DIR (queue/identity.ts). */
const RETAKE_CHECK_MS = 30_000;

/** Starts the roles asked for: database first, then jobs, then the HTTP door. */
export async function startService(options: ServiceOptions): Promise<Service> {
  const { config } = options;
  registerConfigSecrets(config);
  const logger = options.logger ?? createLogger({ level: config.logLevel });
  setIdentityDataDir(config.dataDir);
  // Before anything else: workers must not start running repository code without the
  // boundary they were configured with (util/sandbox.ts).
  configureSandbox({
    engine: config.sandbox.engine,
    network: config.sandbox.network,
    memoryMb: config.sandbox.memoryMb,
    maxProcs: config.sandbox.maxProcs,
    maxFileMb: config.sandbox.maxFileMb,
    diskLimitMb: config.sandbox.diskLimitMb,
    hiddenPaths: [config.dataDir],
  });
  // Per account and repository, under DATA_DIR: DATA_DIR_MIN_FREE_MB covers them too.
  configureSandboxCaches({
    root: path.join(config.dataDir, "sandbox-cache"),
    maxAgeDays: config.sandbox.cacheMaxAgeDays,
  });
  if (config.sandbox.engine === "none") {
    logger.warn(
      "SANDBOX=none: repository commands (verification, run_command, health-scan tests) run UNCONTAINED with this service's user, files and network. Only for repositories you fully trust; install bubblewrap and unset SANDBOX to contain them.",
    );
  }
  if (options.workers) {
    // Once at start: how the working copy is mounted and how the disk budget is kept.
    const report = await checkSandbox();
    logger.info(
      {
        workspace_mount: report.workspaceMount,
        disk_budget: report.diskBudget,
        data_dir_min_free_mb: config.dataDirMinFreeMb,
      },
      `sandbox ready: working copies at /workspace (${report.workspaceMount === "overlay" ? "overlay mount" : report.workspaceMount === "bind" ? "bind mount: its host path shows in the sandbox's /proc/self/mountinfo" : "SANDBOX=none: at their host paths"}); disk budget: ${report.diskBudget}`,
    );
  }
  const checkStorage = createStorageCheck(config.dataDir, config.dataDirMinFreeMb);
  const db = await connectDatabase(config, logger);
  if (config.metrics.enabled) enableMetrics(db.connection.db, config.metrics.dbReadEveryMs);

  const scheduler = await createScheduler({
    db: db.connection.db!,
    logger,
    // host, pid and DATA_DIR: see queue/identity.ts.
    name: processIdentity(),
    concurrency: config.pipeline.taskConcurrency,
    lockLifetimeMs: config.jobs.lockLifetimeMs,
  });
  const housekeeping = pruneOnceMarkers(db.models);
  scheduler.define(housekeeping);

  const probot = config.github
    ? createProbot(config.github, logger, { testing: options.testing ?? false })
    : undefined;
  const githubClient =
    probot && config.github ? createGithubClient(probot, config.github) : undefined;
  const events = new TaskEventLog(db.models);
  const modelClient = createModelClient(modelSettings(config));
  const pipeline = createPipeline({
    config,
    models: db.models,
    events,
    scheduler,
    logger,
    modelClient: () => requireModel(modelClient),
    buildIndex: (root) => buildIndex(root),
    github: githubClient,
    async cloneUrl(task) {
      if (task.repo.kind !== "github") return task.repo.clone_url;
      if (!githubClient || task.repo.installation_id == null)
        throw new StageError(
          "This repository belongs to a GitHub App installation, but the GitHub App is not configured on this worker (APP_ID, PRIVATE_KEY).",
        );
      return githubClient.cloneUrl(task.repo.installation_id, task.repo.clone_url);
    },
  });
  scheduler.define(pipeline.stageJob);
  const healthDeps = { config, models: db.models, logger, github: githubClient, scheduler };
  scheduler.define(createHealthScanJob(healthDeps));
  scheduler.define(createHealthSweepJob(healthDeps));
  const cronJobs = createCronJobs(scheduler.agenda);
  scheduler.define(cronJobKind({ tasks: pipeline.taskDeps, cron: cronJobs, logger }));
  if (probot && githubClient && config.github) {
    const githubDeps = {
      config,
      github: config.github,
      models: db.models,
      tasks: pipeline.taskDeps,
      client: githubClient,
      logger,
      scheduler,
      modelClient,
    };
    registerHandlers(probot, githubDeps);
    for (const job of githubJobs(githubDeps)) scheduler.define(job);
    pipeline.taskDeps.notifyThread = createThreadNotifier(db.models, scheduler);
    // Phase changes of GitHub tasks show on a check run (docs/api.md, "Progress on GitHub").
    if (config.github.progress)
      pipeline.taskDeps.reportProgress = createProgressReporter(db.models, scheduler, logger);
  }
  // The vendors (integrations/registry.ts): their endpoints, read from the config once.
  const integrationJobDeps: IntegrationJobDeps = {
    tasks: pipeline.taskDeps,
    logger,
    ...vendorSettings(config),
  };
  // Tasks asked for in Slack, Linear and Jira: created by a job the door queues.
  scheduler.define(taskRequestJob(integrationJobDeps));
  // Answered once the job is in the database: the scheduler groups the inserts of one turn
  // into one insertMany (db/insert-batcher.ts), well inside Slack's 3-second deadline.
  const requestTask: RequestTask = (request) =>
    scheduler.enqueue(TASK_REQUEST_JOB, request, {
      unique: { "data.task_id": request.task_id },
    });
  // Tasks from Slack (and the other integrations) report back where they were asked for.
  scheduler.define(integrationNoticeJob(integrationJobDeps));
  defineVendorJobs(integrationJobDeps, (kind) => scheduler.define(kind));
  const integrationDeps: IntegrationDeps = { ...integrationJobDeps, requestTask };
  const notifyGithub = pipeline.taskDeps.notifyThread;
  const notifyIntegration = createIntegrationNotifier(db.models, scheduler);
  pipeline.taskDeps.notifyThread = async (taskId, kind) => {
    // A merge is news only for tracker issues (their done state); GitHub shows it itself.
    if (kind !== "merged") await notifyGithub?.(taskId, kind);
    await notifyIntegration(taskId, kind);
  };
  const tierCache = new MarkerCache<Tier>(db.models, TIERS_MARKER, config.accountViewPollMs, (id) =>
    findTier(db.models, id),
  );
  const workspaceCache = new MarkerCache<WorkspaceRecord>(
    db.models,
    WORKSPACES_MARKER,
    config.accountViewPollMs,
    (id) => findWorkspace(db.models, id),
  );
  await tierCache.start();
  await workspaceCache.start();
  const integrationCache = await startIntegrationCache(db.models, config.accountViewPollMs);
  pipeline.taskDeps.insertTask = createInsertBatcher(newTaskCollection(db.models));
  pipeline.taskDeps.checkStorage = checkStorage;
  pipeline.taskDeps.cache = {
    tier: (id) => tierCache.get(id),
    workspace: (id) => workspaceCache.get(id),
  };
  let intake: Intake | undefined;
  let sweep: TaskSweep | undefined;
  let retakeTimer: NodeJS.Timeout | undefined;
  if (options.workers) {
    intake = createIntake({
      models: db.models,
      taskDeps: pipeline.taskDeps,
      enqueueStage: pipeline.enqueueStage,
      pollMs: config.pipeline.taskPollMs,
      logger,
    });
    pipeline.taskDeps.kick = () => intake?.kick();
    // After a crash: the dead predecessor's stages are retaken now, not after the lock
    // lifetime; checked again now and then for a sibling worker of this DATA_DIR that died.
    const retake = () =>
      retakeFromDeadPredecessors(db.connection.db!, config.jobs.lockLifetimeMs, logger);
    await retake();
    retakeTimer = setInterval(
      () =>
        void retake().catch((error: unknown) =>
          logger.warn({ err: error }, "looking for dead workers' locks failed"),
        ),
      RETAKE_CHECK_MS,
    );
    retakeTimer.unref();
    await scheduler.start();
    await scheduler.agenda.every("1 hour", housekeeping.name, {});
    await scheduler.agenda.every("1 minute", HEALTH_SWEEP_JOB, {});
    intake.start();
    // No running task without a job that will move it (pipeline/sweeper.ts).
    sweep = createTaskSweep({
      config,
      models: db.models,
      taskDeps: pipeline.taskDeps,
      resumeStage: pipeline.resumeStage,
      logger,
    });
    sweep.start();
    try {
      await reconcileCronJobs(db.models, db.connection.db!, cronJobs);
    } catch (error) {
      logger.error({ err: error }, "bringing cron automation jobs in step failed");
    }
  }

  // Both roles can serve their own metrics apart from the API (a worker has no other port).
  const metricsPort = config.metrics.port;
  const metricsServer =
    metricsPort === undefined
      ? undefined
      : await startMetricsServer({ ...config.metrics, port: metricsPort }, logger);
  if (metricsServer) logger.info({ url: metricsServer.url }, "metrics listening");

  // No App yet: registering one needs this token, printed below once the server listens.
  const setupToken = options.web && !config.github ? createSetupToken() : undefined;
  let http: RunningServer | undefined;
  let accountViews: AccountViewCache | undefined;
  let hub: TaskEventHub | undefined;
  let streams: ReturnType<typeof createTaskStreams> | undefined;
  let mcp: McpDoor | undefined;
  if (options.web) {
    const github =
      config.github && probot
        ? createGithubReceiver({
            probot,
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
    hub = new TaskEventHub(events, config.eventPollMs, logger);
    streams = createTaskStreams({
      models: db.models,
      events,
      hub,
      logger,
      bufferBudgetBytes: config.wsBufferBudgetBytes,
    });
    const healthScans = { enqueue: (id: string) => enqueueHealthScan(scheduler, id), checkStorage };
    // The fourth door (mcp/door.ts): the same domain calls as the REST routes, at /mcp.
    mcp = createMcpDoor({
      config,
      models: db.models,
      tasks: pipeline.taskDeps,
      events,
      hub,
      logger,
      githubClient,
      modelClient,
      healthScans,
    });
    try {
      await ensureRateLimitIndexes(db.connection);
      http = await startHttpServer({
        config,
        db,
        models: db.models,
        logger,
        limiters: createRateLimiters({
          signupMax: config.signupRateLimit.max,
          signupWindowMs: config.signupRateLimit.windowMs,
          webhookMax: config.automationWebhookRateLimit.max,
          webhookWindowMs: config.automationWebhookRateLimit.windowMs,
          connection: db.connection,
        }),
        github,
        vendorRoutes: vendorRoutes(integrationDeps),
        mountPages: setupToken
          ? (router) => mountManifestFlow(router, { config, logger, setupToken })
          : undefined,
        accountViews,
        tasks: pipeline.taskDeps,
        streams,
        githubClient,
        modelClient,
        cron: cronJobs,
        healthScans,
        mcp,
      });
    } catch (error) {
      await mcp.close();
      await metricsServer?.close();
      accountViews.stop();
      hub.stop();
      streams.close();
      intake?.stop();
      sweep?.stop();
      await scheduler.stop(0);
      await db.close();
      throw error;
    }
    logger.info({ url: http.url, workers: options.workers, github: Boolean(github) }, "listening");
    // The token is the operator's key to the registration page: it goes to the log, the
    // place only the operator reads (docs/operations.md, "Registering the GitHub App").
    if (setupToken) {
      const base = (config.manifest.publicUrl ?? http.url).replace(/\/+$/, "");
      logger.info(
        `GitHub App not configured: open ${base}${REGISTER_PATH}?token=${setupToken} to register it`,
      );
    }
  }

  let stopping: Promise<void> | undefined;
  return {
    config,
    logger,
    db,
    scheduler,
    http,
    metrics: metricsServer,
    pipeline,
    events,
    streams,
    mcp,
    stop() {
      stopping ??= (async () => {
        intake?.stop();
        sweep?.stop();
        clearInterval(retakeTimer);
        tierCache.stop();
        workspaceCache.stop();
        integrationCache.stop();
        await mcp?.close();
        await http?.close();
        await metricsServer?.close();
        streams?.close();
        hub?.stop();
        accountViews?.stop();
        await scheduler.stop(config.jobs.shutdownGraceMs);
        detachMetricsDatabase(db.connection.db);
        await db.close();
      })();
      return stopping;
    },
  };
}
