/*
 * POST /tasks against a bare Koa handler that parses a JSON body and inserts one small
 * document on the same database.
 *
 * One embedded database, the real service in-process without workers (tasks stay queued),
 * and a bare Koa app in the same process on its own connection to the same database. As in
 * keys-me, the subjects are warmed up, then measured in alternating rounds, and the median of
 * the rounds is reported. The account is moved to the pro tier in the database first, so the
 * free tier's monthly limit never answers 429 under load.
 *
 * BENCH_TASKS_CREATE_PROFILE=1 adds bare handlers that do part of what POST /tasks does,
 * through the service's own domain functions on the bare connection:
 *   auth + workspace + insert      authenticateKey, resolveRepo, one insert (no quota claim)
 *   auth + insert                  authenticateKey and one insert: the least database work
 *                                  the route can do, so the ceiling of its ratio
 *   auth + createTask              authenticateKey and createTask without the service's
 *                                  per-process caches (tier and workspace read every time)
 * and counts the quota-slot inserts each created task cost (claims racing for one slot).
 */
import Koa from "koa";
import os from "node:os";
import getRawBody from "raw-body";
import { registerModels, type Models } from "../src/db/models.js";
import { accountChanged } from "../src/domain/accounts/views.js";
import { authenticateKey } from "../src/domain/accounts/keys.js";
import { findTier } from "../src/domain/accounts/accounts.js";
import { createTask } from "../src/domain/tasks/create.js";
import { noProgress, type TaskDeps } from "../src/domain/tasks/model.js";
import { insertTasks } from "../src/domain/tasks/store.js";
import { findWorkspace, resolveRepo } from "../src/domain/workspaces/workspaces.js";
import { type Service } from "../src/service.js";
import { newId } from "../src/util/ids.js";
import {
  activeCleanups,
  BenchError,
  alternatingRounds,
  Cleanup,
  throughputRatio,
  type Benchmark,
  type BenchReport,
  type BenchSettings,
  type LoadSample,
  type LoadSubject,
} from "./lib/harness.js";
import { placeholderRepo } from "../test/helpers/git-repo.js";
import { serveBare, type BareServer } from "./lib/bare-server.js";
import { openBareConnection, startBenchStack } from "./lib/stack.js";

/** The service must reach at least this share of the bare handler's throughput. */
export const TARGET_RATIO = 0.6;

const DATABASE = "bench_tasks";

interface TaskBody {
  workspace_id: string;
  repo_id: string;
  description: string;
}

type BareWork = (body: TaskBody, key: string) => Promise<Record<string, unknown>>;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A bare Koa app answering 201 with what `work` returns for the parsed JSON body. */
function startBareServer(work: BareWork): Promise<BareServer> {
  const app = new Koa();
  app.use(async (ctx) => {
    const raw = await getRawBody(ctx.req, {
      limit: 1024 * 1024,
      length: ctx.request.length,
      encoding: "utf8",
    });
    ctx.body = await work(JSON.parse(raw) as TaskBody, ctx.get("x-api-key"));
    ctx.status = 201;
  });
  return serveBare(app.callback(), "/tasks");
}

/** The baseline: one small document per request, no lookup. */
function insertOnly(models: Models): BareWork {
  const collection = models.Task.db.collection("bench_bare_tasks");
  return async (body) => {
    const doc = {
      _id: newId("task"),
      workspace_id: body.workspace_id,
      repo_id: body.repo_id,
      description: body.description,
      status: "queued",
      created_at: new Date(),
    };
    await collection.insertOne(doc as never);
    return { id: doc._id, status: doc.status };
  };
}

/** Key and repository checked as POST /tasks does them, then the same insert: no quota. */
function authWorkspaceInsert(models: Models): BareWork {
  const insert = insertOnly(models);
  return async (body, key) => {
    const principal = await authenticateKey(models, key);
    if (!principal) throw new BenchError("bare handler: key not found");
    await resolveRepo(models, principal.accountId, body.workspace_id, body.repo_id);
    return insert(body, key);
  };
}

