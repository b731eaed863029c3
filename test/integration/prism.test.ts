import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { roleOf, userText } from "../helpers/agent-model.js";
import {
  callTool,
  lastToolResult,
  startFakeModel,
  fakeModelEnv,
  type FakeModel,
  type FakeModelRequest,
  type FakeReply,
  type FakeReplyFunction,
} from "../helpers/fake-model.js";
import { createGitRepo, type GitFixture } from "../helpers/git-repo.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

/*
 * The spec planner: POST /prism/parse drives the fake model with submit_tasks and checks
 * its answer (asking again when it is invalid); POST /prism/queue checks a task graph,
 * claims the allowance all at once and creates the tasks; the workers start a dependent
 * task only after all its dependencies are DONE and fail it (transitively) when one fails.
 */

const LLM_KEY = "sk-prism-model-key-0a1b2c3d4e5f60718293";

const PLAN = {
  summary: "Look at the notes.",
  steps: [{ title: "Read the notes", description: "Nothing to change.", files: ["notes.txt"] }],
};

/** What the planner's conversations (submit_tasks offered) are answered with. */
let planner: FakeReplyFunction = () => ({ text: "no planner script" });

/**
 * Task runs: a plan for every task (late for "[slow]" ones, never for "[fails]" ones), then
 * an implementation that changes nothing, so a task ends DONE without a branch.
 */
function reply(request: FakeModelRequest): FakeReply | Promise<FakeReply> {
  if (request.tools.includes("submit_tasks")) return planner(request);
  const role = roleOf(request);
  const task = userText(request);
  if (role === "plan") {
    if (task.includes("[fails]")) return { text: "I will not plan this." };
    return callTool("submit_plan", PLAN, { delayMs: task.includes("[slow]") ? 2000 : 0 });
  }
  if (role === "implement") return callTool("finish", { summary: "Nothing needed changing." });
  return { text: `unexpected request (${role})` };
}

let model: FakeModel;
let server: TestServer;
let repo: GitFixture;

beforeAll(async () => {
  repo = await createGitRepo({ "README.md": "# notes\n", "notes.txt": "all good\n" });
  model = await startFakeModel(reply);
  server = await startTestServer({
    workers: true,
    env: { ...fakeModelEnv(model, LLM_KEY), TASK_POLL_MS: "200", EVENT_POLL_MS: "50" },
  });
}, 60_000);

afterAll(async () => {
  await server?.stop();
  await model?.close();
  await repo?.remove();
});

/**
 * A new account with a plain-git workspace on the fixture repository, or ("gone") on a
 * repository removed once the workspace exists (creation checks that it is one).
 */
async function account(
  on: "fixture" | "gone" = "fixture",
): Promise<{ key: string; workspaceId: string }> {
  const { key } = await server.signup();
  const gone = on === "gone" ? await createGitRepo({ "README.md": "# gone\n" }) : undefined;
  const ws = await server.api("POST", "/workspaces", {
    key,
    body: { name: "w", repos: [{ name: "acme/notes", clone_url: gone?.dir ?? repo.dir }] },
  });
  await gone?.remove();
  expect(ws.status).toBe(201);
  return { key, workspaceId: ws.body.id as string };
}

interface Item {
  id: number;
  description: string;
  skill: string | null;
  depends_on: number[];
  priority: number;
}

function item(id: number, depends_on: number[] = [], extra: Partial<Item> = {}): Item {
  return { id, description: `Task ${id}`, skill: null, depends_on, priority: 1, ...extra };
}

function plannerRequests(): FakeModelRequest[] {
  return model.requests.filter((r) => r.tools.includes("submit_tasks"));
}

/** Answers planner requests from `replies` in order; past the end, a text answer. */
function plannerScript(replies: FakeReply[]): FakeReplyFunction {
  let next = 0;
  return () => replies[next++] ?? { text: "script ran out" };
}

