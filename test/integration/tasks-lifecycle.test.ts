import { existsSync } from "node:fs";
import { readFile, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { repairEnding } from "../../src/domain/tasks/endings.js";
import { prepareWorkdir } from "../../src/workcopy/volume.js";
import {
  startFakeModel,
  type FakeModel,
  type FakeModelRequest,
  type FakeReply,
  fakeModelEnv,
} from "../helpers/fake-model.js";
import { createGitRepo, type GitFixture } from "../helpers/git-repo.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { openTaskStream, type StreamEvent } from "../helpers/ws.js";

/*
 * A task on a real local git repository, driven by a local OpenAI-compatible fake model:
 * CLONING → INDEXING → PLANNING → AWAITING_APPROVAL, then the approve and reject paths,
 * watched live over the WebSocket on the worker's process and on a second API process.
 */

const PLAN = {
  summary: "Make the rate limiter's window configurable.",
  steps: [
    {
      title: "Read the window from the environment",
      description: "Add RATE_WINDOW_MS to src/limiter.ts with the current value as default.",
      files: ["src/limiter.ts"],
    },
    {
      title: "Test it",
      description: "Cover the default and an override.",
      files: ["test/limiter.test.ts"],
    },
  ],
};

/** The model explores (search_code, then read_file), then submits the plan. */
function planner(request: FakeModelRequest): FakeReply {
  const toolResults = request.messages.filter((m) => m.role === "tool").length;
  const usage = { prompt_tokens: 1000, completion_tokens: 100 };
  // After approval, the implementing agent finds nothing to change.
  if (request.tools.includes("finish"))
    return { toolCalls: [{ name: "finish", arguments: { summary: "Nothing to change." } }], usage };
  if (toolResults === 0)
    return {
      toolCalls: [{ name: "search_code", arguments: { query: "rate limiter window" } }],
      usage,
    };
  if (toolResults === 1)
    return { toolCalls: [{ name: "read_file", arguments: { path: "src/limiter.ts" } }], usage };
  return { text: "I know enough.", toolCalls: [{ name: "submit_plan", arguments: PLAN }], usage };
}

const FILE_TOKEN = `ghp_${"Y".repeat(36)}`;

let repo: GitFixture;
let model: FakeModel;
let worker: TestServer;
let secondApi: TestServer;
let key: string;
let workspaceId: string;
let repoId: string;

beforeAll(async () => {
  repo = await createGitRepo({
    "README.md": "# limiter\nA tiny rate limiter.\n",
    "AGENTS.md": "Run `npm test` before you finish. Never edit generated files.\n",
    "src/limiter.ts":
      `// deploy token: ${FILE_TOKEN}\n` +
      "export const WINDOW_MS = 60_000;\n\nexport function createLimiter(max: number) {\n  return { max, windowMs: WINDOW_MS };\n}\n",
    "src/server.ts":
      "import { createLimiter } from './limiter.js';\nexport const limiter = createLimiter(10);\n",
    "test/limiter.test.ts": "import { createLimiter } from '../src/limiter.js';\n",
  });
  model = await startFakeModel(planner);
  const env = {
    ...fakeModelEnv(model, "sk-fake-model-key-0123456789abcdef"),
    EVENT_POLL_MS: "50",
  };
  worker = await startTestServer({ workers: true, env });
  // A second API process on the same database, without workers: it only sees the events
  // through the database.
  secondApi = await startTestServer({
    workers: false,
    env: { ...env, MONGODB_URI: worker.service.config.mongodbUri },
  });
  ({ key } = await worker.signup());
  const ws = await worker.api("POST", "/workspaces", {
    key,
    body: { name: "local", repos: [{ name: "acme/limiter", clone_url: repo.dir }] },
  });
  expect(ws.status).toBe(201);
  workspaceId = ws.body.id;
  repoId = ws.body.repos[0].id;
}, 60_000);

afterAll(async () => {
  await secondApi?.service.stop();
  await worker?.stop();
  await model?.close();
  await repo?.remove();
});

function phases(events: StreamEvent[]): string[] {
  return events.filter((e) => e.event_type === "phase").map((e) => String(e.phase));
}

function expectContiguous(events: StreamEvent[], from = 1): void {
  expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + from));
}

