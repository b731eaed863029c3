import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentModel, type Script } from "../helpers/agent-model.js";
import { startFakeModel, type FakeModel, fakeModelEnv } from "../helpers/fake-model.js";
import { createGitRepo, type GitFixture } from "../helpers/git-repo.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { openTaskStream } from "../helpers/ws.js";

/*
 * GET /metrics on a real server that runs a whole task (scripted model, plain-git
 * repository, a verification check in the sandbox): the counters the task moved are read
 * back from the Prometheus text. And who may read it: the Bearer token on the API port,
 * nothing there by default, a separate listener with METRICS_PORT.
 */

const METRICS_TOKEN = "metrics-token-0123456789abcdef";

const script: Script = {
  plan: () => [
    {
      name: "submit_plan",
      arguments: {
        summary: "Write the notes.",
        steps: [{ title: "Notes", description: "Add notes.", files: ["NOTES.md"] }],
      },
    },
  ],
  implement: (_request, n) =>
    n === 0
      ? [{ name: "write_file", arguments: { path: "NOTES.md", content: "# Notes\n" } }]
      : [{ name: "finish", arguments: { summary: "Wrote the notes." } }],
  review: () => [
    { name: "submit_review", arguments: { verdict: "approve", summary: "Fine.", comments: [] } },
  ],
};

let repo: GitFixture;
let model: FakeModel;
let server: TestServer;
let key: string;
let workspaceId: string;

beforeAll(async () => {
  repo = await createGitRepo({
    "README.md": "# notes\n",
    ".github/foreman.yml": 'verify:\n  - name: ok\n    run: node -e "process.exit(0)"\n',
  });
  model = await startFakeModel(agentModel(script));
  server = await startTestServer({
    workers: true,
    env: {
      ...fakeModelEnv(model, "sk-metrics-model-key-0123456789abcdef"),
      EVENT_POLL_MS: "50",
      METRICS_TOKEN,
      // Every scrape reads the database afresh (5 s by default), so each test sees its own writes.
      METRICS_DB_READ_S: "0",
    },
  });
  ({ key } = await server.signup());
  const ws = await server.api("POST", "/workspaces", {
    key,
    body: { name: "notes", repos: [{ name: "acme/notes", clone_url: repo.dir }] },
  });
  expect(ws.status).toBe(201);
  workspaceId = ws.body.id;
}, 60_000);

afterAll(async () => {
  await server?.stop();
  await model?.close();
  await repo?.remove();
});

async function scrape(
  url: string,
  token?: string,
): Promise<{ status: number; text: string; res: Response }> {
  const res = await fetch(`${url}/metrics`, {
    headers: token ? { authorization: `Bearer ${token}` } : {},
  });
  return { status: res.status, text: await res.text(), res };
}

