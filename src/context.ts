import path from "node:path";
import type { Probot } from "probot";
import type { Config } from "./config/env.js";
import { registerConfigSecrets } from "./config/env.js";
import { connectDatabase, type Database } from "./db/connection.js";
import type { Models, Tier } from "./db/models.js";
import { findTier } from "./domain/accounts/accounts.js";
import type { CronJobs } from "./domain/automations/automations.js";
import type { HealthScans } from "./domain/health/reports.js";
import type { VendorEndpoint, VendorInstalls } from "./domain/integrations/endpoint.js";
import { startIntegrationCache } from "./domain/integrations/store.js";
import { TIERS_MARKER } from "./domain/accounts/quota.js";
import { createStorageCheck, type StorageCheck } from "./domain/storage.js";
import { TaskEventLog } from "./domain/tasks/events.js";
import { noProgress, type TaskDeps, type ThreadNotice } from "./domain/tasks/model.js";
import { taskInserter } from "./domain/tasks/store.js";
import {
  findWorkspace,
  WORKSPACES_MARKER,
  type WorkspaceRecord,
} from "./domain/workspaces/workspaces.js";
import { MarkerCache } from "./durable/marker-cache.js";
import { createProbot } from "./github-api/app.js";
import { createGithubClient, noGithubClient, type GithubClient } from "./github-api/client.js";
import type { GithubHandlerDeps } from "./github/deps.js";
import { registerHandlers } from "./github/handlers.js";
import { githubJobs } from "./github/jobs.js";
import { createThreadNotifier } from "./github/notices.js";
import { createProgressReporter } from "./github/progress.js";
import { buildIndex } from "./indexer/index.js";
import type { IntegrationDeps, IntegrationJobDeps } from "./integrations/plugin.js";
import {
  defineVendorJobs,
  vendorInstalls,
  vendorRoutes,
  vendorSettings,
} from "./integrations/registry.js";
import { createIntegrationNotifier, integrationNoticeJob } from "./integrations/shared/notices.js";
import { TASK_REQUEST_JOB, type RequestTask } from "./integrations/shared/task-request.js";
import { taskRequestJob } from "./integrations/shared/task-requests.js";
import { createCronJobs, cronJobKind } from "./jobs/cron.js";
import {
  createHealthScanJob,
  createHealthSweepJob,
  enqueueHealthScan,
} from "./jobs/health-scan.js";
import { pruneOnceMarkers } from "./jobs/housekeeping.js";
import {
  createModelClient,
  requireModel,
  type ModelClient,
  type ModelSettings,
} from "./llm/provider.js";
import { enableMetrics } from "./metrics/index.js";
import { StageError } from "./pipeline/errors.js";
import { IntakeKicks, signalQueued } from "./pipeline/intake.js";
import { createPipeline, enqueueStage, workdirFor, type Pipeline } from "./pipeline/runner.js";
import { processIdentity, setIdentityDataDir } from "./queue/identity.js";
import { createScheduler, type JobKind, type Scheduler } from "./queue/scheduler.js";
import { createLogger, type Logger } from "./util/logger.js";
import { checkSandbox, configureSandbox } from "./sandbox/index.js";
import { configureSandboxCaches } from "./sandbox/cache.js";
import { configureWorkdirVolumes } from "./workcopy/volume.js";
import { serviceStatus, statusLine } from "./config/status.js";

/*
 * The service's one context (docs/architecture.md, "One context"; atproto's
 * packages/pds/src/context.ts): every part the roles, doors and jobs use, built once from the
 * configuration by `buildContext` and frozen. A room learns its dependencies from its
 * parameter list; nothing patches a part after this function returns. A part that is off is a
 * real implementation that refuses or has nothing to do (`noProgress`, a GitHub notifier
 * without an App).
 *
 * Adding a dependency: build it in `buildContext` from the config and the parts it needs (in
 * the order below: process, database, scheduler, task operations, pipeline, doors' deps),
 * add it to `ServiceContext`, and hand it on in the deps of the room that uses it
 * (`TaskDeps`, `GithubHandlerDeps`, `IntegrationDeps`, `HttpDeps` built in service.ts). Its
 * jobs are defined in `defineJobs`; anything it runs in the background is stopped in `close`.
 */

export interface ContextOptions {
  config: Config;
  /** This process runs the workers (the sandbox is checked before anything else). */
  workers: boolean;
  logger?: Logger | undefined;
  /** Tests: Probot without retries and throttling. */
  testing?: boolean | undefined;
}

/** The GitHub App's parts, when APP_ID and PRIVATE_KEY are configured. */
export interface GithubParts {
  readonly probot: Probot;
  readonly client: GithubClient;
  readonly deps: GithubHandlerDeps;
}

