import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema, type Progress } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentModel, greetScript } from "../helpers/agent-model.js";
import { fakeModelEnv, startFakeModel, type FakeModel } from "../helpers/fake-model.js";
import { createGitRepo, type GitFixture } from "../helpers/git-repo.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

/*
 * The MCP door (docs/mcp.md, "The MCP door") with the SDK's own client over Streamable HTTP against
 * the real service: a task from creation through both gates to DONE, watched with
 * wait_for_task's progress notifications; accounts isolated; bad and revoked keys refused.
 */

let repo: GitFixture;
let model: FakeModel;
let server: TestServer;
let key: string;
let workspaceId: string;
const clients: Client[] = [];

beforeAll(async () => {
  repo = await createGitRepo({ "README.md": "# greeter\n", "src/index.js": "export {};\n" });
  model = await startFakeModel(agentModel(greetScript));
  server = await startTestServer({
    workers: true,
    env: { ...fakeModelEnv(model, "sk-mcp-door-test-key-0123456789abcdef"), EVENT_POLL_MS: "50" },
  });
  ({ key } = await server.signup());
  const ws = await server.api("POST", "/workspaces", {
    key,
    body: { name: "local", repos: [{ name: "acme/greeter", clone_url: repo.dir }] },
  });
  expect(ws.status).toBe(201);
  workspaceId = ws.body.id;
}, 60_000);

afterAll(async () => {
  await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
  await server?.stop();
  await model?.close();
  await repo?.remove();
});

type Auth = { "x-api-key": string } | { authorization: string };

async function connect(headers: Auth): Promise<Client> {
  const client = new Client({ name: "mcp-door-test", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), {
    requestInit: { headers },
  });
  await client.connect(transport);
  clients.push(client);
  return client;
}

// Tool answers are JSON checked by the assertions that read them.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Answer = Record<string, any>;

/** A tool call's structured answer; fails the test on a tool error. */
async function call(
  client: Client,
  name: string,
  args: Record<string, unknown>,
  onprogress?: (p: Progress) => void,
): Promise<Answer> {
  const result = await client.callTool({ name, arguments: args }, CallToolResultSchema, {
    ...(onprogress ? { onprogress, resetTimeoutOnProgress: true } : {}),
    timeout: 120_000,
  });
  if (result.isError) throw new Error(`tool error: ${JSON.stringify(result.content)}`);
  return result.structuredContent as Answer;
}

/** A tool call that must fail: the REST error body it carries. */
async function refusal(client: Client, name: string, args: Record<string, unknown>) {
  const result = await client.callTool({ name, arguments: args });
  expect(result.isError).toBe(true);
  const [content] = result.content as Array<{ type: string; text: string }>;
  return JSON.parse(content!.text) as { error: { code: string; message: string } };
}

let taskId: string;

