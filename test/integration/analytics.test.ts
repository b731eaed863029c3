import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../helpers/server.js";

/*
 * Velocity analytics over seeded task records: the figures of each period, per agent, the
 * timeline's day rows, and other accounts' tasks never counted.
 */

const DAY = 86_400_000;
let server: TestServer;
let key: string;
let otherKey: string;
// 00:00 UTC today: every seeded task is created at or before now.
const today = (() => {
  const now = new Date();
  return Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate());
})();
const dayString = (daysAgo: number) => new Date(today - daysAgo * DAY).toISOString().slice(0, 10);

interface Seed {
  id: string;
  daysAgo: number;
  /** Seconds after that day's midnight. */
  at?: number;
  status: string;
  /** Seconds from creation to the end. */
  took?: number;
  pr?: "open" | "merged" | "closed";
  usd: number;
  agent?: string;
}

const SEEDS: Seed[] = [
  {
    id: "t1",
    daysAgo: 0,
    status: "completed",
    took: 600,
    pr: "merged",
    usd: 0.5,
    agent: "test-writer",
  },
  { id: "t2", daysAgo: 2, status: "completed", took: 1200, pr: "open", usd: 0.3 },
  { id: "t3", daysAgo: 3, status: "failed", took: 300, usd: 0.2, agent: "test-writer" },
  // The first instant of the 7-day period.
  { id: "t4", daysAgo: 6, status: "cancelled", took: 60, usd: 0 },
  { id: "t5", daysAgo: 1, status: "running", usd: 0.1, agent: "test-writer" },
  // One second before the 7-day period.
  { id: "t9", daysAgo: 7, at: 86_399, status: "completed", took: 100, usd: 0.05 },
  {
    id: "t6",
    daysAgo: 10,
    status: "completed",
    took: 3600,
    pr: "merged",
    usd: 1,
    agent: "docs-writer",
  },
  { id: "t7", daysAgo: 45, status: "completed", took: 7200, pr: "closed", usd: 2 },
  { id: "t8", daysAgo: 100, status: "completed", took: 60, pr: "merged", usd: 5 },
];

function taskDoc(seed: Seed, accountId: string): Record<string, unknown> {
  const created = new Date(today - seed.daysAgo * DAY + (seed.at ?? 0) * 1000);
  const finished = seed.took === undefined ? null : new Date(created.getTime() + seed.took * 1000);
  return {
    _id: `task_${accountId}_${seed.id}`,
    account_id: accountId,
    workspace_id: "ws_x",
    repo_id: "repo_x",
    description: seed.id,
    status: seed.status,
    phase: seed.status === "completed" ? "DONE" : seed.status === "running" ? "PLANNING" : "FAILED",
    created_at: created,
    updated_at: finished ?? created,
    started_at: created,
    finished_at: finished,
    pr_url: seed.pr ? `https://github.com/acme/app/pull/${seed.id.slice(1)}` : null,
    pr_state: seed.pr ?? null,
    cost: {
      input_tokens: 10,
      output_tokens: 5,
      usd: seed.usd,
      cached_input_tokens: 6,
      cache_write_tokens: 1,
    },
    agent_name: seed.agent ?? null,
  };
}

async function accountOf(keyId: string): Promise<string> {
  const doc = await server.service.db.models.ApiKey.findOne({ key_id: keyId }).lean();
  return doc!.account_id;
}

beforeAll(async () => {
  server = await startTestServer();
  const mine = await server.signup();
  const other = await server.signup("other");
  key = mine.key;
  otherKey = other.key;
  const me = await accountOf(mine.id);
  const them = await accountOf(other.id);
  await server.service.db.models.Task.collection.insertMany([
    ...SEEDS.map((s) => taskDoc(s, me)),
    // Another account's task, inside every period: never counted for the first account.
    taskDoc(
      {
        id: "x1",
        daysAgo: 0,
        status: "completed",
        took: 5,
        pr: "merged",
        usd: 9,
        agent: "test-writer",
      },
      them,
    ),
  ] as never[]);
}, 60_000);

