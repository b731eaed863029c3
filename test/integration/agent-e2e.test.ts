import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentModel, roleOf, systemText, type Script } from "../helpers/agent-model.js";
import { startFakeModel, type FakeModel, fakeModelEnv } from "../helpers/fake-model.js";
import { CALC_BUGGY, CALC_FIX, CALC_PLAN, calcRepoFiles } from "../helpers/calc-repo.js";
import { createGitRepo, type GitFixture } from "../helpers/git-repo.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { openTaskStream, type StreamEvent } from "../helpers/ws.js";

/*
 * Whole tasks on a real local git repository (a small TypeScript project whose test fails),
 * driven by the fake model: plan → implement → verify fails → fix → verify passes → diff →
 * review → approve-diff → branch pushed; and the same with auto_approve. Every stored
 * event, log line and model request is scanned for the service's secrets.
 */

const LLM_KEY = "sk-e2e-model-key-5f1b2c3d4e5f60718293a4b5";
// In the service's own environment: a verification command must never see it.
const PROCESS_SECRET = "ghp_processEnvSecretValue0123456789abcdef";

const HALF_FIXED = "return Math.max(value, min);";
const BUGGY = CALC_BUGGY;
const FIXED = CALC_FIX;

const PLAN = CALC_PLAN;

const script: Script = {
  plan: () => [{ name: "submit_plan", arguments: PLAN }],
  implement: (_request, n) => {
    if (n === 0) return [{ name: "read_file", arguments: { path: "src/math.ts" } }];
    if (n === 1)
      return [
        {
          name: "edit_file",
          arguments: { path: "src/math.ts", old_text: "return value;", new_text: HALF_FIXED },
        },
        { name: "remember", arguments: { note: "Tests use node:test and run through tsx." } },
      ];
    return [{ name: "finish", arguments: { summary: "clamp now respects the lower bound." } }];
  },
  fix: (_request, n) => {
    if (n === 0) return [{ name: "run_command", arguments: { command: "npm test" } }];
    if (n === 1)
      return [
        {
          name: "edit_file",
          arguments: { path: "src/math.ts", old_text: HALF_FIXED, new_text: FIXED },
        },
      ];
    return [{ name: "finish", arguments: { summary: "clamp respects the upper bound too." } }];
  },
  review: () => [
    {
      name: "submit_review",
      arguments: {
        verdict: "approve",
        summary: "Correct and tested.",
        comments: [{ path: "src/math.ts", line: 6, body: "Clear.", severity: "info" }],
      },
    },
  ],
};

let repo: GitFixture;
let model: FakeModel;
let server: TestServer;
let key: string;
let workspaceId: string;
const logLines: string[] = [];
const apiBodies: string[] = [];

beforeAll(async () => {
  process.env.FOREMAN_E2E_GITHUB_TOKEN = PROCESS_SECRET;
  // The test prints the variables a leak would show first, so a failing run's output (in
  // the task log and the fixer's prompt) would carry them.
  repo = await createGitRepo(
    calcRepoFiles("(env | grep -E '^(CI|FOREMAN_E2E_GITHUB_TOKEN)=' || true)"),
  );
  model = await startFakeModel(agentModel(script));
  server = await startTestServer({
    workers: true,
    logLines,
    env: {
      ...fakeModelEnv(model, LLM_KEY),
      EVENT_POLL_MS: "50",
      COMMAND_TIMEOUT_S: "120",
    },
  });
  // Every answer of the API in this file, error bodies included, for the secret scan.
  const call = server.api;
  server.api = async (...args) => {
    const res = await call(...args);
    apiBodies.push(JSON.stringify(res.body));
    return res;
  };
  ({ key } = await server.signup());
  const ws = await server.api("POST", "/workspaces", {
    key,
    body: { name: "local", repos: [{ name: "acme/calc", clone_url: repo.dir }] },
  });
  expect(ws.status).toBe(201);
  workspaceId = ws.body.id;
}, 60_000);

afterAll(async () => {
  delete process.env.FOREMAN_E2E_GITHUB_TOKEN;
  await server?.stop();
  await model?.close();
  await repo?.remove();
});

async function createTask(description: string, autoApprove: boolean): Promise<string> {
  const res = await server.api("POST", "/tasks", {
    key,
    body: {
      workspace_id: workspaceId,
      repo_id: "acme/calc",
      description,
      auto_approve: autoApprove,
    },
  });
  expect(res.status).toBe(201);
  return res.body.id as string;
}

function phaseTrail(events: StreamEvent[]): string[] {
  return events
    .filter((e) => e.event_type === "phase")
    .map((e) => `${String(e.phase)}/${String(e.status)}`);
}