/** The value of one series (`name{a="b",…}` with exactly these labels), or undefined. */
function sample(
  text: string,
  name: string,
  labels: Record<string, string> = {},
): number | undefined {
  for (const line of text.split("\n")) {
    if (line.startsWith("#")) continue;
    const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const found: Record<string, string> = {};
    for (const pair of (match[2] ?? "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g))
      found[pair[1]!] = pair[2]!;
    const wanted = Object.entries(labels);
    if (Object.keys(found).length !== wanted.length) continue;
    if (wanted.every(([k, v]) => found[k] === v)) return Number(match[3]);
  }
  return undefined;
}

describe("GET /metrics", () => {
  it("answers 401 with the error body without the Bearer token, or with a wrong one", async () => {
    for (const token of [undefined, "wrong-token-0123456789abcdef"]) {
      const { status, text, res } = await scrape(server.url, token);
      expect(status).toBe(401);
      expect(res.headers.get("www-authenticate")).toBe("Bearer");
      expect(JSON.parse(text)).toMatchObject({ error: { code: "unauthorized" } });
    }
    // The API key is not a metrics token.
    const withKey = await server.api("GET", "/metrics", { key });
    expect(withKey.status).toBe(401);
  });

  it("counts what a whole task moved: requests, stages, tokens, sandbox runs, tasks", async () => {
    const created = await server.api("POST", "/tasks", {
      key,
      body: {
        workspace_id: workspaceId,
        repo_id: "acme/notes",
        description: "Add notes",
        auto_approve: true,
      },
    });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    const stream = await openTaskStream(server.url, id, key);
    expect(await stream.closed).toBe(1000);
    const task = (await server.api("GET", `/tasks/${id}`, { key })).body;
    expect(task).toMatchObject({ status: "completed", phase: "DONE" });

    const { status, text, res } = await scrape(server.url, METRICS_TOKEN);
    expect(status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);

    // HTTP: by route template, never the raw path.
    const http = (method: string, route: string, code: string) =>
      sample(text, "foreman_http_requests_total", { method, route, status: code });
    expect(http("POST", "/tasks", "201")).toBe(1);
    expect(http("GET", "/tasks/:id", "200")).toBe(1);
    expect(http("POST", "/workspaces", "201")).toBe(1);
    expect(http("GET", "/metrics", "401")).toBe(3);
    expect(
      sample(text, "foreman_http_request_duration_seconds_count", {
        method: "POST",
        route: "/tasks",
        status: "201",
      }),
    ).toBe(1);
    expect(text).not.toContain(id);

    // Every stage the task ran, once, done.
    for (const stage of ["clone", "index", "plan", "implement", "verify", "review", "cleanup"]) {
      expect(
        sample(text, "foreman_stage_duration_seconds_count", { stage, outcome: "done" }),
        stage,
      ).toBe(1);
    }

    // Tokens and cost: the fake model's fixed usage per call, times the calls it answered.
    const calls = model.requests.length;
    expect(calls).toBeGreaterThanOrEqual(4);
    const modelLabels = { provider: "openai-compatible", model: "fake-coder" };
    expect(sample(text, "foreman_model_calls_total", modelLabels)).toBe(calls);
    expect(sample(text, "foreman_model_tokens_total", { ...modelLabels, direction: "input" })).toBe(
      2000 * calls,
    );
    expect(
      sample(text, "foreman_model_tokens_total", { ...modelLabels, direction: "output" }),
    ).toBe(200 * calls);
    // 2,000 in at $3 and 200 out at $15 per million tokens.
    expect(sample(text, "foreman_model_cost_usd_total", modelLabels)).toBeCloseTo(0.009 * calls, 9);

    // The verification check ran in the sandbox and passed.
    expect(sample(text, "foreman_sandbox_runs_total", { outcome: "ok" })).toBeGreaterThanOrEqual(1);

    // Shared state, read from the database at scrape time.
    // Tasks under way come from the database (none now); ended ones are counted.
    expect(sample(text, "foreman_tasks_ended_total", { status: "completed" })).toBe(1);
    expect(sample(text, "foreman_tasks", { status: "running", phase: "CLONING" })).toBeUndefined();
  }, 120_000);

  it("reads the tasks under way by status and phase from the database, the same on every process", async () => {
    // A second web process without workers on the same database.
    const web = await startTestServer({
      env: {
        MONGODB_URI: server.service.config.mongodbUri,
        METRICS_TOKEN,
        METRICS_DB_READ_S: "0",
      },
    });
    try {
      const created = await web.api("POST", "/tasks", {
        key,
        body: { workspace_id: workspaceId, repo_id: "acme/notes", description: "Wait for me" },
      });
      expect(created.status).toBe(201);
      const id = created.body.id as string;
      const stream = await openTaskStream(server.url, id, key);
      await stream.waitFor((e) => e.event_type === "phase" && e.phase === "AWAITING_APPROVAL");
      for (const url of [web.url, server.url]) {
        const { text } = await scrape(url, METRICS_TOKEN);
        const waiting = { status: "awaiting_approval", phase: "AWAITING_APPROVAL" };
        expect(sample(text, "foreman_tasks", waiting)).toBe(1);
      }
      expect((await web.api("POST", `/tasks/${id}/cancel`, { key })).status).toBe(200);
      expect(await stream.closed).toBe(1000);
      const { text } = await scrape(web.url, METRICS_TOKEN);
      expect(text).not.toMatch(/^foreman_tasks\{/m);
    } finally {
      await web.stop();
    }
  }, 60_000);

  it("reports the job queue's due-but-untaken depth and lag from the jobs collection", async () => {
    const jobs = server.service.db.connection.db!.collection("jobs");
    // A job kind no worker knows stays due and untaken: the queue an operator must see.
    const due = new Date(Date.now() - 90_000);
    await jobs.insertMany([
      { name: "metrics.probe", nextRunAt: due, lockedAt: null, data: {}, priority: 0 },
      {
        name: "metrics.probe",
        nextRunAt: new Date(Date.now() - 10_000),
        lockedAt: null,
        data: {},
        priority: 0,
      },
      // Not due yet: not counted.
      {
        name: "metrics.probe",
        nextRunAt: new Date(Date.now() + 600_000),
        lockedAt: null,
        data: {},
        priority: 0,
      },
    ]);
    try {
      const { text } = await scrape(server.url, METRICS_TOKEN);
      expect(sample(text, "foreman_jobs_due", { name: "metrics.probe" })).toBe(2);
      const lag = sample(text, "foreman_jobs_lag_seconds", { name: "metrics.probe" })!;
      expect(lag).toBeGreaterThanOrEqual(90);
      expect(lag).toBeLessThan(200);
    } finally {
      await jobs.deleteMany({ name: "metrics.probe" });
    }
  });

  it("counts automation webhook deliveries by outcome", async () => {
    const before = await scrape(server.url, METRICS_TOKEN);
    const noMatch = { source: "automation", outcome: "no_match" };
    const start = sample(before.text, "foreman_webhook_deliveries_total", noMatch) ?? 0;
    const res = await server.api("POST", "/automations/webhook", { body: { event: "nothing" } });
    expect(res.status).toBe(200);
    expect(res.body.matched).toBe(0);
    const after = await scrape(server.url, METRICS_TOKEN);
    expect(sample(after.text, "foreman_webhook_deliveries_total", noMatch)).toBe(start + 1);
  });
});

describe("exposure", () => {
  it("is absent on the API port by default (no token, no port)", async () => {
    const plain = await startTestServer({ env: {} });
    try {
      const { status, text } = await scrape(plain.url, METRICS_TOKEN);
      expect(status).toBe(404);
      expect(JSON.parse(text)).toMatchObject({ error: { code: "not_found" } });
      expect(plain.service.metrics).toBeUndefined();
    } finally {
      await plain.stop();
    }
  });

  it("METRICS_PORT serves /metrics on its own 127.0.0.1 listener, and nothing else", async () => {
    const separate = await startTestServer({ env: { METRICS_PORT: "0" } });
    try {
      const metricsUrl = separate.service.metrics!.url;
      expect(metricsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      const { status, text } = await scrape(metricsUrl);
      expect(status).toBe(200);
      expect(text).toContain("# TYPE foreman_http_requests_total counter");
      expect(text).toContain("# TYPE foreman_tasks gauge");
      // Not on the public port, and the listener serves nothing of the API.
      expect((await scrape(separate.url)).status).toBe(404);
      expect((await fetch(`${metricsUrl}/keys/me`)).status).toBe(404);
    } finally {
      await separate.stop();
    }
  });
});
