import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  fireCronSlot,
  runCronJob,
  type CronFiring,
  type CronJobs,
} from "../../src/domain/automations/automations.js";
import type { TaskDeps } from "../../src/domain/tasks/model.js";
import {
  CRON_JOB_NAME,
  createCronJobs,
  findCronJobs,
  reconcileCronJobs,
} from "../../src/jobs/cron.js";
import { startService, type Service } from "../../src/service.js";
import { placeholderRepo } from "../helpers/git-repo.js";
import {
  startTestServer,
  testConfig,
  testDatabaseUri,
  type TestServer,
} from "../helpers/server.js";

/*
 * Cron automations with two worker processes on one database: the web+worker service of
 * the test server and a second worker-only service. Slots are driven two ways: the job's
 * run function called for the same slot from both workers at once (time given, not waited
 * for), and the real Agenda job made due by moving its next run to now.
 */

let server: TestServer;
let second: Service;

beforeAll(async () => {
  const uri = testDatabaseUri("cron");
  // Tasks created here fail at CLONING (no such remote) in the workers; only counts matter.
  server = await startTestServer({ workers: true, env: { MONGODB_URI: uri } });
  second = await startService({
    config: testConfig({ MONGODB_URI: uri }),
    web: false,
    workers: true,
    testing: true,
  });
}, 120_000);

afterAll(async () => {
  await second?.stop();
  await server?.stop();
});

const models = () => server.service.db.models;
const db = () => server.service.db.connection.db!;
interface Worker {
  deps: TaskDeps;
  cron: CronJobs;
}
/** The two worker processes: the test server's and the second service's. */
const workers = (): [Worker, Worker] => [
  { deps: server.service.pipeline.taskDeps, cron: createCronJobs(server.service.scheduler.agenda) },
  { deps: second.pipeline.taskDeps, cron: createCronJobs(second.scheduler.agenda) },
];

async function account() {
  const { key } = await server.signup();
  const ws = await server.api("POST", "/workspaces", {
    key,
    body: { name: "w", repos: [{ name: "acme/app", clone_url: await placeholderRepo() }] },
  });
  expect(ws.status).toBe(201);
  return { key, workspaceId: ws.body.id as string };
}

async function cronAutomation(key: string, schedule: string, template = "Cron {{now}} {{date}}") {
  const res = await server.api("POST", "/automations", {
    key,
    body: {
      repo_id: "acme/app",
      trigger_type: "cron",
      trigger_config: { schedule },
      task_template: template,
      enabled: true,
    },
  });
  expect(res.status).toBe(201);
  return res.body.id as string;
}

function tasksOf(automationId: string) {
  return models()
    .Task.collection.find({ "origin.automation_id": automationId })
    .toArray() as unknown as Promise<
    Array<{ _id: string; description: string; origin: { slot: string } }>
  >;
}

/** When the automation's schedule was last (re)armed: slots up to then never fire. */
async function armedAt(id: string): Promise<Date> {
  const doc = await models().Automation.collection.findOne({ _id: id as never });
  return doc!.armed_at as Date;
}