/**
 * The least database work POST /tasks can do: authenticate the key (one lookup: revocation
 * takes effect at once, so it is never cached) and insert the task. Its ratio to the bare
 * insert is the ceiling for the service's.
 */
function authInsert(models: Models): BareWork {
  const insert = insertOnly(models);
  return async (body, key) => {
    const principal = await authenticateKey(models, key);
    if (!principal) throw new BenchError("bare handler: key not found");
    return insert(body, key);
  };
}

/** The service's domain work for POST /tasks, minus routing, validation and the response. */
function authCreateTask(models: Models): BareWork {
  // No batching, no caches, nothing to notify: each read and the insert done directly.
  const deps: TaskDeps = {
    models,
    events: undefined as never,
    enqueueStage: () => Promise.resolve(),
    maxRevisions: 5,
    kick: () => undefined,
    signalQueued: () => undefined,
    insertTask: async (doc) => {
      await insertTasks(models, [doc]);
    },
    cache: {
      tier: (id) => findTier(models, id),
      workspace: (id) => findWorkspace(models, id),
    },
    workdirOf: () => {
      throw new BenchError("bare handler: tasks created here have no working copy");
    },
    checkStorage: () => Promise.resolve(),
    notifyThread: () => Promise.resolve(),
    reportProgress: noProgress,
  };
  return async (body, key) => {
    const principal = await authenticateKey(models, key);
    if (!principal) throw new BenchError("bare handler: key not found");
    const task = await createTask(deps, principal.accountId, body);
    return { id: task._id, status: task.status };
  };
}

/**
 * Counts QuotaSlot.create calls and their duplicate-key failures on one set of models: each
 * failure is a claim that lost the race for a slot number and tried the next one.
 */
function countSlotInserts(models: Models): { attempts: number; duplicates: number } {
  const counts = { attempts: 0, duplicates: 0 };
  const model = models.QuotaSlot as unknown as { create: (...args: unknown[]) => Promise<unknown> };
  const original = model.create.bind(model);
  model.create = async (...args: unknown[]) => {
    counts.attempts += 1;
    try {
      return await original(...args);
    } catch (error) {
      if ((error as { code?: unknown }).code === 11000) counts.duplicates += 1;
      throw error;
    }
  };
  return counts;
}

export async function call(
  url: string,
  init: { method: "GET" | "POST"; key?: string; body?: unknown },
  expect: number,
): Promise<Record<string, unknown>> {
  const res = await fetch(url, {
    method: init.method,
    headers: {
      "content-type": "application/json",
      ...(init.key ? { "x-api-key": init.key } : {}),
    },
    ...(init.body !== undefined ? { body: JSON.stringify(init.body) } : {}),
  });
  const text = await res.text();
  if (res.status !== expect)
    throw new BenchError(`${init.method} ${url} answered ${res.status}: ${text}`);
  return JSON.parse(text) as Record<string, unknown>;
}

/** A pro account with one key and one plain-git workspace, made through the API. */
export async function setUpAccount(
  service: Service,
): Promise<{ key: string; accountId: string; body: TaskBody }> {
  const url = service.http!.url;
  const created = await call(
    `${url}/keys/generate`,
    { method: "POST", body: { name: "bench" } },
    201,
  );
  const key = String(created.key);
  const principal = await authenticateKey(service.db.models, key);
  if (!principal) throw new BenchError("the generated key does not authenticate");
  const accountId = principal.accountId;
  // Tiers are never set over HTTP (the operator CLI does it); the same write, then the same
  // cache invalidation the CLI triggers.
  await service.db.models.Account.updateOne({ _id: accountId }, { $set: { tier: "pro" } });
  await accountChanged(service.db.models, accountId);
  const me = await call(`${url}/keys/me`, { method: "GET", key }, 200);
  if (me.tier !== "pro") throw new BenchError(`account tier is ${String(me.tier)}, not pro`);

  const workspace = await call(
    `${url}/workspaces`,
    {
      method: "POST",
      key,
      body: { name: "bench", repos: [{ name: "acme/app", clone_url: await placeholderRepo() }] },
    },
    201,
  );
  const repos = workspace.repos as Array<{ id: string }> | undefined;
  const repoId = repos?.[0]?.id;
  if (typeof workspace.id !== "string" || !repoId)
    throw new BenchError(`POST /workspaces answered ${JSON.stringify(workspace)}`);
  return {
    key,
    accountId,
    body: {
      workspace_id: workspace.id,
      repo_id: repoId,
      description: "Add a health check endpoint that reports the database status.",
    },
  };
}