async function waitForStatus(id: string, status: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await server.api("GET", `/tasks/${id}`, { key });
    if (res.body.status === status) return;
    if (["failed", "cancelled", "completed"].includes(res.body.status) || Date.now() > deadline)
      throw new Error(`task is ${res.body.status}/${res.body.phase}: ${res.body.error}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe("the agent end to end", () => {
  let firstTask: string;

  it("fixes a failing test through the gates and pushes the branch", async () => {
    const id = (firstTask = await createTask("Make clamp respect both bounds", false));
    await waitForStatus(id, "awaiting_approval");
    expect((await server.api("POST", `/tasks/${id}/approve-diff`, { key })).status).toBe(409);
    expect((await server.api("POST", `/tasks/${id}/approve`, { key })).status).toBe(200);
    await waitForStatus(id, "awaiting_diff_approval", 120_000);

    const waiting = (await server.api("GET", `/tasks/${id}`, { key })).body;
    expect(waiting).toMatchObject({ phase: "REVIEWING", branch: null, pr_url: null });
    expect(waiting.diff).toContain(`+  ${FIXED}`);
    expect(waiting.diff).toContain("-  return value;");
    expect(waiting.review).toEqual({
      verdict: "approve",
      summary: "Correct and tested.",
      comments: [{ path: "src/math.ts", line: 6, body: "Clear.", severity: "info" }],
    });
    expect(waiting.checks).toMatchObject({
      source: "package.json",
      fix_attempts: 1,
      results: [{ name: "test", command: "npm run test", ok: true }],
    });
    expect(waiting.cost.input_tokens).toBeGreaterThan(0);

    const approved = await server.api("POST", `/tasks/${id}/approve-diff`, { key });
    expect(approved.status).toBe(200);
    const stream = await openTaskStream(server.url, id, key);
    expect(await stream.closed).toBe(1000);
    const events = stream.events;
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    expect(phaseTrail(events)).toEqual([
      "QUEUED/queued",
      "CLONING/running",
      "INDEXING/running",
      "PLANNING/running",
      "AWAITING_APPROVAL/awaiting_approval",
      "IMPLEMENTING/running",
      "VERIFYING/running",
      "FIXING/running",
      "VERIFYING/running",
      "REVIEWING/running",
      "REVIEWING/awaiting_diff_approval",
      "REVIEWING/running",
      "CLEANUP/running",
      "DONE/completed",
    ]);
    const diffEvents = events.filter((e) => e.event_type === "diff");
    expect(diffEvents).toHaveLength(1);
    expect(diffEvents[0]!.diff).toBe(waiting.diff);
    expect(events.at(-1)).toMatchObject({ event_type: "done", pr_url: null });
    const logs = events.filter((e) => e.event_type === "log").map((e) => String(e.message));
    expect(logs.some((l) => /test: `npm run test` failed with exit code 1/.test(l))).toBe(true);
    expect(logs.some((l) => l.startsWith("Fix attempt 1 of 3: test failed"))).toBe(true);
    expect(logs.some((l) => l.startsWith("Verification passed"))).toBe(true);

    const done = (await server.api("GET", `/tasks/${id}`, { key })).body;
    expect(done).toMatchObject({ status: "completed", phase: "DONE", pr_url: null, error: null });
    expect(done.branch).toMatch(/^foreman\/make-clamp-keep-values-inside-min-max-/);
    // The branch is on the remote with the fixed code; the default branch is untouched.
    expect(await repo.git("show", `${done.branch}:src/math.ts`)).toContain(FIXED);
    expect(await repo.git("show", "main:src/math.ts")).toBe(BUGGY);
    const message = await repo.git("log", "-1", "--format=%B", done.branch);
    expect(message).toMatch(/^Make clamp keep values inside \[min, max\]\n/);
    expect(message).toContain(`Task: ${id}`);

    // The fixer saw the failing check's output.
    const fixer = model.requests.find((r) => roleOf(r) === "fix");
    expect(JSON.stringify(fixer?.messages)).toContain("clamp keeps values in range");
  }, 180_000);

  it("with auto_approve runs to the end without waiting, using what the first task learned", async () => {
    const before = model.requests.length;
    const id = await createTask("Make clamp respect both bounds, again", true);
    const stream = await openTaskStream(server.url, id, key);
    expect(await stream.closed).toBe(1000);
    const trail = phaseTrail(stream.events);
    expect(trail.some((p) => p.includes("awaiting"))).toBe(false);
    expect(trail).toEqual([
      "QUEUED/queued",
      "CLONING/running",
      "INDEXING/running",
      "PLANNING/running",
      "IMPLEMENTING/running",
      "VERIFYING/running",
      "FIXING/running",
      "VERIFYING/running",
      "REVIEWING/running",
      "CLEANUP/running",
      "DONE/completed",
    ]);
    const task = (await server.api("GET", `/tasks/${id}`, { key })).body;
    expect(task.status).toBe("completed");
    expect(await repo.git("show", `${task.branch}:src/math.ts`)).toContain(FIXED);
    // Memory: the check that worked and the convention the agent noted, from task one.
    const memories = task.memories_used as Array<{
      kind: string;
      text: string;
      source_task_id: string;
    }>;
    expect(memories).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ kind: "verification", source_task_id: firstTask }),
        expect.objectContaining({
          kind: "convention",
          text: "Tests use node:test and run through tsx.",
          source_task_id: firstTask,
        }),
      ]),
    );
    const planner = model.requests.slice(before).find((r) => roleOf(r) === "plan")!;
    expect(systemText(planner)).toContain("`npm run test` (test) is a check that works");
    expect(systemText(planner)).toContain("Tests use node:test and run through tsx.");
  }, 180_000);

  it("an implementation that changes nothing ends DONE without a branch", async () => {
    const quiet: Script = {
      ...script,
      implement: () => [{ name: "finish", arguments: { summary: "Nothing needed changing." } }],
    };
    const clean = await createGitRepo({ "README.md": "# notes\n", "notes.txt": "all good\n" });
    const ws = await server.api("POST", "/workspaces", {
      key,
      body: { name: "clean", repos: [{ name: "acme/notes", clone_url: clean.dir }] },
    });
    expect(ws.status).toBe(201);
    const previous = model.requests.length;
    model.setReply(agentModel(quiet));
    try {
      const res = await server.api("POST", "/tasks", {
        key,
        body: {
          workspace_id: ws.body.id,
          repo_id: "acme/notes",
          description: "Check the notes (nothing to change)",
          auto_approve: true,
        },
      });
      expect(res.status).toBe(201);
      const id = res.body.id as string;
      const stream = await openTaskStream(server.url, id, key);
      expect(await stream.closed).toBe(1000);
      const task = (await server.api("GET", `/tasks/${id}`, { key })).body;
      expect(task).toMatchObject({
        status: "completed",
        phase: "DONE",
        pr_url: null,
        branch: null,
        diff: "",
      });
      const logs = stream.events
        .filter((e) => e.event_type === "log")
        .map((e) => String(e.message));
      expect(logs).toContain(
        "The implementation changed nothing: there is nothing to review or push.",
      );
      expect(stream.events.at(-1)).toMatchObject({ event_type: "done", pr_url: null });
      expect(logs).toContain("No checks to run: verification passes.");
      expect(model.requests.slice(previous).some((r) => roleOf(r) === "review")).toBe(false);
      expect(await clean.git("branch", "--list")).toBe("* main\n");
    } finally {
      model.setReply(agentModel(script));
      await clean.remove();
    }
  }, 120_000);

  it("rejecting the diff cancels the task and pushes nothing", async () => {
    const branchesBefore = await repo.git("branch", "--list");
    const id = await createTask("Make clamp respect both bounds (to be rejected)", false);
    await waitForStatus(id, "awaiting_approval");
    expect((await server.api("POST", `/tasks/${id}/approve`, { key })).status).toBe(200);
    await waitForStatus(id, "awaiting_diff_approval", 120_000);
    const rejected = await server.api("POST", `/tasks/${id}/reject-diff`, { key });
    expect(rejected.status).toBe(200);
    expect(rejected.body).toMatchObject({ status: "cancelled", phase: "FAILED", branch: null });
    expect(rejected.body.error).toMatch(
      /^The diff was rejected by API key .*; nothing was pushed\.$/,
    );
    expect(rejected.body.diff).toContain(FIXED);
    expect((await server.api("POST", `/tasks/${id}/approve-diff`, { key })).status).toBe(409);
    expect(await repo.git("branch", "--list")).toBe(branchesBefore);
    const memory = await server.service.db.models.RepoMemory.collection
      .find({ source_task_id: id })
      .toArray();
    expect(memory).toEqual([
      expect.objectContaining({
        kind: "rejection",
        text: expect.stringContaining("A diff was rejected for the task"),
      }),
    ]);
  }, 120_000);

  it("leaves no secret in stored events, logs, error bodies or model prompts", async () => {
    const secrets = [LLM_KEY, PROCESS_SECRET];
    const events = await server.service.db.models.TaskEvent.collection.find({}).toArray();
    expect(events.length).toBeGreaterThan(30);
    const tasks = await server.service.db.models.Task.collection.find({}).toArray();
    const haystacks = {
      events: JSON.stringify(events),
      tasks: JSON.stringify(tasks),
      logs: logLines.join("\n"),
      prompts: JSON.stringify(model.requests.map((r) => r.body)),
      responses: apiBodies.join("\n"),
    };
    expect(logLines.length).toBeGreaterThan(10);
    expect(apiBodies.some((b) => b.includes('"invalid_state"'))).toBe(true);
    // The checks' environment was printed, and it held no secret.
    expect(haystacks.prompts).toContain("CI=true");
    // Not even by name: the value would be redacted by its ghp_ shape, the name would not.
    expect(haystacks.prompts).not.toContain("FOREMAN_E2E_GITHUB_TOKEN=");
    expect(haystacks.prompts).toContain("Make clamp respect both bounds");
    for (const [where, text] of Object.entries(haystacks)) {
      for (const secret of secrets)
        expect(text.includes(secret), `${where} holds a secret`).toBe(false);
    }
  });
});
