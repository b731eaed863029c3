import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentModel, systemText, userText } from "../helpers/agent-model.js";
import {
  fakeModelEnv,
  startFakeModel,
  type FakeModel,
  type FakeModelRequest,
} from "../helpers/fake-model.js";
import { createGitRepo, type GitFixture, placeholderRepo } from "../helpers/git-repo.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { openTaskStream } from "../helpers/ws.js";

/*
 * The built-in agents (docs/api.md, "Agents"): the catalogue of twenty in exactly seven
 * categories, the category filter, the single view with its template, and runs that create
 * tasks and claim quota. The last part runs a task on a real repository with the fake model and
 * checks that the agent's template and the account's own skill reach the planning prompts.
 */

const CATEGORIES = [
  "security",
  "quality",
  "testing",
  "docs",
  "performance",
  "infra",
  "architecture",
];

let server: TestServer;

beforeAll(async () => {
  server = await startTestServer();
});

afterAll(async () => {
  await server?.stop();
});

async function accountWithRepo(): Promise<{ key: string; workspaceId: string }> {
  const { key } = await server.signup();
  const ws = await server.api("POST", "/workspaces", {
    key,
    body: { name: "w", repos: [{ name: "acme/app", clone_url: await placeholderRepo() }] },
  });
  expect(ws.status).toBe(201);
  return { key, workspaceId: ws.body.id };
}

describe("GET /agents", () => {
  it("lists the 20 built-in agents, without templates, over exactly the seven categories", async () => {
    const { key } = await server.signup();
    const res = await server.api("GET", "/agents/", { key });
    expect(res.status).toBe(200);
    expect(res.body).toHaveLength(20);
    const names = res.body.map((a: { name: string }) => a.name);
    expect(new Set(names).size).toBe(20);
    for (const agent of res.body) {
      expect(Object.keys(agent).sort()).toEqual(["category", "description", "name"]);
      expect(agent.name).toMatch(/^[a-z0-9]+(-[a-z0-9]+)*$/);
      expect(agent.description.length).toBeGreaterThan(20);
    }
    // Every category has agents, and there is no other category.
    expect(new Set(res.body.map((a: { category: string }) => a.category))).toEqual(
      new Set(CATEGORIES),
    );
    expect(names).toEqual(
      expect.arrayContaining([
        "dependency-vulnerability-fixer",
        "secret-scanner",
        "unit-test-writer",
        "flaky-test-fixer",
        "readme-refresher",
        "ci-workflow-doctor",
        "dockerfile-optimizer",
      ]),
    );
  });

  it("lists the seven categories in order", async () => {
    const { key } = await server.signup();
    const res = await server.api("GET", "/agents/categories", { key });
    expect(res.status).toBe(200);
    expect(res.body).toEqual(CATEGORIES);
    expect((await server.api("GET", "/agents/categories/", { key })).body).toEqual(CATEGORIES);
  });

  it("filters by category, and the filtered lists add up to the whole catalogue", async () => {
    const { key } = await server.signup();
    let total = 0;
    for (const category of CATEGORIES) {
      const res = await server.api("GET", `/agents?category=${category}`, { key });
      expect(res.status).toBe(200);
      expect(res.body.length).toBeGreaterThan(0);
      for (const agent of res.body) expect(agent.category).toBe(category);
      total += res.body.length;
    }
    expect(total).toBe(20);
    const security = await server.api("GET", "/agents/?category=security", { key });
    expect(security.body.map((a: { name: string }) => a.name)).toContain("injection-hardener");
  });

  it("answers 400 for an unknown category", async () => {
    const { key } = await server.signup();
    for (const category of ["devops", "Security", ""]) {
      const res = await server.api("GET", `/agents?category=${category}`, { key });
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe("validation_failed");
      expect(res.body.error.details[0].path).toBe("query.category");
    }
  });

  it("needs a key", async () => {
    expect((await server.api("GET", "/agents")).status).toBe(401);
    expect((await server.api("GET", "/agents/secret-scanner")).status).toBe(401);
  });
});