describe("POST /prism/parse", () => {
  it("answers the model's tasks in dependency order, ties by priority then id", async () => {
    const { key } = await account();
    const before = plannerRequests().length;
    planner = plannerScript([
      callTool("submit_tasks", {
        tasks: [
          item(4, [2, 3], { description: "Wire the export button to the API" }),
          item(3, [1], { description: "Add the CSV export endpoint", skill: "add-tests" }),
          item(2, [1], { description: "Add the export page", priority: 2 }),
          item(1, [], { description: "Add the reports table", priority: 3 }),
          item(5, [], { description: "Document the export" }),
        ],
      }),
    ]);
    const res = await server.api("POST", "/prism/parse", {
      key,
      body: { spec: "Users can export their reports as CSV from a new export page." },
    });
    expect(res.status).toBe(200);
    expect(res.body.map((t: Item) => t.id)).toEqual([5, 1, 3, 2, 4]);
    expect(res.body[2]).toEqual({
      id: 3,
      description: "Add the CSV export endpoint",
      skill: "add-tests",
      depends_on: [1],
      priority: 1,
    });
    const requests = plannerRequests().slice(before);
    expect(requests).toHaveLength(1);
    expect(JSON.stringify(requests[0]!.messages)).toContain("export their reports as CSV");
    // The model is told which skills exist.
    expect(JSON.stringify(requests[0]!.messages)).toContain("add-openapi-docs");
    // Parsing creates nothing and claims nothing.
    expect((await server.api("GET", "/keys/me", { key })).body.tasks_this_month).toBe(0);
  });

  it("tells the model what was wrong and accepts its corrected list", async () => {
    const { key } = await account();
    const before = plannerRequests().length;
    planner = plannerScript([
      callTool("submit_tasks", { tasks: [item(1, [3]), item(2), item(3, [1])] }),
      callTool("submit_tasks", { tasks: [item(1), item(2, [9]), item(3, [], { skill: "nope" })] }),
      callTool("submit_tasks", { tasks: [item(1), item(2, [1]), item(3, [1])] }),
    ]);
    const res = await server.api("POST", "/prism/parse", { key, body: { spec: "Build it." } });
    expect(res.status).toBe(200);
    expect(res.body.map((t: Item) => t.id)).toEqual([1, 2, 3]);
    const requests = plannerRequests().slice(before);
    expect(requests).toHaveLength(3);
    expect(lastToolResult(requests[1]!)).toContain("The dependencies form a cycle: 1 -> 3 -> 1.");
    const second = lastToolResult(requests[2]!);
    expect(second).toContain("Task 2 depends on 9, which is not in the list.");
    expect(second).toContain('Task 3 names the skill "nope", which does not exist');
  });

  it("gives up after 3 corrections with a 502 naming what was wrong", async () => {
    const { key } = await account();
    const before = plannerRequests().length;
    const bad = callTool("submit_tasks", { tasks: [item(1, [2]), item(2, [1])] });
    planner = plannerScript([bad, bad, bad, bad, bad, bad]);
    const res = await server.api("POST", "/prism/parse", { key, body: { spec: "Build it." } });
    expect(res.status).toBe(502);
    expect(res.body.error.code).toBe("upstream_unavailable");
    expect(res.body.error.message).toContain("still invalid after 4 submissions");
    expect(res.body.error.message).toContain("The dependencies form a cycle: 1 -> 2 -> 1.");
    expect(plannerRequests().length - before).toBe(4);
    expect(JSON.stringify(res.body)).not.toContain(LLM_KEY);
  });

  it("answers 502 when the model never submits, and 400 for a bad body", async () => {
    const { key } = await account();
    planner = () => ({ text: "Here are your tasks: build it." });
    const res = await server.api("POST", "/prism/parse", { key, body: { spec: "Build it." } });
    expect(res.status).toBe(502);
    expect(res.body.error.message).toMatch(/did not deliver a task list.*submit_tasks/);
    for (const body of [{}, { spec: "" }, { spec: "x", extra: 1 }, { spec: 5 }]) {
      const bad = await server.api("POST", "/prism/parse", { key, body });
      expect(bad.status).toBe(400);
      expect(bad.body.error.code).toBe("validation_failed");
    }
  });

  it("answers 503 naming the variables when no model is configured", async () => {
    const bare = await startTestServer();
    try {
      const { key } = await bare.signup();
      const res = await bare.api("POST", "/prism/parse", { key, body: { spec: "Build it." } });
      expect(res.status).toBe(503);
      expect(res.body.error.code).toBe("upstream_unavailable");
      expect(res.body.error.message).toMatch(/LLM_API_KEY/);
    } finally {
      await bare.stop();
    }
  });
});