async function until<T>(what: string, fn: () => Promise<T | undefined>, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await fn();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The next `count` whole minutes from now (future slots of "* * * * *"). */
function nextMinutes(count: number): Date[] {
  const first = Math.ceil((Date.now() + 1000) / 60_000) * 60_000;
  return Array.from({ length: count }, (_, i) => new Date(first + i * 60_000));
}

describe("cron automations across two workers", () => {
  it("creates exactly one task per slot when both workers run the same slots at once", async () => {
    const { key } = await account();
    const id = await cronAutomation(key, "* * * * *");
    const slots = nextMinutes(4);
    const results: Array<{ slot: Date; result: CronFiring }> = [];
    await Promise.all(
      slots.flatMap((slot) =>
        workers().flatMap(({ deps, cron }, w) =>
          // Each worker runs the slot twice (a job locked twice on FerretDB), a few ms apart.
          [0, 1].map(async (attempt) => {
            const now = new Date(slot.getTime() + 50 + w * 10 + attempt * 5);
            results.push({ slot, result: await runCronJob(deps, cron, id, undefined, now) });
          }),
        ),
      ),
    );
    for (const slot of slots) {
      const outcomes = results
        .filter((r) => r.slot === slot)
        .map((r) => (r.result.outcome === "skipped" ? r.result.reason : r.result.outcome))
        .sort();
      expect(outcomes, slot.toISOString()).toEqual([
        "created",
        "duplicate",
        "duplicate",
        "duplicate",
      ]);
    }
    const tasks = await tasksOf(id);
    expect(tasks.map((t) => t.origin.slot).sort()).toEqual(slots.map((s) => s.toISOString()));
    const first = tasks.find((t) => t.origin.slot === slots[0]!.toISOString())!;
    expect(first.description).toBe(
      `Cron ${slots[0]!.toISOString()} ${slots[0]!.toISOString().slice(0, 10)}`,
    );
    const automation = await server.api("GET", `/automations/${id}`, { key });
    expect(tasks.map((t) => t._id)).toContain(automation.body.last_task_id);
    expect(automation.body.last_triggered_at).not.toBeNull();
  });

  it("skips instants that are not slots, slots from before it was armed, and slots long past", async () => {
    const { key } = await account();
    const hour = 3_600_000;
    const id = await cronAutomation(key, "0 * * * *");
    const [{ deps, cron }] = workers();
    const future = new Date(Math.ceil((Date.now() + 1000) / hour) * hour);
    expect(await fireCronSlot(deps, id, new Date(future.getTime() + 60_000))).toEqual({
      outcome: "skipped",
      reason: "not_a_slot",
    });
    const past = new Date(Math.floor((await armedAt(id)).getTime() / hour) * hour);
    expect(await fireCronSlot(deps, id, past)).toEqual({
      outcome: "skipped",
      reason: "before_armed",
    });
    // Eleven minutes after a slot (workers were down): not fired late, not back-filled.
    expect(
      await runCronJob(deps, cron, id, undefined, new Date(future.getTime() + 11 * 60_000)),
    ).toEqual({ outcome: "skipped", reason: "too_late" });
    expect(await tasksOf(id)).toHaveLength(0);
    // Nine minutes late is still that slot.
    expect(
      (await runCronJob(deps, cron, id, undefined, new Date(future.getTime() + 9 * 60_000)))
        .outcome,
    ).toBe("created");
    expect((await tasksOf(id)).map((t) => t.origin.slot)).toEqual([future.toISOString()]);
  });

  it("runs the real Agenda job once when it falls due, with both workers polling", async () => {
    const { key } = await account();
    // A slot in the current minute, the next one an hour away: only the forced run fires.
    const minute = new Date().getUTCMinutes();
    const id = await cronAutomation(key, `${minute} * * * *`, "Hourly {{now}}");
    const [job] = await findCronJobs(db(), id);
    expect(job).toMatchObject({ repeatInterval: `${minute} * * * *` });
    // Make time advance: the automation has existed for an hour and its job is due now.
    await models().Automation.collection.updateOne(
      { _id: id as never },
      { $set: { armed_at: new Date(Date.now() - 3_600_000) } },
    );
    await db()
      .collection("jobs")
      .updateOne({ _id: job!._id as never }, { $set: { nextRunAt: new Date() } });

    const [task] = await until("the cron task", async () => {
      const tasks = await tasksOf(id);
      return tasks.length > 0 ? tasks : undefined;
    });
    // Wait for the job to be finished and rescheduled an hour on, then count again.
    await until("the job to be rescheduled", async () => {
      const doc = await db()
        .collection("jobs")
        .findOne({ _id: job!._id as never });
      return doc && doc.lockedAt === null && doc.lastFinishedAt && doc.nextRunAt > new Date()
        ? doc
        : undefined;
    });
    const tasks = await tasksOf(id);
    expect(tasks).toHaveLength(1);
    expect(task!.description).toBe(`Hourly ${task!.origin.slot}`);
    expect(new Date(task!.origin.slot).getUTCMinutes()).toBe(minute);
    const automation = await server.api("GET", `/automations/${id}`, { key });
    expect(automation.body.last_task_id).toBe(task!._id);
  });

  it("stops firing once disabled, and does not fire slots from before it was enabled again", async () => {
    const { key } = await account();
    const id = await cronAutomation(key, "* * * * *");
    const [slot, later] = nextMinutes(2);
    const patched = await server.api("PATCH", `/automations/${id}`, {
      key,
      body: { enabled: false },
    });
    expect(patched.body.enabled).toBe(false);
    expect(await findCronJobs(db(), id)).toHaveLength(0);
    for (const { deps, cron } of workers()) {
      expect(await runCronJob(deps, cron, id, undefined, new Date(slot!.getTime() + 50))).toEqual({
        outcome: "skipped",
        reason: "disabled",
      });
    }
    expect(await tasksOf(id)).toHaveLength(0);

    await server.api("PATCH", `/automations/${id}`, { key, body: { enabled: true } });
    expect(await findCronJobs(db(), id)).toHaveLength(1);
    const recent = new Date(Math.floor((await armedAt(id)).getTime() / 60_000) * 60_000);
    const [{ deps }] = workers();
    expect(await fireCronSlot(deps, id, recent)).toEqual({
      outcome: "skipped",
      reason: "before_armed",
    });
    expect((await fireCronSlot(deps, id, later!)).outcome).toBe("created");
  });

  it("removes the job on delete, and a leftover job removes itself when it runs", async () => {
    const { key } = await account();
    const id = await cronAutomation(key, "* * * * *");
    expect(await findCronJobs(db(), id)).toHaveLength(1);
    expect((await server.api("DELETE", `/automations/${id}`, { key })).status).toBe(204);
    expect(await findCronJobs(db(), id)).toHaveLength(0);
    const [slot] = nextMinutes(1);
    const [{ deps, cron }] = workers();
    expect(await runCronJob(deps, cron, id, undefined, new Date(slot!.getTime() + 10))).toEqual({
      outcome: "skipped",
      reason: "gone",
    });

    // A job left behind (a process stopped between its two writes) falls due and goes away.
    await cron.arm({ id, schedule: "* * * * *", timezone: "UTC" });
    const [leftover] = await findCronJobs(db(), id);
    await db()
      .collection("jobs")
      .updateOne({ _id: leftover!._id as never }, { $set: { nextRunAt: new Date() } });
    await until("the leftover job to be removed", async () =>
      (await findCronJobs(db(), id)).length === 0 ? true : undefined,
    );
    expect(await tasksOf(id)).toHaveLength(0);
  });

  it("records a quota refusal on the automation and creates no task", async () => {
    const { key, workspaceId } = await account();
    for (let i = 0; i < 10; i += 1) {
      const t = await server.api("POST", "/tasks", {
        key,
        body: { workspace_id: workspaceId, repo_id: "acme/app", description: `t${i}` },
      });
      expect(t.status).toBe(201);
    }
    const id = await cronAutomation(key, "* * * * *");
    const [slot] = nextMinutes(1);
    const [{ deps }] = workers();
    const result = await fireCronSlot(deps, id, slot!);
    expect(result).toMatchObject({ outcome: "refused", code: "monthly_limit_reached" });
    const automation = await server.api("GET", `/automations/${id}`, { key });
    expect(automation.body).toMatchObject({
      last_task_id: null,
      last_triggered_at: null,
      last_refusal: { code: "monthly_limit_reached", reason: expect.any(String) },
    });
    expect(await tasksOf(id)).toHaveLength(0);
    expect((await server.api("GET", "/keys/me", { key })).body.tasks_this_month).toBe(10);
  });

  it("brings jobs back in step at worker start: missing ones armed, orphans removed", async () => {
    const { key } = await account();
    const id = await cronAutomation(key, "15 3 * * *");
    await db().collection("jobs").deleteMany({ name: CRON_JOB_NAME, "data.automation_id": id });
    const [{ cron }] = workers();
    await cron.arm({ id: "auto_orphan", schedule: "* * * * *", timezone: "UTC" });
    await reconcileCronJobs(models(), db(), cron);
    const jobs = await findCronJobs(db(), id);
    expect(jobs).toHaveLength(1);
    expect(jobs[0]).toMatchObject({ repeatInterval: "15 3 * * *" });
    expect(await findCronJobs(db(), "auto_orphan")).toHaveLength(0);
  });
});
