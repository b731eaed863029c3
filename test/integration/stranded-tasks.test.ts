import { execFile, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { chmod, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from "vitest";
import { withDatabaseName } from "../../src/db/connection.js";
import type { Models } from "../../src/db/models.js";
import { stageLease } from "../../src/durable/lease.js";
import { agentModel, greetScript, roleOf } from "../helpers/agent-model.js";
import { startDbProxy, type DbProxy } from "../helpers/db-proxy.js";
import { fakeModelEnv, startFakeModel, type FakeModel } from "../helpers/fake-model.js";
import { createGitRepo, type GitFixture } from "../helpers/git-repo.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { spawnWorker, WORKER_MAIN } from "../helpers/worker.js";

/*
 * Issue #26 item 7: no task stays `running` without work that will move it. One web process
 * (this one) and worker processes, each with a DATA_DIR of its own, on one database. A worker
 * is stopped at an exact point of a stage by a proxy between it and the database
 * (helpers/db-proxy.ts) and killed with SIGKILL there; the other workers must finish every
 * task exactly once, within JOB_LOCK_LIFETIME_S + TASK_SWEEP_INTERVAL_S of the kill.
 */

const root = path.resolve(import.meta.dirname, "../..");
const children: ChildProcess[] = [];
const proxies: DbProxy[] = [];
const dirs: string[] = [];
let repo: GitFixture;
let pushLog: string;
let model: FakeModel;
let api: TestServer;
let models: Models;
let dbName: string;
let directUri: string;
/** Planning requests still to leave unanswered (the worker making them is killed). */
let hangPlans = 0;

beforeAll(async () => {
  if (!existsSync(WORKER_MAIN))
    await promisify(execFile)("npx", ["tsc", "-p", "tsconfig.build.json"], { cwd: root });
  repo = await createGitRepo({ "src/app.js": "export const answer = 42;\n" });
  // The remote records every push it receives: a task's branch must be pushed once.
  pushLog = path.join(repo.dir, "..", `${path.basename(repo.dir)}-pushes.log`);
  const hook = path.join(repo.dir, ".git", "hooks", "post-receive");
  await writeFile(hook, `#!/bin/sh\ncat >> '${pushLog}'\n`);
  await chmod(hook, 0o755);
  const reply = agentModel(greetScript);
  model = await startFakeModel((request) => {
    if (roleOf(request) === "plan" && hangPlans > 0) {
      hangPlans -= 1;
      return { hang: true };
    }
    return reply(request);
  });
  dbName = `stranded_${randomBytes(4).toString("hex")}`;
  directUri = withDatabaseName(inject("mongoUri"), dbName);
  api = await startTestServer({
    workers: false,
    env: { MONGODB_URI: directUri, EVENT_POLL_MS: "50" },
  });
  models = api.service.db.models;
}, 180_000);

afterAll(async () => {
  for (const child of children) if (child.exitCode === null) child.kill("SIGKILL");
  await api?.stop();
  await model?.close();
  await repo?.remove();
  await rm(pushLog, { force: true });
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

// Each test starts its own workers (none may take the next test's tasks) and account (its
// tier's task quota is for one test).
afterEach(async () => {
  account = undefined;
  for (const child of children) if (child.exitCode === null) child.kill("SIGKILL");
  for (const proxy of proxies.splice(0)) await proxy.close();
});

interface Worker {
  child: ChildProcess;
  proxy: DbProxy | undefined;
}

/** A worker process with a DATA_DIR of its own; through a proxy when `proxied`. */
async function startWorker(
  env: Record<string, string>,
  options: { proxied?: boolean } = {},
): Promise<Worker> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), "foreman-stranded-"));
  dirs.push(dataDir);
  const proxy = options.proxied ? await startDbProxy(inject("mongoUri")) : undefined;
  if (proxy) proxies.push(proxy);
  const child = spawnWorker({
    MONGODB_URI: proxy ? proxy.uri(dbName) : directUri,
    DATA_DIR: dataDir,
    ...fakeModelEnv(model, "sk-stranded-key-0a1b2c3d4e5f6a7b8c9d"),
    ...env,
  });
  children.push(child);
  return { child, proxy };
}