afterAll(async () => {
  await server?.stop();
});

describe("GET /analytics/velocity", () => {
  it("gives the 7-day figures, overall and per agent", async () => {
    const res = await server.api("GET", "/analytics/velocity?period=7", { key });
    expect(res.status).toBe(200);
    expect(res.body.period_days).toBe(7);
    expect(res.body.from).toBe(new Date(today - 6 * DAY).toISOString());
    expect(Date.parse(res.body.to)).toBeGreaterThanOrEqual(today);
    expect(res.body).toMatchObject({
      tasks: { total: 5, completed: 2, failed: 1, cancelled: 1, in_progress: 1 },
      success_rate: 0.5,
      // finished durations 60, 300, 600, 1200 s
      duration_seconds: { median: 450, p90: 1200, count: 4 },
      pull_requests: { opened: 2, merged: 1, merge_rate: 0.5 },
      cost_usd: { total: 1.1, per_successful_task: 0.55 },
      // five tasks of 10 input tokens each: 6 read from the cache, 1 written, 3 uncached
      tokens: { input: 50, cached_input: 30, cache_write: 5, uncached_input: 15, output: 25 },
    });
    expect(res.body.by_agent).toEqual([
      {
        agent_name: "test-writer",
        tasks: { total: 3, completed: 1, failed: 1, cancelled: 0, in_progress: 1 },
        success_rate: 0.5,
        duration_seconds: { median: 450, p90: 600, count: 2 },
        pull_requests: { opened: 1, merged: 1, merge_rate: 1 },
        cost_usd: { total: 0.8, per_successful_task: 0.8 },
      },
      {
        agent_name: null,
        tasks: { total: 2, completed: 1, failed: 0, cancelled: 1, in_progress: 0 },
        success_rate: 0.5,
        duration_seconds: { median: 630, p90: 1200, count: 2 },
        pull_requests: { opened: 1, merged: 0, merge_rate: 0 },
        cost_usd: { total: 0.3, per_successful_task: 0.3 },
      },
    ]);
  });

  it("gives the 30-day figures, and 30 is the default", async () => {
    const res = await server.api("GET", "/analytics/velocity?period=30", { key });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      period_days: 30,
      from: new Date(today - 29 * DAY).toISOString(),
      tasks: { total: 7, completed: 4, failed: 1, cancelled: 1, in_progress: 1 },
      success_rate: 0.6667,
      // 60, 100, 300, 600, 1200, 3600 s
      duration_seconds: { median: 450, p90: 3600, count: 6 },
      pull_requests: { opened: 3, merged: 2, merge_rate: 0.6667 },
      cost_usd: { total: 2.15, per_successful_task: 0.5375 },
    });
    expect(
      res.body.by_agent.map((a: { agent_name: string | null; tasks: { total: number } }) => [
        a.agent_name,
        a.tasks.total,
      ]),
    ).toEqual([
      [null, 3],
      ["test-writer", 3],
      ["docs-writer", 1],
    ]);
    const byDefault = await server.api("GET", "/analytics/velocity/", { key });
    expect(byDefault.status).toBe(200);
    const { to: _a, ...withoutTo } = res.body;
    const { to: _b, ...defaultWithoutTo } = byDefault.body;
    expect(defaultWithoutTo).toEqual(withoutTo);
  });

  it("gives the 90-day figures", async () => {
    const res = await server.api("GET", "/analytics/velocity?period=90", { key });
    expect(res.body).toMatchObject({
      period_days: 90,
      tasks: { total: 8, completed: 5, failed: 1, cancelled: 1, in_progress: 1 },
      success_rate: 0.7143,
      duration_seconds: { median: 600, p90: 7200, count: 7 },
      pull_requests: { opened: 4, merged: 2, merge_rate: 0.5 },
      cost_usd: { total: 4.15, per_successful_task: 0.83 },
    });
  });

  it("counts only the caller's own tasks", async () => {
    const res = await server.api("GET", "/analytics/velocity?period=90", { key: otherKey });
    expect(res.body).toMatchObject({
      tasks: { total: 1, completed: 1, failed: 0, cancelled: 0, in_progress: 0 },
      cost_usd: { total: 9, per_successful_task: 9 },
      pull_requests: { opened: 1, merged: 1, merge_rate: 1 },
    });
    const fresh = await server.signup("empty");
    const empty = await server.api("GET", "/analytics/velocity?period=7", { key: fresh.key });
    expect(empty.body).toMatchObject({
      tasks: { total: 0, completed: 0, failed: 0, cancelled: 0, in_progress: 0 },
      success_rate: null,
      duration_seconds: { median: null, p90: null, count: 0 },
      pull_requests: { opened: 0, merged: 0, merge_rate: null },
      cost_usd: { total: 0, per_successful_task: null },
      by_agent: [],
    });
  });

  it("refuses other periods with 400", async () => {
    for (const query of [
      "period=14",
      "period=0",
      "period=abc",
      "period=",
      "period=7&period=30",
      "since=1",
    ]) {
      for (const path of ["/analytics/velocity", "/analytics/velocity/timeline"]) {
        const res = await server.api("GET", `${path}?${query}`, { key });
        expect([path, query, res.status, res.body.error?.code]).toEqual([
          path,
          query,
          400,
          "validation_failed",
        ]);
      }
    }
    expect((await server.api("GET", "/analytics/velocity")).status).toBe(401);
  });
});