describe("GET /agents/{name}", () => {
  it("shows an agent with a template that says what to look for, change, verify and leave", async () => {
    const { key } = await server.signup();
    const list = await server.api("GET", "/agents", { key });
    const templates = new Set<string>();
    for (const { name } of list.body as Array<{ name: string }>) {
      const res = await server.api("GET", `/agents/${name}`, { key });
      expect(res.status).toBe(200);
      expect(Object.keys(res.body).sort()).toEqual([
        "category",
        "description",
        "name",
        "task_template",
      ]);
      const template: string = res.body.task_template;
      for (const part of ["Look for:", "Change:", "Verify:", "Do not touch:"])
        expect(template, `${name} has "${part}"`).toContain(part);
      const lines = template.split("\n").length;
      expect(lines, `${name} has 6..15 lines`).toBeGreaterThanOrEqual(6);
      expect(lines, `${name} has 6..15 lines`).toBeLessThanOrEqual(15);
      templates.add(template);
    }
    expect(templates.size).toBe(20);
  });

  it("answers 404 for an unknown agent", async () => {
    const { key } = await server.signup();
    for (const name of ["no-such-agent", "Secret-Scanner"]) {
      const res = await server.api("GET", `/agents/${name}`, { key });
      expect(res.status).toBe(404);
      expect(res.body.error.code).toBe("not_found");
    }
  });
});

describe("the OpenAPI document", () => {
  it("describes the agent routes, the category enum and the run's statuses", async () => {
    const doc = (await server.api("GET", "/openapi.json")).body;
    const list = doc.paths["/agents"].get;
    expect(list.parameters).toEqual([
      expect.objectContaining({ name: "category", in: "query", required: false }),
      expect.objectContaining({ name: "limit", in: "query", required: false }),
      expect.objectContaining({ name: "cursor", in: "query", required: false }),
    ]);
    expect(list.parameters[0].schema.enum).toEqual(CATEGORIES);
    expect(doc.paths["/agents/categories"].get).toBeDefined();
    expect(doc.paths["/agents/{name}"].get.responses).toHaveProperty("404");
    const run = doc.paths["/agents/{name}/run"].post;
    expect(Object.keys(run.responses)).toEqual(expect.arrayContaining(["201", "404", "429"]));
    // The body is a named component (docs/api.md, "GET /openapi.json").
    const runBody = run.requestBody.content["application/json"].schema.$ref.split("/").pop();
    expect(doc.components.schemas[runBody].required).toEqual(["workspace_id", "repo_id"]);
  });
});

describe("POST /agents/{name}/run", () => {
  it("creates a queued task with the agent's template and name, and claims quota", async () => {
    const { key, workspaceId } = await accountWithRepo();
    const agent = (await server.api("GET", "/agents/flaky-test-fixer", { key })).body;
    const res = await server.api("POST", "/agents/flaky-test-fixer/run", {
      key,
      body: { repo_id: "acme/app", workspace_id: workspaceId, auto_approve: true },
    });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      description: agent.task_template,
      agent_name: "flaky-test-fixer",
      skill_name: null,
      status: "queued",
      phase: "QUEUED",
      auto_approve: true,
      workspace_id: workspaceId,
      pr_url: null,
      error: null,
    });
    expect(res.body.id).toMatch(/^task_/);
    const read = await server.api("GET", `/tasks/${res.body.id}/`, { key });
    expect(read.status).toBe(200);
    expect(read.body.agent_name).toBe("flaky-test-fixer");
    expect((await server.api("GET", "/keys/me", { key })).body.tasks_this_month).toBe(1);
  });

  it("appends extra instructions and applies a skill when given (extensions)", async () => {
    const { key, workspaceId } = await accountWithRepo();
    const agent = (await server.api("GET", "/agents/unit-test-writer", { key })).body;
    const res = await server.api("POST", "/agents/unit-test-writer/run/", {
      key,
      body: {
        repo_id: "acme/app",
        workspace_id: workspaceId,
        auto_approve: false,
        instructions: "Start with src/parser.ts.",
        skill_name: "add-tests",
      },
    });
    expect(res.status).toBe(201);
    expect(res.body.description.startsWith(agent.task_template)).toBe(true);
    expect(res.body.description.endsWith("Start with src/parser.ts.")).toBe(true);
    expect(res.body.skill_name).toBe("add-tests");
    expect(res.body.auto_approve).toBe(false);
  });

  it("refuses unknown agents, foreign workspaces and bad bodies without claiming quota", async () => {
    const { key, workspaceId } = await accountWithRepo();
    const other = await accountWithRepo();
    const body = { repo_id: "acme/app", workspace_id: workspaceId, auto_approve: false };
    const unknown = await server.api("POST", "/agents/no-such-agent/run", { key, body });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe("not_found");
    const foreign = await server.api("POST", "/agents/secret-scanner/run", {
      key,
      body: { ...body, workspace_id: other.workspaceId },
    });
    expect(foreign.status).toBe(404);
    const missing = await server.api("POST", "/agents/secret-scanner/run", {
      key,
      body: { repo_id: "acme/app" },
    });
    expect(missing.status).toBe(400);
    const extra = await server.api("POST", "/agents/secret-scanner/run", {
      key,
      body: { ...body, description: "not a field of a run" },
    });
    expect(extra.status).toBe(400);
    const badSkill = await server.api("POST", "/agents/secret-scanner/run", {
      key,
      body: { ...body, skill_name: "no-such-skill" },
    });
    expect(badSkill.status).toBe(400);
    expect(badSkill.body.error.details[0].path).toBe("skill_name");
    expect((await server.api("GET", "/keys/me", { key })).body.tasks_this_month).toBe(0);
  });

  it("answers 429 when the month's allowance is used up", async () => {
    const { key, workspaceId } = await accountWithRepo();
    const body = { repo_id: "acme/app", workspace_id: workspaceId, auto_approve: false };
    for (let i = 0; i < 10; i += 1)
      expect((await server.api("POST", "/agents/readme-refresher/run", { key, body })).status).toBe(
        201,
      );
    const refused = await server.api("POST", "/agents/readme-refresher/run", { key, body });
    expect(refused.status).toBe(429);
    expect(refused.body.error.code).toBe("monthly_limit_reached");
    const tasks = await server.api("GET", "/tasks?limit=200", { key });
    expect(tasks.body).toHaveLength(10);
    expect(
      tasks.body.every((t: { agent_name: string }) => t.agent_name === "readme-refresher"),
    ).toBe(true);
  });
});