async function kill(worker: Worker): Promise<void> {
  if (worker.child.exitCode === null) {
    const exited = new Promise((r) => worker.child.once("exit", r));
    worker.child.kill("SIGKILL");
    await exited;
  }
  await worker.proxy?.close();
}

async function until<T>(
  check: () => Promise<T | undefined | false | null>,
  timeoutMs: number,
  what: string,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

let account: { key: string; workspace: string } | undefined;

/** A queued task (auto_approve) on the fixture repository. */
async function queueTask(description: string): Promise<string> {
  if (!account) {
    const { key } = await api.signup();
    const ws = await api.api("POST", "/workspaces", {
      key,
      body: { name: "w", repos: [{ name: "acme/app", clone_url: repo.dir }] },
    });
    account = { key, workspace: ws.body.id as string };
  }
  const created = await api.api("POST", "/tasks", {
    key: account.key,
    body: {
      workspace_id: account.workspace,
      repo_id: "acme/app",
      description,
      auto_approve: true,
    },
  });
  expect(created.status).toBe(201);
  return created.body.id as string;
}

async function task(id: string): Promise<Record<string, unknown>> {
  return (await api.api("GET", `/tasks/${id}`, { key: account!.key })).body;
}

async function ended(id: string, timeoutMs: number): Promise<Record<string, unknown>> {
  // The ending is written in steps (status, working copy removed, then the done or error
  // event): the task has ended when its terminal event is stored too.
  return until(
    async () => {
      const found = await task(id);
      if (!["completed", "failed", "cancelled"].includes(String(found.status))) return false;
      const terminal = await models.TaskEvent.collection.findOne({
        task_id: id,
        type: { $in: ["done", "error"] },
      });
      return terminal !== null && found;
    },
    timeoutMs,
    `task ${id} to end`,
  );
}

/** The task's stored events, in order. */
async function events(id: string): Promise<Array<Record<string, unknown>>> {
  return (await models.TaskEvent.collection
    .find({ task_id: id })
    .sort({ seq: 1 })
    .toArray()) as Array<Record<string, unknown>>;
}

/** The stage jobs of a task, as stored. */
async function stageJobs(id: string): Promise<Array<Record<string, unknown>>> {
  return (await models.Once.db
    .collection("jobs")
    .find({ name: "pipeline.stage", "data.task_id": id })
    .toArray()) as Array<Record<string, unknown>>;
}

async function leaseExists(id: string, stage: string, attempt: number): Promise<boolean> {
  return Boolean(
    await models.Once.collection.findOne({
      _id: stageLease(id, stage, attempt).id as never,
    }),
  );
}

describe("a stage job that finds the live lease of a worker that died", () => {
  it("queues itself for the lease's expiry, and the task completes with nothing else looking at it", async () => {
    const id = await queueTask("Add a greeting helper");
    // The finding: a worker's job lock expired while its stage lease still looked live (the
    // lock was taken first, or its refresh was late), another worker ran the job, found the
    // lease busy and left it; the holder died and nothing looked at the task again. Here the
    // victim's lock refreshes are dropped by the proxy once it holds the PLANNING lease (its
    // model call hangs, its lease heartbeat goes on), so the survivor takes the job over
    // while the lease is live; then the victim is killed.
    const env = { JOB_LOCK_LIFETIME_S: "6", TASK_SWEEP_INTERVAL_S: "3600" };
    hangPlans = 1;
    const victim = await startWorker(env, { proxied: true });
    await victim.proxy!.rule({ match: [stageLease(id, "plan", 0).id], action: "pass" });
    // Agenda's job state writes (its lock refreshes among them), not the lease heartbeats.
    void victim.proxy!.rule({ match: ["lockedAt", "failReason"], action: "drop" });
    await startWorker(env);
    const busy = await until(
      async () =>
        (await stageJobs(id)).find((job) =>
          String((job.data as { resume?: string }).resume).startsWith("after-lease:0:"),
        ),
      60_000,
      "the survivor to find the lease busy",
    );
    await kill(victim);
    const due = (busy.nextRunAt as Date).getTime();

    const done = await ended(id, 60_000);
    expect(done).toMatchObject({ status: "completed", phase: "DONE", error: null });
    // The queued run took the stage over once the lease had expired: the next attempt.
    expect(await leaseExists(id, "plan", 1)).toBe(true);
    const log = await events(id);
    const resumed = log.find((e) =>
      /^Resuming PLANNING \(attempt 2\)/.test(String((e.payload as { message?: string }).message)),
    );
    expect((resumed!.ts as Date).getTime()).toBeGreaterThanOrEqual(due);
    // Nothing else looked at the task: no sweep ran.
    expect(await models.Once.collection.countDocuments({ scope: "task-sweep" })).toBe(0);
    expect(log.filter((e) => e.type === "done" || e.type === "error")).toHaveLength(1);
    for (const child of children) if (child.exitCode === null) child.kill("SIGKILL");
  }, 120_000);
});

/** Bound of docs/operations.md, with the settings below: JOB_LOCK_LIFETIME_S + TASK_SWEEP_INTERVAL_S. */
const BOUND_MS = (2 + 2) * 1000;
/** What a loaded test machine adds to it: worker polls, process start, two CPUs shared. */
const SLACK_MS = 8000;

/** What the proxy matches to stop a worker in each stage: the stage's first write. */
const STAGES: Array<[string, (id: string) => string[]]> = [
  ["CLONING", (id) => [id, "CLONING"]],
  ["INDEXING", (id) => [id, "INDEXING"]],
  ["PLANNING", (id) => [id, "PLANNING"]],
  ["IMPLEMENTING", (id) => [id, "IMPLEMENTING"]],
  ["VERIFYING", (id) => [id, "VERIFYING"]],
  ["REVIEWING", (id) => [id, "REVIEWING"]],
  // Publishing keeps REVIEWING: stopped as it takes its lease, before it pushes.
  ["publishing", (id) => [stageLease(id, "publish", 0).id]],
  ["CLEANUP", (id) => [id, "CLEANUP"]],
];

describe("workers killed in every stage", () => {
  it("finish every task exactly once, each resumed within JOB_LOCK_LIFETIME_S + TASK_SWEEP_INTERVAL_S", async () => {
    const env = { JOB_LOCK_LIFETIME_S: "2", TASK_SWEEP_INTERVAL_S: "2" };
    const killed: Array<{ stage: string; id: string; at: number }> = [];
    // Three workers at a time, each through a proxy. Each round's task is stopped in the
    // round's stage on whichever worker runs that stage; that worker is killed and replaced,
    // the others finish the task. A worker is ready once it has swept (its sweep timer runs
    // after everything else has started).
    const ready = new Set<Worker>();
    const spawn = async () => {
      const worker = await startWorker(env, { proxied: true });
      void worker
        .proxy!.rule({ match: ["task-sweep"], action: "pass", once: true })
        .then(() => ready.add(worker));
      return worker;
    };
    let live = [await spawn(), await spawn(), await spawn()];
    for (const [stage, match] of STAGES) {
      await until(async () => live.filter((w) => ready.has(w)).length >= 2, 60_000, "workers");
      const id = await queueTask(`Add a greeting helper (killed in ${stage})`);
      for (const worker of live) void worker.proxy!.rule({ match: match(id), action: "freeze" });
      const victim = await Promise.race(live.map((w) => w.proxy!.frozen.then(() => w)));
      live = live.filter((w) => w !== victim);
      for (const worker of live) worker.proxy!.clearFreezes();
      await kill(victim);
      killed.push({ stage, id, at: Date.now() });
      live.push(await spawn());
      await ended(id, 60_000);
    }

    const pushes = (await readFile(pushLog, "utf8")).split("\n");
    const branches = (await repo.git("for-each-ref", "--format=%(refname)", "refs/heads/"))
      .trim()
      .split("\n");
    const outcomes = [];
    for (const { stage, id, at } of killed) {
      const found = await task(id);
      const log = await events(id);
      const ref = `refs/heads/${String(found.branch)}`;
      // The first event after the kill: the stage resumed elsewhere.
      const after = log.find((e) => (e.ts as Date).getTime() >= at);
      outcomes.push({
        stage,
        status: found.status,
        phase: found.phase,
        error: found.error,
        // Ended once: one terminal event, one DONE phase.
        terminal: log.filter((e) => e.type === "done" || e.type === "error").length,
        done: log.filter(
          (e) => e.type === "phase" && (e.payload as { phase?: string }).phase === "DONE",
        ).length,
        resumedInBound:
          after !== undefined && (after.ts as Date).getTime() - at < BOUND_MS + SLACK_MS,
        // One branch on the remote, pushed once.
        branch: branches.includes(ref),
        pushes: pushes.filter((line) => line.endsWith(` ${ref}`)).length,
      });
    }
    // A stage after IMPLEMENTING resumed on a worker with another DATA_DIR restores the
    // work from the diff the last round saved (stages/working-copy.ts), so every task ends
    // with its change pushed once.
    expect(outcomes).toEqual(
      STAGES.map(([stage]) => ({
        stage,
        status: "completed",
        phase: "DONE",
        error: null,
        terminal: 1,
        done: 1,
        resumedInBound: true,
        branch: true,
        pushes: 1,
      })),
    );
  }, 300_000);
});

describe("the task sweep", () => {
  /** A task whose worker died in PLANNING, with its stage job gone. */
  async function strandedInPlanning(
    env: Record<string, string>,
    description: string,
  ): Promise<string> {
    const id = await queueTask(description);
    const victim = await startWorker(env, { proxied: true });
    void victim.proxy!.rule({ match: [id, "PLANNING"], action: "freeze" });
    await victim.proxy!.frozen;
    await kill(victim);
    // The job is lost, as when a run fails before taking its lease or jobs are cleared: no
    // lock expiry brings it back.
    await models.Once.db
      .collection("jobs")
      .deleteMany({ name: "pipeline.stage", "data.task_id": id });
    return id;
  }

  it("resumes a running task that no job moves, once across workers", async () => {
    const env = { JOB_LOCK_LIFETIME_S: "2", TASK_SWEEP_INTERVAL_S: "1" };
    const id = await strandedInPlanning(env, "Add a greeting helper (its job lost)");
    const lostAt = Date.now();
    await startWorker(env);
    await startWorker(env);
    // The bound holds while some worker runs: from when the first survivor sweeps.
    const sweeping = await until(
      async () =>
        (
          await models.Once.collection.findOne(
            { scope: "task-sweep", created_at: { $gt: new Date(lostAt) } },
            { sort: { created_at: 1 } },
          )
        )?.created_at as Date | undefined,
      60_000,
      "a survivor's first sweep",
    );
    const from = Math.max(lostAt, sweeping.getTime());
    const done = await ended(id, 60_000);
    expect(done).toMatchObject({ status: "completed", phase: "DONE", error: null });
    const swept = (await stageJobs(id)).filter((job) =>
      String((job.data as { resume?: string }).resume).startsWith("sweep:"),
    );
    expect(swept).toHaveLength(1);
    expect(swept[0]!.data).toMatchObject({ stage: "plan" });
    const log = await events(id);
    const resumed = log.find((e) =>
      /^Resuming PLANNING \(attempt 2\)/.test(String((e.payload as { message?: string }).message)),
    );
    expect(resumed).toBeDefined();
    // JOB_LOCK_LIFETIME_S + TASK_SWEEP_INTERVAL_S, the lease having lapsed by then.
    expect((resumed!.ts as Date).getTime() - from).toBeLessThan(3000 + SLACK_MS);
    expect(log.filter((e) => e.type === "done" || e.type === "error")).toHaveLength(1);
  }, 120_000);

  it("fails, with the reason, a stranded task whose stage has used up its runs", async () => {
    const env = {
      JOB_LOCK_LIFETIME_S: "2",
      TASK_SWEEP_INTERVAL_S: "1",
      STAGE_MAX_ATTEMPTS: "1",
    };
    const id = await strandedInPlanning(env, "Add a greeting helper (out of runs)");
    await startWorker(env);
    const done = await ended(id, 60_000);
    expect(done).toMatchObject({ status: "failed", phase: "FAILED" });
    expect(String(done.error)).toMatch(
      /^The worker running PLANNING stopped before finishing it, and STAGE_MAX_ATTEMPTS allows one run/,
    );
    const log = await events(id);
    expect(log.filter((e) => e.type === "done" || e.type === "error")).toHaveLength(1);
  }, 120_000);
});