describe("GET /analytics/velocity/timeline", () => {
  const zero = {
    tasks_created: 0,
    completed: 0,
    failed: 0,
    cancelled: 0,
    pull_requests_opened: 0,
    pull_requests_merged: 0,
    cost_usd: 0,
  };

  it("has one row per UTC day of the 7-day period, oldest first, zero days included", async () => {
    const res = await server.api("GET", "/analytics/velocity/timeline?period=7", { key });
    expect(res.status).toBe(200);
    expect(res.body).toEqual([
      { ...zero, date: dayString(6), tasks_created: 1, cancelled: 1 },
      { ...zero, date: dayString(5) },
      { ...zero, date: dayString(4) },
      { ...zero, date: dayString(3), tasks_created: 1, failed: 1, cost_usd: 0.2 },
      {
        ...zero,
        date: dayString(2),
        tasks_created: 1,
        completed: 1,
        pull_requests_opened: 1,
        cost_usd: 0.3,
      },
      { ...zero, date: dayString(1), tasks_created: 1, cost_usd: 0.1 },
      {
        ...zero,
        date: dayString(0),
        tasks_created: 1,
        completed: 1,
        pull_requests_opened: 1,
        pull_requests_merged: 1,
        cost_usd: 0.5,
      },
    ]);
  });

  it("has 30 and 90 rows, with each task on the day it was created", async () => {
    const month = await server.api("GET", "/analytics/velocity/timeline", { key });
    expect(month.body).toHaveLength(30);
    expect(month.body[0].date).toBe(dayString(29));
    expect(month.body[29].date).toBe(dayString(0));
    expect(month.body.find((r: { date: string }) => r.date === dayString(7))).toEqual({
      ...zero,
      date: dayString(7),
      tasks_created: 1,
      completed: 1,
      cost_usd: 0.05,
    });
    expect(
      month.body.reduce((n: number, r: { tasks_created: number }) => n + r.tasks_created, 0),
    ).toBe(7);
    const quarter = await server.api("GET", "/analytics/velocity/timeline?period=90", { key });
    expect(quarter.body).toHaveLength(90);
    expect(
      quarter.body.reduce((n: number, r: { tasks_created: number }) => n + r.tasks_created, 0),
    ).toBe(8);
    expect(quarter.body.find((r: { date: string }) => r.date === dayString(45))).toMatchObject({
      tasks_created: 1,
      pull_requests_opened: 1,
      pull_requests_merged: 0,
      cost_usd: 2,
    });
  });
});