export const tasksCreate: Benchmark = {
  name: "tasks-create",
  description: "POST /tasks vs a bare Koa handler parsing JSON and inserting one document",
  async run(settings: BenchSettings): Promise<BenchReport> {
    const profile = ["1", "true", "yes"].includes(
      (process.env.BENCH_TASKS_CREATE_PROFILE ?? "").toLowerCase(),
    );
    const cleanup = new Cleanup();
    activeCleanups.add(cleanup);
    try {
      const { uri, service, engine } = await startBenchStack(cleanup, DATABASE);
      const serviceUrl = `${service.http!.url}/tasks`;
      const { key, body } = await setUpAccount(service);

      // The bare side: its own connection (same pool size as the service) to the same database.
      const connection = await openBareConnection(cleanup, uri, 50);
      const bareModels = registerModels(connection);

      const variants: Array<{ name: string; work: BareWork }> = [
        { name: "bare koa, 1 insert", work: insertOnly(bareModels) },
      ];
      if (profile) {
        variants.push(
          { name: "bare koa, auth + workspace + insert", work: authWorkspaceInsert(bareModels) },
          { name: "bare koa, auth + insert", work: authInsert(bareModels) },
          { name: "bare koa, auth + createTask", work: authCreateTask(bareModels) },
        );
      }
      const subjects: LoadSubject[] = [];
      for (const variant of variants) {
        const bare = await startBareServer(variant.work);
        cleanup.defer(`close ${variant.name}`, () => bare.close());
        subjects.push({ name: variant.name, url: bare.url, idle: bare.idle });
      }
      // The service's in-flight requests cannot be counted from outside: give them a moment.
      subjects.splice(1, 0, {
        name: "service POST /tasks",
        url: serviceUrl,
        idle: () => sleep(250),
      });

      const slotCounts = profile
        ? {
            service: countSlotInserts(service.db.models),
            bare: countSlotInserts(bareModels),
          }
        : undefined;

      for (const subject of subjects) {
        const answer = await call(subject.url, { method: "POST", key, body }, 201);
        console.log(`  ${subject.name}: ${JSON.stringify(answer).slice(0, 100)}`);
      }

      const slotRates = new Map<string, number[]>();
      // With profiling, how many quota-slot inserts each task took, per round.
      const countSlots = (subject: LoadSubject) => {
        const counter = subject.name.startsWith("service")
          ? slotCounts?.service
          : subject.name.endsWith("createTask")
            ? slotCounts?.bare
            : undefined;
        if (!counter) return undefined;
        const before = counter.attempts;
        return (sample: LoadSample) => {
          const perTask = (counter.attempts - before) / sample.completed;
          slotRates.set(subject.name, [...(slotRates.get(subject.name) ?? []), perTask]);
          return `, ${perTask.toFixed(1)} slot inserts/task`;
        };
      };
      const summaries = await alternatingRounds(
        settings,
        subjects,
        {
          method: "POST",
          body: JSON.stringify(body),
          headers: { "content-type": "application/json", "x-api-key": key },
          expectStatus: 201,
        },
        countSlots,
      );
      const { check, pairRatios } = throughputRatio(summaries[0]!, summaries[1]!, TARGET_RATIO);
      return {
        subjects: summaries,
        checks: [check],
        info: {
          engine,
          connections: settings.connections,
          durationS: settings.durationS,
          warmupS: settings.warmupS,
          rounds: settings.rounds,
          profile,
          pairRatios,
          ...(slotCounts
            ? { quotaSlotInsertsPerTask: Object.fromEntries(slotRates), quotaSlots: slotCounts }
            : {}),
          cpus: os.availableParallelism(),
          node: process.version,
        },
      };
    } finally {
      await cleanup.run();
      activeCleanups.delete(cleanup);
    }
  },
};