describe("POST /prism/queue", () => {
  const missing = "gone"; // tasks there fail at CLONING: no model call

  async function queue(key: string, workspaceId: string, tasks: unknown, extra = {}) {
    return server.api("POST", "/prism/queue", {
      key,
      body: { tasks, repo_id: "acme/notes", workspace_id: workspaceId, ...extra },
    });
  }

  it("creates the tasks of a diamond in item order and answers its levels", async () => {
    const { key, workspaceId } = await account(missing);
    const tasks = [
      item(4, [2, 3]),
      item(2, [1], { priority: 2 }),
      item(3, [1], { skill: "add-tests" }),
      item(1),
    ];
    const res = await queue(key, workspaceId, tasks);
    expect(res.status).toBe(201);
    expect(res.body.execution_order).toEqual([[1], [3, 2], [4]]);
    const ids = res.body.queued as string[];
    expect(ids).toHaveLength(4);
    const [t4, t2, t3, t1] = await Promise.all(
      ids.map(async (id) => (await server.api("GET", `/tasks/${id}`, { key })).body),
    );
    expect(t4).toMatchObject({ description: "Task 4", workspace_id: workspaceId });
    expect([...t4.depends_on].sort()).toEqual([t2.id, t3.id].sort());
    expect(t2.depends_on).toEqual([t1.id]);
    expect(t3).toMatchObject({ depends_on: [t1.id], skill_name: "add-tests" });
    expect(t1.depends_on).toEqual([]);
    const stored = await server.service.db.models.Task.collection
      .find({ _id: { $in: ids as never[] } })
      .toArray();
    expect(stored.map((t) => t.source)).toEqual(["prism", "prism", "prism", "prism"]);
    expect((await server.api("GET", "/keys/me", { key })).body.tasks_this_month).toBe(4);
  });

  it("answers a chain as one level per task (and with a trailing slash)", async () => {
    const { key, workspaceId } = await account(missing);
    const res = await server.api("POST", "/prism/queue/", {
      key,
      body: {
        tasks: [item(1), item(2, [1]), item(3, [2])],
        repo_id: "acme/notes",
        workspace_id: workspaceId,
      },
    });
    expect(res.status).toBe(201);
    expect(res.body.execution_order).toEqual([[1], [2], [3]]);
  });

  it("is described in the OpenAPI document", async () => {
    const doc = (await server.api("GET", "/openapi.json")).body;
    const queueRef = doc.paths["/prism/queue"].post.requestBody.content["application/json"].schema;
    // The body is a named component (docs/api.md, "GET /openapi.json").
    const queueBody = doc.components.schemas[queueRef.$ref.split("/").pop()];
    expect(queueBody).toMatchObject({
      required: expect.arrayContaining(["tasks", "repo_id", "workspace_id"]),
      additionalProperties: false,
    });
    expect(doc.paths["/prism/parse"].post.responses["200"]).toBeDefined();
    expect(doc.paths["/prism/queue"].post.responses["201"]).toBeDefined();
    expect(doc.paths["/prism/queue"].post.security).toEqual([{ apiKey: [] }]);
  });

  it("refuses a cycle and an unknown dependency with 400 naming them, creating nothing", async () => {
    const { key, workspaceId } = await account(missing);
    const cycle = await queue(key, workspaceId, [item(1, [3]), item(2), item(3, [1])]);
    expect(cycle.status).toBe(400);
    expect(cycle.body.error.code).toBe("validation_failed");
    expect(cycle.body.error.message).toBe("The dependencies form a cycle: 1 -> 3 -> 1.");
    expect(cycle.body.error.details).toEqual([
      { path: "body.tasks.0.depends_on", message: "The dependencies form a cycle: 1 -> 3 -> 1." },
    ]);

    const unknown = await queue(key, workspaceId, [item(1), item(2, [1, 7])]);
    expect(unknown.status).toBe(400);
    expect(unknown.body.error.message).toBe("Task 2 depends on 7, which is not in the list.");
    expect(unknown.body.error.details[0].path).toBe("body.tasks.1.depends_on");

    const duplicate = await queue(key, workspaceId, [item(1), item(1)]);
    expect(duplicate.status).toBe(400);
    expect(duplicate.body.error.message).toMatch(/^Id 1 is used twice/);

    const skill = await queue(key, workspaceId, [item(1, [], { skill: "no-such-skill" })]);
    expect(skill.status).toBe(400);
    expect(skill.body.error.details[0].path).toBe("body.tasks.0.skill");

    expect((await server.api("GET", "/tasks", { key })).body).toEqual([]);
    expect((await server.api("GET", "/keys/me", { key })).body.tasks_this_month).toBe(0);
  });

  it("accepts the account's own skill, not another account's", async () => {
    const { key, workspaceId } = await account(missing);
    const other = await account(missing);
    const skill = {
      name: "house-style",
      description: "Our house style.",
      system_prompt_addition: "Use tabs.",
    };
    expect((await server.api("POST", "/skills", { key, body: skill })).status).toBe(201);
    const own = await queue(key, workspaceId, [item(1, [], { skill: "house-style" })]);
    expect(own.status).toBe(201);
    const task = (await server.api("GET", `/tasks/${own.body.queued[0]}`, { key })).body;
    expect(task.skill_name).toBe("house-style");
    const foreign = await queue(other.key, other.workspaceId, [
      item(1, [], { skill: "house-style" }),
    ]);
    expect(foreign.status).toBe(400);
    expect(foreign.body.error.details[0].path).toBe("body.tasks.0.skill");
  });

  it("validates the body strictly", async () => {
    const { key, workspaceId } = await account(missing);
    const bodies: unknown[] = [
      { tasks: [item(1)], repo_id: "acme/notes" },
      { tasks: [], repo_id: "acme/notes", workspace_id: workspaceId },
      { tasks: [item(1)], repo_id: "acme/notes", workspace_id: workspaceId, extra: true },
      { tasks: [{ ...item(1), priority: 0 }], repo_id: "acme/notes", workspace_id: workspaceId },
      { tasks: [{ ...item(1), id: 1.5 }], repo_id: "acme/notes", workspace_id: workspaceId },
      { tasks: [{ ...item(1), owner: "x" }], repo_id: "acme/notes", workspace_id: workspaceId },
      { tasks: [{ id: 1 }], repo_id: "acme/notes", workspace_id: workspaceId },
      { tasks: [item(1)], repo_id: "acme/notes", workspace_id: workspaceId, auto_approve: "y" },
    ];
    for (const body of bodies) {
      const res = await server.api("POST", "/prism/queue", { key, body });
      expect(res.status, JSON.stringify(body)).toBe(400);
    }
    // Defaults: skill null, depends_on [], priority 1, auto_approve false.
    const res = await queue(key, workspaceId, [{ id: 7, description: "Only this" }]);
    expect(res.status).toBe(201);
    expect(res.body.execution_order).toEqual([[7]]);
    const task = (await server.api("GET", `/tasks/${res.body.queued[0]}`, { key })).body;
    expect(task).toMatchObject({ skill_name: null, depends_on: [], auto_approve: false });
  });

  it("is all or nothing on the monthly allowance", async () => {
    const { key, workspaceId } = await account(missing);
    const body = { workspace_id: workspaceId, repo_id: "acme/notes", description: "x" };
    for (let i = 0; i < 8; i += 1)
      expect((await server.api("POST", "/tasks", { key, body })).status).toBe(201);

    const refused = await queue(key, workspaceId, [item(1), item(2, [1]), item(3)]);
    expect(refused.status).toBe(429);
    expect(refused.body.error.code).toBe("monthly_limit_reached");
    expect((await server.api("GET", "/tasks?limit=200", { key })).body).toHaveLength(8);
    expect((await server.api("GET", "/keys/me", { key })).body.tasks_this_month).toBe(8);

    const fits = await queue(key, workspaceId, [item(1), item(2, [1])]);
    expect(fits.status).toBe(201);
    expect((await server.api("GET", "/tasks?limit=200", { key })).body).toHaveLength(10);
    expect((await server.api("GET", "/keys/me", { key })).body.tasks_this_month).toBe(10);
  });

  it("answers 404 for another account's workspace and claims nothing", async () => {
    const mine = await account(missing);
    const theirs = await account(missing);
    const res = await queue(mine.key, theirs.workspaceId, [item(1)]);
    expect(res.status).toBe(404);
    expect((await server.api("GET", "/keys/me", { key: mine.key })).body.tasks_this_month).toBe(0);
    expect((await server.api("GET", "/tasks", { key: theirs.key })).body).toEqual([]);
  });
});