describe("task lifecycle", () => {
  it("plans, waits at the gate, and streams every event in order on both processes", async () => {
    const created = await worker.api("POST", "/tasks/", {
      key,
      body: {
        workspace_id: workspaceId,
        repo_id: "acme/limiter",
        description: "Make the rate limiter window configurable",
      },
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      status: "queued",
      phase: "QUEUED",
      repo_id: repoId,
      workspace_id: workspaceId,
      pr_url: null,
      error: null,
      auto_approve: false,
      plan: null,
    });
    const id = created.body.id as string;

    const live = await openTaskStream(worker.url, id, key);
    await live.waitFor((e) => e.event_type === "phase" && e.phase === "AWAITING_APPROVAL");
    expect(phases(live.events)).toEqual([
      "QUEUED",
      "CLONING",
      "INDEXING",
      "PLANNING",
      "AWAITING_APPROVAL",
    ]);
    expectContiguous(live.events);
    const plan = live.events.find((e) => e.event_type === "plan");
    expect(plan?.plan).toEqual([
      { step: 1, ...PLAN.steps[0] },
      { step: 2, ...PLAN.steps[1] },
    ]);
    const logs = live.events.filter((e) => e.event_type === "log").map((e) => String(e.message));
    expect(logs.some((m) => m.startsWith("Cloning acme/limiter"))).toBe(true);
    expect(logs.some((m) => /^Indexed \d+ files/.test(m))).toBe(true);
    expect(logs).toContain("Planning: read_file src/limiter.ts");

    // The model saw the repository's instructions and was driven through the tool protocol.
    expect(model.requests).toHaveLength(3);
    expect(model.requests.every((r) => r.stream)).toBe(true);
    expect(model.requests[0]?.tools).toEqual(
      expect.arrayContaining(["list_files", "read_file", "search_code", "submit_plan"]),
    );
    const system = JSON.stringify(model.requests[0]?.messages[0]);
    expect(system).toContain("Never edit generated files.");
    expect(model.requests[0]?.headers.authorization).toBe(
      "Bearer sk-fake-model-key-0123456789abcdef",
    );
    const readResult = model.requests[2]?.messages.filter((m) => m.role === "tool").pop();
    expect(JSON.stringify(readResult)).toContain("WINDOW_MS = 60_000");

    const task = await worker.api("GET", `/tasks/${id}`, { key });
    expect(task.body).toMatchObject({
      status: "awaiting_approval",
      phase: "AWAITING_APPROVAL",
      plan_summary: PLAN.summary,
    });
    expect(task.body.plan).toHaveLength(2);
    // 3 calls × (1000 in, 100 out) at $3 / $15 per million tokens.
    expect(task.body.cost).toEqual({
      input_tokens: 3000,
      output_tokens: 300,
      usd: 0.0135,
      cached_input_tokens: 0,
      cache_write_tokens: 0,
    });

    // Replay on the other process, from the start and from a sequence number.
    const replay = await openTaskStream(secondApi.url, id, key);
    const since = await openTaskStream(secondApi.url, id, key, { since: 3 });
    await replay.waitFor((e) => e.event_type === "phase" && e.phase === "AWAITING_APPROVAL");
    await since.waitFor((e) => e.event_type === "phase" && e.phase === "AWAITING_APPROVAL");
    expect(replay.events).toEqual(live.events);
    expect(since.events).toEqual(live.events.filter((e) => e.seq > 3));

    // Approving moves the task on; an implementation that changes nothing ends it DONE.
    const approved = await secondApi.api("POST", `/tasks/${id}/approve`, { key });
    expect(approved.status).toBe(200);
    expect(approved.body).toMatchObject({ status: "running", phase: "IMPLEMENTING" });
    const again = await worker.api("POST", `/tasks/${id}/approve`, { key });
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe("invalid_state");

    for (const stream of [live, replay]) {
      const done = await stream.waitFor((e) => e.event_type === "done");
      expect(done.pr_url).toBeNull();
      expect(await stream.closed).toBe(1000);
      expectContiguous(stream.events);
    }
    expect(replay.events).toEqual(live.events);
    expect(phases(live.events).slice(-5)).toEqual([
      "IMPLEMENTING",
      "VERIFYING",
      "REVIEWING",
      "CLEANUP",
      "DONE",
    ]);
    const finished = await worker.api("GET", `/tasks/${id}`, { key });
    expect(finished.body).toMatchObject({
      status: "completed",
      phase: "DONE",
      pr_url: null,
      diff: "",
    });
    expect(finished.body.plan).toHaveLength(2);
    since.close();
  }, 60_000);

  it("rejecting the plan cancels the task and closes the stream", async () => {
    const created = await worker.api("POST", "/tasks", {
      key,
      body: { workspace_id: workspaceId, repo_id: repoId, description: "Tune the limiter" },
    });
    const id = created.body.id as string;
    const stream = await openTaskStream(secondApi.url, id, key);
    await stream.waitFor((e) => e.event_type === "phase" && e.phase === "AWAITING_APPROVAL");
    const notYet = await worker.api("POST", `/tasks/${id}/approve-diff`, { key });
    expect(notYet.status).toBe(409);

    const rejected = await worker.api("POST", `/tasks/${id}/reject`, { key });
    expect(rejected.status).toBe(200);
    expect(rejected.body).toMatchObject({ status: "cancelled", phase: "FAILED" });
    expect(rejected.body.error).toMatch(/plan was rejected/);
    const error = await stream.waitFor((e) => e.event_type === "error");
    expect(error.error).toBe(rejected.body.error);
    expect(await stream.closed).toBe(1000);
    expect(phases(stream.events).slice(-1)).toEqual(["FAILED"]);
    expectContiguous(stream.events);

    const late = await worker.api("POST", `/tasks/${id}/approve`, { key });
    expect(late.status).toBe(409);
    // A finished task's stream replays everything, then closes.
    const after = await openTaskStream(worker.url, id, key);
    expect(await after.closed).toBe(1000);
    expect(after.events).toEqual(stream.events);
  }, 60_000);

  it("auto_approve passes the plan gate without waiting", async () => {
    const created = await worker.api("POST", "/tasks", {
      key,
      body: {
        workspace_id: workspaceId,
        repo_id: repoId,
        description: "Tune the limiter",
        auto_approve: true,
      },
    });
    const stream = await openTaskStream(worker.url, created.body.id, key);
    await stream.waitFor((e) => e.event_type === "done");
    expect(phases(stream.events)).toEqual([
      "QUEUED",
      "CLONING",
      "INDEXING",
      "PLANNING",
      "IMPLEMENTING",
      "VERIFYING",
      "REVIEWING",
      "CLEANUP",
      "DONE",
    ]);
    expect(
      stream.events.some((e) => e.message === "Plan approved automatically (auto_approve)."),
    ).toBe(true);
    // The plan rejected in the test before is in the repository's memory now.
    const task = await worker.api("GET", `/tasks/${created.body.id}`, { key });
    expect(task.body.memories_used).toEqual([
      expect.objectContaining({
        kind: "rejection",
        text: expect.stringMatching(
          /^A plan was rejected for the task "Tune the limiter"\. It proposed: /,
        ),
      }),
    ]);
  }, 60_000);

  it("cancels a task waiting at a gate, once", async () => {
    const created = await worker.api("POST", "/tasks", {
      key,
      body: { workspace_id: workspaceId, repo_id: repoId, description: "Something to cancel" },
    });
    const id = created.body.id as string;
    const stream = await openTaskStream(worker.url, id, key);
    await stream.waitFor((e) => e.event_type === "phase" && e.phase === "AWAITING_APPROVAL");
    const results = await Promise.all([
      worker.api("POST", `/tasks/${id}/cancel`, { key }),
      secondApi.api("POST", `/tasks/${id}/cancel`, { key }),
    ]);
    expect(results.map((r) => r.status).sort()).toEqual([200, 409]);
    await stream.closed;
    expect(stream.events.filter((e) => e.event_type === "error")).toHaveLength(1);
    const task = await worker.api("GET", `/tasks/${id}`, { key });
    expect(task.body).toMatchObject({ status: "cancelled", phase: "FAILED" });
    expect(task.body.error).toMatch(/^Cancelled by API key/);

    // A stage stopped by the cancel hands the task back to repairEnding once its own work has
    // settled: a working copy it made after the ending removed it (a volume whose mount was
    // under way) goes then, mount and all, instead of waiting for the task sweep.
    const workdir = worker.service.context.tasks.workdirOf(id);
    const how = await prepareWorkdir(workdir, 64, () => undefined);
    await writeFile(path.join(workdir, "left-behind"), "x");
    await repairEnding(worker.service.context.tasks, id);
    expect(existsSync(workdir)).toBe(false);
    if (how === "volume") expect(await readFile("/proc/mounts", "utf8")).not.toContain(workdir);
    const after = await worker.api("GET", `/tasks/${id}`, { key });
    expect(after.body).toMatchObject({ status: "cancelled", phase: "FAILED" });
  }, 60_000);

  it("lists tasks newest first with filters and paging", async () => {
    const all = await worker.api("GET", "/tasks?limit=200", { key });
    expect(all.status).toBe(200);
    expect(all.body.length).toBeGreaterThanOrEqual(4);
    const times = all.body.map((t: { created_at: string }) => t.created_at);
    expect([...times].sort().reverse()).toEqual(times);
    const page1 = await worker.api("GET", "/tasks?limit=2", { key });
    const page2 = await worker.api("GET", `/tasks?limit=2&before=${page1.body[1].id}`, { key });
    expect(page2.body[0].id).toBe(all.body[2].id);
    const cancelled = await worker.api("GET", "/tasks?status=cancelled", { key });
    expect(cancelled.body.length).toBe(2);
    expect(cancelled.body.every((t: { status: string }) => t.status === "cancelled")).toBe(true);
    const byPhase = await worker.api(`GET`, `/tasks/?phase=FAILED&workspace_id=${workspaceId}`, {
      key,
    });
    expect(byPhase.body.length).toBe(cancelled.body.length);
    // Filters that match nothing here must give nothing, or the ones above prove nothing.
    for (const query of [
      "phase=PLANNING",
      "status=failed",
      "workspace_id=ws_other",
      `repo_id=repo_other`,
    ]) {
      const none = await worker.api("GET", `/tasks?${query}`, { key });
      expect(none.status, query).toBe(200);
      expect(none.body, query).toEqual([]);
    }
    const byRepo = await worker.api("GET", `/tasks?repo_id=${repoId}&status=completed`, { key });
    expect(byRepo.body.length).toBe(all.body.length - cancelled.body.length);
    const bad = await worker.api("GET", "/tasks?status=sleeping&limit=500", { key });
    expect(bad.status).toBe(400);
    expect(bad.body.error.details.map((d: { path: string }) => d.path).sort()).toEqual([
      "query.limit",
      "query.status",
    ]);
  });

  it("never passes a secret in a description or a file to the model or the events", async () => {
    const token = `ghp_${"Z".repeat(36)}`;
    const before = model.requests.length;
    const created = await worker.api("POST", "/tasks", {
      key,
      body: {
        workspace_id: workspaceId,
        repo_id: repoId,
        description: `Rotate the token ${token} and use ${key} for the API`,
      },
    });
    const stream = await openTaskStream(worker.url, created.body.id, key);
    await stream.waitFor((e) => e.event_type === "phase" && e.phase === "AWAITING_APPROVAL");
    const sent = JSON.stringify(model.requests.slice(before).map((r) => r.body));
    expect(sent).toContain("Rotate the token [REDACTED]");
    // The file the planner reads carries a token too: it reaches the prompt redacted.
    expect(sent).toContain("deploy token: [REDACTED]");
    expect(sent).not.toContain(FILE_TOKEN);
    expect(sent).not.toContain(token);
    expect(sent).not.toContain(key);
    const stored = JSON.stringify(stream.events);
    expect(stored).not.toContain(token);
    expect(stored).not.toContain(key);
    await worker.api("POST", `/tasks/${created.body.id}/cancel`, { key });
  }, 20_000);

  it("closes an open stream when its key is revoked", async () => {
    const extra = await worker.api("POST", "/keys/generate", {
      key,
      body: { name: "short-lived" },
    });
    const created = await worker.api("POST", "/tasks", {
      key,
      body: { workspace_id: workspaceId, repo_id: repoId, description: "Watch me" },
    });
    const stream = await openTaskStream(worker.url, created.body.id, extra.body.key);
    await stream.waitFor((e) => e.event_type === "phase" && e.phase === "AWAITING_APPROVAL");
    expect((await worker.api("DELETE", `/keys/${extra.body.id}`, { key })).status).toBe(204);
    expect(await stream.closed).toBe(1008);
  }, 20_000);

  it("keeps accounts apart and rejects bad input", async () => {
    const other = await worker.signup("other");
    const mine = await worker.api("GET", "/tasks?limit=1", { key });
    const id = mine.body[0].id as string;
    expect((await worker.api("GET", `/tasks/${id}`, { key: other.key })).status).toBe(404);
    expect((await worker.api("POST", `/tasks/${id}/cancel`, { key: other.key })).status).toBe(404);
    await expect(openTaskStream(worker.url, id, other.key)).rejects.toThrow(/404/);
    await expect(openTaskStream(worker.url, id, "fmn_nope")).rejects.toThrow(/401/);
    expect((await worker.api("GET", "/tasks", { key: other.key })).body).toEqual([]);
    const foreignRepo = await worker.api("POST", "/tasks", {
      key: other.key,
      body: { workspace_id: workspaceId, repo_id: repoId, description: "x" },
    });
    expect(foreignRepo.status).toBe(404);

    const cases: Array<[unknown, string]> = [
      [{ workspace_id: workspaceId, repo_id: repoId }, "description"],
      [{ workspace_id: workspaceId, repo_id: repoId, description: "" }, "description"],
      [
        { workspace_id: workspaceId, repo_id: repoId, description: "x".repeat(20_001) },
        "description",
      ],
      [
        { workspace_id: workspaceId, repo_id: repoId, description: "x", auto_approve: "yes" },
        "auto_approve",
      ],
      [
        {
          workspace_id: workspaceId,
          repo_id: repoId,
          description: "x",
          skill_name: "no-such-skill",
        },
        "skill_name",
      ],
      [
        { workspace_id: workspaceId, repo_id: repoId, description: "x", agent_name: "nobody" },
        "agent_name",
      ],
      [{ workspace_id: workspaceId, repo_id: repoId, description: "x", extra: 1 }, "extra"],
    ];
    for (const [body, field] of cases) {
      const res = await worker.api("POST", "/tasks", { key, body });
      expect(res.status, JSON.stringify(body).slice(0, 80)).toBe(400);
      expect(res.body.error.code).toBe("validation_failed");
      expect(JSON.stringify(res.body.error.details)).toContain(field);
    }
    const withSkill = await worker.api("POST", "/tasks", {
      key,
      body: {
        workspace_id: workspaceId,
        repo_id: repoId,
        description: "x",
        skill_name: "add-tests",
      },
    });
    expect(withSkill.status).toBe(201);
    expect(withSkill.body.skill_name).toBe("add-tests");
  });
});