export interface ServiceContext {
  readonly config: Config;
  readonly logger: Logger;
  readonly db: Database;
  readonly models: Models;
  readonly scheduler: Scheduler;
  readonly events: TaskEventLog;
  /** The configured model, or the "missing" client that explains what to set. */
  readonly modelClient: ModelClient;
  /** Undefined when the GitHub App is not configured (APP_ID, PRIVATE_KEY). */
  readonly github: GithubParts | undefined;
  /** The App's installation clients; `noGithubClient` (refusing) when it is not configured. */
  readonly githubClient: GithubClient;
  /** The task operations every door and the pipeline share (frozen). */
  readonly tasks: TaskDeps;
  /** What `tasks.kick` rings: the worker role's intake listens (pipeline/intake.ts). */
  readonly kicks: IntakeKicks;
  readonly pipeline: Pipeline;
  /** Arms and disarms the Agenda jobs of cron automations. */
  readonly cron: CronJobs;
  readonly healthScans: HealthScans;
  /** What the vendors' handlers get (integrations/plugin.ts). */
  readonly integrations: IntegrationDeps;
  /** The vendors' signed endpoints, bound to `integrations` (integrations/registry.ts). */
  readonly vendorRoutes: readonly VendorEndpoint[];
  /** The vendors' OAuth install flows (integrations/registry.ts). */
  readonly vendorInstalls: VendorInstalls;
  /** The hourly pruning job the worker role schedules. */
  readonly housekeeping: JobKind<Record<string, never>>;
  readonly checkStorage: StorageCheck;
  /** Stops the context's caches; the roles stop their own parts, the database is last. */
  close(): void;
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

/** Process-wide settings from the config, before any part exists. */
async function configureProcess(options: ContextOptions, logger: Logger): Promise<void> {
  const { config } = options;
  registerConfigSecrets(config);
  setIdentityDataDir(config.dataDir);
  // Before anything else: workers must not start running repository code without the
  // boundary they were configured with (sandbox/run.ts).
  configureSandbox({
    engine: config.sandbox.engine,
    network: config.sandbox.network,
    memoryMb: config.sandbox.memoryMb,
    maxProcs: config.sandbox.maxProcs,
    maxFileMb: config.sandbox.maxFileMb,
    diskLimitMb: config.sandbox.diskLimitMb,
    heartbeatMs: config.sandbox.heartbeatMs,
    hiddenPaths: [config.dataDir],
    setupAddresses: {
      allowRanges: config.sandbox.setupAllowAddresses,
      ownPorts: [config.port, config.metrics.port ?? config.port],
    },
  });
  configureWorkdirVolumes(config.sandbox.diskVolumes);
  // Per account and repository, under DATA_DIR: DATA_DIR_MIN_FREE_MB covers them too.
  configureSandboxCaches({
    root: path.join(config.dataDir, "sandbox-cache"),
    maxAgeDays: config.sandbox.cacheMaxAgeDays,
    maxMb: config.sandbox.cacheMaxMb,
  });
  if (config.sandbox.engine === "none") {
    logger.warn(
      "SANDBOX=none: repository commands (verification, run_command, health-scan tests) run UNCONTAINED with this service's user, files and network. Only for repositories you fully trust; install bubblewrap and unset SANDBOX to contain them.",
    );
  }
  if (options.workers) {
    // Once at start: how the working copy is mounted and how the disk budget is kept.
    const report = await checkSandbox({ setupProxy: config.sandbox.setupAllow.length > 0 });
    logger.info(
      {
        workspace_mount: report.workspaceMount,
        disk_budget: report.diskBudget,
        data_dir_min_free_mb: config.dataDirMinFreeMb,
      },
      // The disk budget's mechanism is a paragraph: a field, off the message line.
      `sandbox ready: working copies at /workspace (${report.workspaceMount === "overlay" ? "overlay mount" : report.workspaceMount === "bind" ? "bind mount: its host path shows in the sandbox's /proc/self/mountinfo" : "SANDBOX=none: at their host paths"})`,
    );
  }
}

/** Builds the service's context from the configuration: every part, once, then frozen. */
export async function buildContext(options: ContextOptions): Promise<ServiceContext> {
  const { config } = options;
  const logger = options.logger ?? createLogger({ level: config.logLevel });
  await configureProcess(options, logger);
  const checkStorage = createStorageCheck(config.dataDir, config.dataDirMinFreeMb);
  const db = await connectDatabase(config, logger);
  const models = db.models;
  if (config.metrics.enabled) enableMetrics(db.connection.db, config.metrics.dbReadEveryMs);

  const scheduler = await createScheduler({
    db: db.connection.db!,
    logger,
    // host, pid and DATA_DIR: see queue/identity.ts.
    name: processIdentity(),
    concurrency: config.pipeline.taskConcurrency,
    lockLifetimeMs: config.jobs.lockLifetimeMs,
  });
  const { probot, githubClient } = githubApp(options, logger);
  const events = new TaskEventLog(models);
  const modelClient = createModelClient(modelSettings(config));
  logStatus(config, modelClient, logger);
  const caches = await startReadCaches(config, models);
  const kicks = new IntakeKicks();
  const parts = { config, logger, models, scheduler, events, githubClient };
  const tasks = taskDeps({ ...parts, caches, kicks, checkStorage });
  const pipeline = pipelineOf({ ...parts, tasks, modelClient });
  const github = githubParts({ ...parts, probot, tasks, modelClient });
  const integrations = integrationDeps(config, logger, scheduler, tasks);

  const context: ServiceContext = Object.freeze({
    config,
    logger,
    db,
    models,
    scheduler,
    events,
    modelClient,
    github,
    githubClient,
    tasks,
    kicks,
    pipeline,
    cron: createCronJobs(scheduler.agenda),
    healthScans: Object.freeze({
      enqueue: (id: string) => enqueueHealthScan(scheduler, id),
      checkStorage,
    }),
    integrations,
    vendorRoutes: Object.freeze(vendorRoutes(integrations)),
    vendorInstalls: Object.freeze(vendorInstalls()),
    housekeeping: pruneOnceMarkers(models, config.trajectoryRetentionDays),
    checkStorage,
    close() {
      caches.tier.stop();
      caches.workspace.stop();
      caches.integration.stop();
    },
  });
  defineJobs(context);
  return context;
}

/** The parts most builders below take. */
interface CoreParts {
  config: Config;
  logger: Logger;
  models: Models;
  scheduler: Scheduler;
  events: TaskEventLog;
  githubClient: GithubClient;
}

/** The GitHub App's Probot and installation clients; refusing ones when it is not configured. */
function githubApp(
  options: ContextOptions,
  logger: Logger,
): { probot: Probot | undefined; githubClient: GithubClient } {
  const { config } = options;
  const probot = config.github
    ? createProbot(config.github, logger, { testing: options.testing ?? false })
    : undefined;
  const githubClient =
    probot && config.github ? createGithubClient(probot, config.github) : noGithubClient;
  return { probot, githubClient };
}

/** What is configured and what is missing, with the variable to set (GET /status too). */
function logStatus(config: Config, modelClient: ModelClient, logger: Logger): void {
  const status = serviceStatus(config, {
    configured: modelClient.configured,
    provider: modelClient.configured ? modelClient.provider : undefined,
    modelId: modelClient.configured ? modelClient.modelId : undefined,
  });
  // The summary alone (GET /status gives the whole object): one short line at start.
  logger.info(statusLine(status));
  for (const { setting, why } of status.missing) logger.warn({ setting }, `set ${setting}: ${why}`);
}

/** The rarely changing reads of task creation, cached per process (durable/marker-cache.ts). */
async function startReadCaches(config: Config, models: Models) {
  const tier = new MarkerCache<Tier>(models, TIERS_MARKER, config.accountViewPollMs, (id) =>
    findTier(models, id),
  );
  const workspace = new MarkerCache<WorkspaceRecord>(
    models,
    WORKSPACES_MARKER,
    config.accountViewPollMs,
    (id) => findWorkspace(models, id),
  );
  await tier.start();
  await workspace.start();
  const integration = await startIntegrationCache(models, config.accountViewPollMs);
  return { tier, workspace, integration };
}

/**
 * The place a task reports to: its GitHub thread (when the App is configured) and the chat
 * thread or tracker issue it was asked from (integrations/shared/notices.ts).
 */
function threadNotifier(
  models: Models,
  scheduler: Scheduler,
  githubClient: GithubClient,
): TaskDeps["notifyThread"] {
  const notifyGithub = githubClient.configured
    ? createThreadNotifier(models, scheduler)
    : undefined;
  const notifyIntegration = createIntegrationNotifier(models, scheduler);
  return async function notifyThread(taskId: string, kind: ThreadNotice): Promise<void> {
    // A merge is news only for tracker issues (their done state); GitHub shows it itself.
    if (notifyGithub && kind !== "merged") await notifyGithub(taskId, kind);
    await notifyIntegration(taskId, kind);
  };
}

/** The task operations every door and the pipeline share. */
function taskDeps(
  parts: CoreParts & {
    caches: Awaited<ReturnType<typeof startReadCaches>>;
    kicks: IntakeKicks;
    checkStorage: StorageCheck;
  },
): TaskDeps {
  const { config, logger, models, scheduler, events, githubClient, caches, kicks } = parts;
  const notifyThread = threadNotifier(models, scheduler, githubClient);
  return Object.freeze({
    models,
    events,
    enqueueStage: (taskId, stage, round) => enqueueStage(scheduler, taskId, stage, round),
    maxRevisions: config.pipeline.maxRevisions,
    kick: kicks.kick,
    signalQueued: () => signalQueued(models),
    insertTask: taskInserter(models),
    cache: Object.freeze({
      tier: (id: string) => caches.tier.get(id),
      workspace: (id: string) => caches.workspace.get(id),
    }),
    workdirOf: (taskId) => workdirFor(config, taskId),
    checkStorage: parts.checkStorage,
    notifyThread,
    // Phase changes of GitHub tasks show on a check run (docs/api.md, "Progress on GitHub").
    reportProgress:
      githubClient.configured && config.github?.progress
        ? createProgressReporter(models, scheduler, logger)
        : noProgress,
  } satisfies TaskDeps);
}

/** The stages and their job, over the task operations. */
function pipelineOf(parts: CoreParts & { tasks: TaskDeps; modelClient: ModelClient }): Pipeline {
  const { config, models, events, scheduler, tasks, logger, modelClient, githubClient } = parts;
  return createPipeline({
    config,
    models,
    events,
    scheduler,
    tasks,
    logger,
    modelClient: () => requireModel(modelClient),
    buildIndex: (root) => buildIndex(root),
    github: githubClient,
    async cloneUrl(task) {
      if (task.repo.kind !== "github") return task.repo.clone_url;
      if (!githubClient.configured || task.repo.installation_id == null)
        throw new StageError(
          "This repository belongs to a GitHub App installation, but the GitHub App is not configured on this worker (APP_ID, PRIVATE_KEY).",
        );
      return githubClient.cloneUrl(task.repo.installation_id, task.repo.clone_url);
    },
  });
}

/** The GitHub door's parts; undefined when the App is not configured. */
function githubParts(
  parts: CoreParts & { probot: Probot | undefined; tasks: TaskDeps; modelClient: ModelClient },
): GithubParts | undefined {
  const { config, probot, githubClient, models, tasks, logger, scheduler, modelClient } = parts;
  if (!probot || !config.github) return undefined;
  return Object.freeze({
    probot,
    client: githubClient,
    deps: Object.freeze({
      config,
      github: config.github,
      models,
      tasks,
      client: githubClient,
      logger,
      scheduler,
      modelClient,
    }),
  });
}

/**
 * The vendors (integrations/registry.ts): their settings, read from the config once by each
 * plugin. Tasks asked for in Slack, Linear and Jira are created by a job the door queues,
 * answered once the job is in the database: the scheduler groups the inserts of one turn into
 * one insertMany (db/insert-batcher.ts), well inside Slack's 3-second deadline.
 */
function integrationDeps(
  config: Config,
  logger: Logger,
  scheduler: Scheduler,
  tasks: TaskDeps,
): IntegrationDeps {
  const requestTask: RequestTask = (request) =>
    scheduler.enqueue(TASK_REQUEST_JOB, request, {
      unique: { "data.task_id": request.task_id },
    });
  return Object.freeze({
    tasks,
    logger,
    vendors: vendorSettings(config),
    requestTask,
  });
}

/** Every job kind of the service, defined on the context's scheduler (workers run them). */
function defineJobs(context: ServiceContext): void {
  const { config, models, scheduler, logger, tasks, github, githubClient } = context;
  const define = <D>(kind: JobKind<D>) => scheduler.define(kind);
  define(context.housekeeping);
  define(context.pipeline.stageJob);
  const healthDeps = { config, models, logger, github: githubClient, scheduler };
  define(createHealthScanJob(healthDeps));
  define(createHealthSweepJob(healthDeps));
  define(cronJobKind({ tasks, cron: context.cron, logger }));
  if (github) {
    registerHandlers(github.probot, github.deps);
    for (const job of githubJobs(github.deps)) define(job);
  }
  const integrationJobDeps: IntegrationJobDeps = context.integrations;
  // Tasks asked for in Slack, Linear and Jira; their notices back where they were asked.
  define(taskRequestJob(integrationJobDeps));
  define(integrationNoticeJob(integrationJobDeps));
  defineVendorJobs(integrationJobDeps, define);
}