describe("an agent run on a repository", () => {
  let repo: GitFixture;
  let model: FakeModel;
  let worker: TestServer;
  const planRequests: FakeModelRequest[] = [];

  beforeAll(async () => {
    repo = await createGitRepo({
      "README.md": "# demo\n",
      "src/clock.test.ts": "test('ticks', async () => { await sleep(100); });\n",
    });
    model = await startFakeModel(
      agentModel({
        plan: (request) => {
          planRequests.push(request);
          return [
            {
              name: "submit_plan",
              arguments: {
                summary: "Wait for the event instead of sleeping.",
                steps: [{ title: "Fix the test", description: "", files: ["src/clock.test.ts"] }],
              },
            },
          ];
        },
      }),
    );
    worker = await startTestServer({
      workers: true,
      env: { ...fakeModelEnv(model, "sk-agents-test-model-key-0123456789"), EVENT_POLL_MS: "50" },
    });
  }, 60_000);

  afterAll(async () => {
    await worker?.stop();
    await model?.close();
    await repo?.remove();
  });

  it("puts the agent's template and the account's own skill into the planning prompts", async () => {
    const { key } = await worker.signup();
    const ws = await worker.api("POST", "/workspaces", {
      key,
      body: { name: "local", repos: [{ name: "acme/clock", clone_url: repo.dir }] },
    });
    const addition = "Always name the flaky test's root cause in the plan summary (marker 7f3a).";
    const skill = await worker.api("POST", "/skills", {
      key,
      body: {
        name: "root-cause-first",
        description: "Name causes.",
        system_prompt_addition: addition,
      },
    });
    expect(skill.status).toBe(201);
    const agent = (await worker.api("GET", "/agents/flaky-test-fixer", { key })).body;
    const run = await worker.api("POST", "/agents/flaky-test-fixer/run", {
      key,
      body: {
        repo_id: "acme/clock",
        workspace_id: ws.body.id,
        auto_approve: false,
        skill_name: "root-cause-first",
      },
    });
    expect(run.status).toBe(201);
    const stream = await openTaskStream(worker.url, run.body.id, key);
    try {
      await stream.waitFor((e) => e.event_type === "plan", 30_000);
    } finally {
      stream.close();
    }
    const request = planRequests.at(-1)!;
    expect(userText(request)).toContain(agent.task_template);
    expect(systemText(request)).toContain('acting as the "flaky-test-fixer" agent');
    expect(systemText(request)).toContain(addition);
    // The template is the task; the system prompt does not repeat it.
    expect(systemText(request)).not.toContain(agent.task_template);
    await worker.api("POST", `/tasks/${run.body.id}/reject`, { key });
  });
});