describe("failures end in FAILED with a readable error", () => {
  let server: TestServer;
  let serverKey: string;
  let failingModel: FakeModel;
  let ws: string;

  beforeAll(async () => {
    failingModel = await startFakeModel(() => ({
      toolCalls: [{ name: "list_files", arguments: {} }],
      usage: { prompt_tokens: 400_000, completion_tokens: 1000 },
    }));
  });
  afterAll(async () => {
    await server?.stop();
    await failingModel?.close();
  });

  async function runTask(
    env: Record<string, string>,
    repoUrl = repo.dir,
    beforeTask?: () => Promise<void>,
  ) {
    await server?.stop();
    server = await startTestServer({ workers: true, env: { EVENT_POLL_MS: "50", ...env } });
    ({ key: serverKey } = await server.signup());
    const created = await server.api("POST", "/workspaces", {
      key: serverKey,
      body: { name: "w", repos: [{ name: "acme/x", clone_url: repoUrl }] },
    });
    ws = created.body.id;
    await beforeTask?.();
    const task = await server.api("POST", "/tasks", {
      key: serverKey,
      body: { workspace_id: ws, repo_id: "acme/x", description: "Do something" },
    });
    const stream = await openTaskStream(server.url, task.body.id, serverKey);
    const error = await stream.waitFor((e) => e.event_type === "error");
    expect(await stream.closed).toBe(1000);
    const final = await server.api("GET", `/tasks/${task.body.id}`, { key: serverKey });
    expect(final.body).toMatchObject({ status: "failed", phase: "FAILED", error: error.error });
    return { error: String(error.error), events: stream.events };
  }

  it("with no model configured, at PLANNING, naming the variables to set", async () => {
    const { error, events } = await runTask({});
    expect(phases(events)).toEqual(["QUEUED", "CLONING", "INDEXING", "PLANNING", "FAILED"]);
    expect(error).toMatch(/LLM_API_KEY/);
    expect(error).toMatch(/LLM_BASE_URL/);
  }, 60_000);

  it("when the budget is used up", async () => {
    const { error } = await runTask({
      LLM_BASE_URL: failingModel.baseUrl,
      LLM_MODEL: "fake",
      LLM_PRICE_INPUT_PER_MTOK: "3",
      LLM_PRICE_OUTPUT_PER_MTOK: "15",
      MAX_TASK_COST_USD: "2",
    });
    // Two calls of $1.215 each pass the $2 budget.
    expect(error).toMatch(/budget is used up: \$2\.4300 spent of \$2\.00 \(MAX_TASK_COST_USD\)/);
  }, 60_000);

  it("when the repository cannot be cloned", async () => {
    // A local path is checked when the workspace is made; this one goes away after that.
    const gone = await createGitRepo({ "README.md": "gone\n" });
    const { error, events } = await runTask({}, gone.dir, () =>
      rm(gone.dir, { recursive: true, force: true }),
    );
    expect(phases(events)).toEqual(["QUEUED", "CLONING", "FAILED"]);
    expect(error).toMatch(/^git failed while cloning the repository/);
  }, 60_000);
});