describe("running a queued graph", () => {
  type Stored = {
    _id: string;
    status: string;
    error: string | null;
    started_at: Date | null;
    finished_at: Date | null;
  };

  async function stored(id: string): Promise<Stored> {
    return (await server.service.db.models.Task.collection.findOne({
      _id: id as never,
    })) as unknown as Stored;
  }

  /** Waits until every task has ended (status completed, failed or cancelled). */
  async function ended(ids: string[], timeoutMs = 90_000): Promise<Stored[]> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const tasks = await Promise.all(ids.map(stored));
      if (tasks.every((t) => ["completed", "failed", "cancelled"].includes(t.status))) return tasks;
      if (Date.now() > deadline)
        throw new Error(`not ended: ${tasks.map((t) => `${t._id}=${t.status}`).join(", ")}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** The phases a task's events went through (QUEUED is the task itself, not an event). */
  async function phases(id: string): Promise<string[]> {
    const events = await server.service.db.models.TaskEvent.collection
      .find({ task_id: id, type: "phase" })
      .sort({ seq: 1 })
      .toArray();
    return events.map((e) => String((e.payload as { phase?: string }).phase));
  }

  it("starts a level-1 task only after both level-0 tasks are DONE, levels in parallel", async () => {
    const { key, workspaceId } = await account();
    const res = await server.api("POST", "/prism/queue", {
      key,
      body: {
        repo_id: "acme/notes",
        workspace_id: workspaceId,
        auto_approve: true,
        tasks: [
          item(1, [], { description: "Level zero, slow [slow]" }),
          item(2, [], { description: "Level zero, quick" }),
          item(3, [1, 2], { description: "Level one" }),
          item(4, [3], { description: "Level two" }),
        ],
      },
    });
    expect(res.status).toBe(201);
    expect(res.body.execution_order).toEqual([[1, 2], [3], [4]]);
    const [a, b, c, d] = await ended(res.body.queued as string[]);
    for (const t of [a, b, c, d]) expect(t!.status, t!.error ?? "").toBe("completed");
    const at = (date: Date | null) => date!.getTime();
    // Level 0 ran at the same time: each started before the other finished.
    expect(at(b!.started_at)).toBeLessThan(at(a!.finished_at));
    expect(at(a!.started_at)).toBeLessThan(at(b!.finished_at));
    // The quick one finished first; level 1 still waited for the slow one.
    expect(at(b!.finished_at)).toBeLessThan(at(a!.finished_at));
    expect(at(c!.started_at)).toBeGreaterThanOrEqual(at(a!.finished_at));
    expect(at(c!.started_at)).toBeGreaterThanOrEqual(at(b!.finished_at));
    expect(at(d!.started_at)).toBeGreaterThanOrEqual(at(c!.finished_at));
    // Promptly: within a few intake polls (TASK_POLL_MS 200), not the 30 s safety scan.
    expect(at(c!.started_at) - at(a!.finished_at)).toBeLessThan(5000);
    expect(at(d!.started_at) - at(c!.finished_at)).toBeLessThan(5000);
    expect(await phases(c!._id)).toEqual([
      "CLONING",
      "INDEXING",
      "PLANNING",
      "IMPLEMENTING",
      "VERIFYING",
      "REVIEWING",
      "CLEANUP",
      "DONE",
    ]);
  }, 120_000);

  it("fails the dependents, transitively, when a dependency fails, naming the cause", async () => {
    const { key, workspaceId } = await account();
    const res = await server.api("POST", "/prism/queue", {
      key,
      body: {
        repo_id: "acme/notes",
        workspace_id: workspaceId,
        auto_approve: true,
        tasks: [
          item(1, [], { description: "Level zero that fails [fails]" }),
          item(2, [], { description: "Level zero that works [slow]" }),
          item(3, [1, 2], { description: "Level one" }),
          item(4, [3], { description: "Level two" }),
        ],
      },
    });
    expect(res.status).toBe(201);
    const [a, b, c, d] = await ended(res.body.queued as string[]);
    expect(a).toMatchObject({ status: "failed" });
    expect(a!.error).toMatch(/submit_plan/);
    expect(b).toMatchObject({ status: "completed" });
    expect(c!.status).toBe("failed");
    expect(c!.started_at ?? null).toBeNull();
    expect(c!.error).toBe(`Not started because dependency ${a!._id} failed: ${a!.error}`);
    expect(d!.status).toBe("failed");
    expect(d!.started_at ?? null).toBeNull();
    expect(d!.error).toBe(`Not started because dependency ${c!._id} failed: ${c!.error}`);
    // The failure reached the dependents promptly, without waiting for the other level-0 task.
    expect(c!.finished_at!.getTime()).toBeLessThan(b!.finished_at!.getTime());
    const view = (await server.api("GET", `/tasks/${d!._id}`, { key })).body;
    expect(view).toMatchObject({ status: "failed", phase: "FAILED" });
    expect(view.error).toContain(a!._id);
    expect(await phases(c!._id)).toEqual(["FAILED"]);
  }, 120_000);

  it("waits while a dependency awaits approval, and fails when it is cancelled", async () => {
    const { key, workspaceId } = await account();
    const res = await server.api("POST", "/prism/queue", {
      key,
      body: {
        repo_id: "acme/notes",
        workspace_id: workspaceId,
        auto_approve: false,
        tasks: [item(1, [], { description: "Needs approval" }), item(2, [1])],
      },
    });
    expect(res.status).toBe(201);
    const [first, second] = res.body.queued as string[];
    const deadline = Date.now() + 60_000;
    while ((await stored(first!)).status !== "awaiting_approval") {
      if (Date.now() > deadline) throw new Error("the first task never reached the plan gate");
      await new Promise((r) => setTimeout(r, 100));
    }
    // Nothing to await here: the test is that nothing happens. Five intake polls later
    // (TASK_POLL_MS 200) the dependent still waits.
    await new Promise((r) => setTimeout(r, 1000));
    const waiting = await stored(second!);
    expect(waiting.status).toBe("queued");
    expect(waiting.started_at ?? null).toBeNull();
    const cancelled = await server.api("POST", `/tasks/${first}/cancel`, { key });
    expect(cancelled.status).toBe(200);
    const [, dependent] = await ended([first!, second!], 10_000);
    expect(dependent!.status).toBe("failed");
    expect(dependent!.error).toMatch(
      new RegExp(`^Not started because dependency ${first} was cancelled: Cancelled by API key`),
    );
  }, 90_000);
});