describe("the MCP door", () => {
  it("lists the tools with the REST door's schemas", async () => {
    const client = await connect({ "x-api-key": key });
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name);
    for (const name of [
      "create_task",
      "get_task",
      "list_tasks",
      "wait_for_task",
      "approve_plan",
      "reject_plan",
      "approve_diff",
      "reject_diff",
      "revise_task",
      "follow_up_task",
      "retry_task",
      "list_agents",
      "run_agent",
      "list_skills",
      "review_pull_request",
      "health_report",
    ])
      expect(names).toContain(name);
    const create = tools.find((t) => t.name === "create_task")!;
    expect(create.inputSchema.required).toEqual(
      expect.arrayContaining(["workspace_id", "repo_id", "description"]),
    );
    expect(create.outputSchema?.properties).toHaveProperty("phase");
    expect(tools.find((t) => t.name === "get_task")!.annotations?.readOnlyHint).toBe(true);
    const templates = await client.listResourceTemplates();
    expect(templates.resourceTemplates.map((t) => t.uriTemplate).sort()).toEqual([
      "task://{id}/diff",
      "task://{id}/plan",
      "task://{id}/trajectory",
    ]);
  });

  it("runs a task through both gates to DONE, with progress while waiting", async () => {
    const client = await connect({ authorization: `Bearer ${key}` });
    const created = await call(client, "create_task", {
      workspace_id: workspaceId,
      repo_id: "acme/greeter",
      description: "Add a greet helper",
    });
    expect(created).toMatchObject({ status: "queued", phase: "QUEUED", auto_approve: false });
    taskId = created.id;

    const progress: Progress[] = [];
    const atPlan = await call(client, "wait_for_task", { id: taskId, timeout_s: 120 }, (p) =>
      progress.push(p),
    );
    expect(atPlan.reached).toBe("gate");
    expect(atPlan.task).toMatchObject({ status: "awaiting_approval", phase: "AWAITING_APPROVAL" });
    expect(atPlan.task.plan[0]).toMatchObject({ step: 1, title: "Add greet()" });
    const messages = progress.map((p) => p.message);
    expect(messages).toContain("PLANNING (running)");
    expect(messages.at(-1)).toBe("AWAITING_APPROVAL (awaiting_approval)");
    expect(progress.map((p) => p.progress)).toEqual(progress.map((_, i) => i + 1));

    // At the gate already: wait answers at once.
    expect((await call(client, "wait_for_task", { id: taskId })).reached).toBe("gate");
    // The plan as a resource.
    const plan = await client.readResource({ uri: `task://${taskId}/plan` });
    const planText = (plan.contents[0] as { text: string }).text;
    expect(JSON.parse(planText).steps[0].files).toEqual(["src/greet.js"]);

    // The diff gate is not open yet.
    expect((await refusal(client, "approve_diff", { id: taskId })).error.code).toBe(
      "invalid_state",
    );
    expect((await call(client, "approve_plan", { id: taskId })).status).toBe("running");
    const atDiff = await call(client, "wait_for_task", { id: taskId, timeout_s: 180 });
    expect(atDiff.reached).toBe("gate");
    expect(atDiff.task).toMatchObject({ status: "awaiting_diff_approval" });
    expect(atDiff.task.diff).toContain("src/greet.js");
    const diff = await client.readResource({ uri: `task://${taskId}/diff` });
    expect((diff.contents[0] as { text: string }).text).toContain("+export const greet");

    await call(client, "approve_diff", { id: taskId });
    const end = await call(client, "wait_for_task", { id: taskId, until: "end", timeout_s: 180 });
    expect(end.reached).toBe("end");
    expect(end.task).toMatchObject({ status: "completed", phase: "DONE" });
    expect(end.task.branch).toBeTruthy();
    // The trajectory resource: the task's model calls in order, as GET /tasks/{id}/trajectory.
    const trajectory = await client.readResource({ uri: `task://${taskId}/trajectory` });
    const calls = (trajectory.contents[0] as { text: string }).text
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as { stage: string });
    expect(calls[0]!.stage).toBe("plan");
    expect(calls.map((c) => c.stage)).toContain("implement");
    const rest = await fetch(`${server.url}/tasks/${taskId}/trajectory`, {
      headers: { "x-api-key": key },
    });
    expect(rest.status).toBe(200);
    expect(await rest.text()).toBe((trajectory.contents[0] as { text: string }).text);

    const listed = await call(client, "list_tasks", { limit: 5 });
    expect(listed.tasks.map((t: { id: string }) => t.id)).toContain(taskId);
    expect((await call(client, "list_agents", {})).agents.length).toBeGreaterThanOrEqual(20);
    const skills = (await call(client, "list_skills", {})).skills;
    expect(skills.map((s: { name: string }) => s.name)).toContain("add-tests");
  }, 300_000);

  it("answers bad arguments with validation_failed and a bounded wait with timeout", async () => {
    const client = await connect({ "x-api-key": key });
    const bad = await refusal(client, "create_task", { workspace_id: workspaceId });
    expect(bad.error.code).toBe("validation_failed");
    expect(JSON.stringify(bad)).toContain("arguments.description");
    const extra = await refusal(client, "get_task", { id: taskId, sneaky: true });
    expect(extra.error.code).toBe("validation_failed");
    // A finished task: "end" at once; a gate wait on it too.
    expect((await call(client, "wait_for_task", { id: taskId, timeout_s: 1 })).reached).toBe("end");
  });

  it("keeps a second account's key away from the first's task through every tool", async () => {
    const other = await server.signup("other");
    const client = await connect({ "x-api-key": other.key });
    for (const [name, args] of [
      ["get_task", { id: taskId }],
      ["wait_for_task", { id: taskId, timeout_s: 1 }],
      ["approve_plan", { id: taskId }],
      ["reject_plan", { id: taskId }],
      ["approve_diff", { id: taskId }],
      ["reject_diff", { id: taskId, reason: "no" }],
      ["revise_task", { id: taskId, feedback: "more" }],
      ["follow_up_task", { id: taskId, description: "more" }],
      ["retry_task", { id: taskId }],
    ] as const) {
      const refused = await refusal(client, name, args);
      expect(refused.error.code, name).toBe("not_found");
    }
    await expect(client.readResource({ uri: `task://${taskId}/plan` })).rejects.toThrow(
      /No such task/,
    );
    await expect(client.readResource({ uri: `task://${taskId}/diff` })).rejects.toThrow(
      /No such task/,
    );
    await expect(client.readResource({ uri: `task://${taskId}/trajectory` })).rejects.toThrow(
      /No such task/,
    );
    const mine = await call(client, "list_tasks", {});
    expect(mine.tasks).toEqual([]);
    const created = await refusal(client, "create_task", {
      workspace_id: workspaceId,
      repo_id: "acme/greeter",
      description: "Use their workspace",
    });
    expect(created.error.code).toBe("not_found");
  });

  it("refuses a missing or bad key, and ends a session when its key is revoked", async () => {
    const anonymous = await fetch(`${server.url}/mcp`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    });
    expect(anonymous.status).toBe(401);
    expect((await anonymous.json()).error.code).toBe("unauthorized");
    await expect(connect({ "x-api-key": "fmn_not-a-real-key" })).rejects.toThrow();

    const second = await server.api("POST", "/keys/generate", { key, body: { name: "mcp" } });
    expect(second.status).toBe(201);
    const client = await connect({ "x-api-key": second.body.key });
    expect((await call(client, "get_task", { id: taskId })).id).toBe(taskId);
    const transport = client.transport as StreamableHTTPClientTransport;
    const sessionId = transport.sessionId!;
    expect(sessionId).toBeTruthy();
    // The first key of the account cannot take over the second key's session.
    const foreign = await fetch(`${server.url}/mcp`, {
      method: "POST",
      headers: {
        "x-api-key": key,
        "mcp-session-id": sessionId,
        "mcp-protocol-version": "2025-06-18",
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 7, method: "tools/list" }),
    });
    expect(foreign.status).toBe(404);

    const open = server.service.mcp!.sessions;
    const revoked = await server.api("DELETE", `/keys/${second.body.id}`, { key });
    expect(revoked.status).toBe(204);
    // The next request of the session is refused, and the session is gone.
    await expect(call(client, "get_task", { id: taskId })).rejects.toThrow(/unauthorized/);
    expect(server.service.mcp!.sessions).toBe(open - 1);
  });

  it("ends a session whose key is revoked while a wait is open on it", async () => {
    const third = await server.api("POST", "/keys/generate", { key, body: { name: "waiter" } });
    const client = await connect({ "x-api-key": third.body.key });
    const created = await call(client, "create_task", {
      workspace_id: workspaceId,
      repo_id: "acme/greeter",
      description: "Add a greet helper again",
    });
    // Only the end answers this wait, and the task stops at its plan gate: it stays open.
    const pending = client
      .callTool(
        { name: "wait_for_task", arguments: { id: created.id, until: "end", timeout_s: 120 } },
        CallToolResultSchema,
        { timeout: 120_000 },
      )
      .then(
        () => "answered",
        () => "failed",
      );
    await expect
      .poll(async () => (await server.api("GET", `/tasks/${created.id}`, { key })).body.status, {
        timeout: 60_000,
      })
      .toBe("awaiting_approval");
    const open = server.service.mcp!.sessions;
    expect((await server.api("DELETE", `/keys/${third.body.id}`, { key })).status).toBe(204);
    // No request of the client is needed: the door's key check closes it.
    await expect.poll(() => server.service.mcp!.sessions, { timeout: 15_000 }).toBe(open - 1);
    await client.close();
    expect(["answered", "failed"]).toContain(await pending);
  }, 120_000);
});
