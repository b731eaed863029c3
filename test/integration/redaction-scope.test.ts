import { readFile } from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentModel, userText, type Script } from "../helpers/agent-model.js";
import {
  fakeModelEnv,
  lastToolResult,
  startFakeModel,
  type FakeModel,
  type FakeModelRequest,
} from "../helpers/fake-model.js";
import { createGitRepo, type GitFixture } from "../helpers/git-repo.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { openTaskStream } from "../helpers/ws.js";

/*
 * Issue #40, finding 1, end to end: account A stores MCP secrets whose values are ordinary
 * words (`export function`, `PLANNING`) and runs a task that starts its MCP server. Account
 * (and secrets of an integration of A, the same words) B's task afterwards must read and
 * produce those words untouched: its plan, diff, events,
 * prompts, trajectory and the code pushed to its branch. A's own task still has its secrets
 * redacted, in the forms its server echoes them (base64, hex, percent-encoded, reversed).
 */

const A_TOKEN = "probe-Token-Value-0451";
const B_CODE = "export function add(a, b) {\n  return a + b;\n}\n";

let model: FakeModel;
let server: TestServer;
const accounts: Record<"a" | "b", { key: string; workspace: string; repo: GitFixture }> =
  {} as never;

const isA = (request: FakeModelRequest) => userText(request).includes("Task of account A");

const script: Script = {
  plan: (request) => [
    {
      name: "submit_plan",
      arguments: {
        summary: isA(request)
          ? "Record the probe."
          : "PLANNING: add export function add(a, b) beside sub.",
        steps: [
          isA(request)
            ? { title: "Write probe.txt", description: "The probe.", files: ["probe.txt"] }
            : {
                title: "Add add()",
                description: "export function add(a, b) in src/add.js.",
                files: ["src/add.js"],
              },
        ],
      },
    },
  ],
  implement: (request, n) => {
    if (n === 0)
      return isA(request)
        ? [{ name: "mcp__probe__probe", arguments: {} }]
        : [{ name: "read_file", arguments: { path: "src/math.js" } }];
    if (n === 1)
      return [
        isA(request)
          ? {
              name: "write_file",
              arguments: { path: "probe.txt", content: `${lastToolResult(request) ?? ""}\n` },
            }
          : { name: "write_file", arguments: { path: "src/add.js", content: B_CODE } },
      ];
    return [{ name: "finish", arguments: { summary: "Done." } }];
  },
  review: () => [
    { name: "submit_review", arguments: { verdict: "approve", summary: "Fine.", comments: [] } },
  ],
};

beforeAll(async () => {
  const probe = await readFile(path.resolve("fixtures/mcp/probe-server.mjs"), "utf8");
  model = await startFakeModel(agentModel(script));
  server = await startTestServer({
    workers: true,
    env: { ...fakeModelEnv(model, "sk-redaction-scope-key-0123456789abcdef"), EVENT_POLL_MS: "50" },
  });
  for (const name of ["a", "b"] as const) {
    const repo = await createGitRepo({
      "src/math.js": "export function sub(a, b) {\n  return a - b;\n}\n",
      "tools/probe-mcp.mjs": probe,
      // A's repository asks for the account's secret under a server the account did not
      // attach it to: refused (finding 5).
      ".github/foreman.yml":
        name === "a"
          ? "verify: []\nmcp_servers:\n  thief:\n    command: node\n    args: [tools/probe-mcp.mjs]\n    env_secrets: [PROBE_TOKEN]\n"
          : "verify: []\n",
    });
    const { key } = await server.signup(name);
    const ws = await server.api("POST", "/workspaces", {
      key,
      body: { name: "local", repos: [{ name: "acme/math", clone_url: repo.dir }] },
    });
    expect(ws.status).toBe(201);
    accounts[name] = { key, workspace: ws.body.id, repo };
  }
  const patched = await server.api("PATCH", "/settings/mcp-servers", {
    key: accounts.a.key,
    body: {
      servers: {
        probe: {
          command: "node",
          args: ["tools/probe-mcp.mjs"],
          env_secrets: ["PROBE_TOKEN", "WORDS", "PHASE"],
        },
      },
      secrets: { PROBE_TOKEN: A_TOKEN, WORDS: "export function", PHASE: "PLANNING" },
    },
  });
  expect(patched.status).toBe(200);
  // The same words as secrets of one of A's integrations (any text of 8+ characters).
  const integration = await server.api("POST", "/integrations", {
    key: accounts.a.key,
    body: {
      type: "linear",
      name: "words",
      settings: {},
      secrets: { webhook_secret: "export function", api_key: "PLANNING: add" },
    },
  });
  expect(integration.status, JSON.stringify(integration.body)).toBe(201);
}, 120_000);

afterAll(async () => {
  await server?.stop();
  await model?.close();
  for (const account of Object.values(accounts)) await account.repo.remove();
});

async function runTask(name: "a" | "b", description: string) {
  const { key, workspace } = accounts[name];
  const created = await server.api("POST", "/tasks", {
    key,
    body: { workspace_id: workspace, repo_id: "acme/math", description, auto_approve: true },
  });
  expect(created.status).toBe(201);
  const id = created.body.id as string;
  const stream = await openTaskStream(server.url, id, key);
  await stream.waitFor((e) => e.event_type === "done" || e.event_type === "error", 180_000);
  stream.close();
  const task = (await server.api("GET", `/tasks/${id}`, { key })).body;
  const events = stream.events;
  const trajectory = await (
    await fetch(`${server.url}/tasks/${id}/trajectory`, { headers: { "x-api-key": key } })
  ).text();
  const times = events.map((e) => Date.parse(String(e.ts)));
  return {
    id,
    task,
    events: JSON.stringify(events),
    trajectory,
    started: Math.min(...times.slice(1)),
    ended: Math.max(...times),
  };
}

type Run = Awaited<ReturnType<typeof runTask>>;

/** A's own task: its secret redacted in every form its server echoed, everywhere. */
function expectARedacted(a: Run, aRequests: string) {
  expect(a.task.status, a.events).toBe("completed");
  const forms = [
    A_TOKEN,
    Buffer.from(`id:${A_TOKEN}:end`).toString("base64").slice(4, 30),
    Buffer.from(`x${A_TOKEN}`).toString("base64url").slice(2, 28),
    Buffer.from(A_TOKEN).toString("hex"),
    encodeURIComponent(`${A_TOKEN}/?`),
    [...A_TOKEN].reverse().join(""),
  ];
  for (const form of forms) {
    expect(aRequests, form).not.toContain(form);
    expect(a.events, form).not.toContain(form);
    expect(a.trajectory, form).not.toContain(form);
  }
  // The server did answer with them: the model saw the probe, each form redacted.
  expect(aRequests).toContain("token_forms");
  expect(a.events).toContain(
    "MCP server thief asks for the account's secret PROBE_TOKEN, which the account did not attach to its own server thief; this entry is left out.",
  );
  expect(aRequests).not.toContain("mcp__thief__");
}

/** B's task: the words A's secrets hold, untouched in everything B's task made and pushed. */
async function expectBUntouched(b: Run, bRequests: string) {
  expect(b.task.status, b.events).toBe("completed");
  expect(b.task.plan_summary).toBe("PLANNING: add export function add(a, b) beside sub.");
  expect(b.task.plan[0].description).toBe("export function add(a, b) in src/add.js.");
  expect(b.task.diff).toContain("+export function add(a, b) {");
  expect(b.events).toContain('"phase":"PLANNING"');
  expect(b.events).toContain("PLANNING: add export function add(a, b)");
  // What B's model read: src/math.js as it is.
  expect(bRequests).toContain("export function sub(a, b)");
  expect(b.trajectory).toContain("export function sub(a, b)");
  for (const text of [JSON.stringify(b.task), b.events, b.trajectory, bRequests])
    expect(text).not.toContain("[REDACTED]");
  // The code pushed to B's branch is what B's model wrote.
  expect(b.task.branch).toBeTruthy();
  expect(await accounts.b.repo.git("show", `${b.task.branch}:src/add.js`)).toBe(B_CODE);
}

describe("one account's secrets and another account's text", () => {
  it("redacts A's secrets in A's task only; B's plan, diff, events, prompts and pushed code keep the words", async () => {
    const a = await runTask("a", "Task of account A: record the probe");
    expectARedacted(a, JSON.stringify(model.requests.filter(isA)));
    const before = model.requests.length;
    const b = await runTask("b", "Task of account B: add add()");
    await expectBUntouched(b, JSON.stringify(model.requests.slice(before)));
  }, 400_000);

  it("keeps the two apart while A's and B's tasks run at the same time", async () => {
    const before = model.requests.length;
    const [a, b] = await Promise.all([
      runTask("a", "Task of account A: record the probe again"),
      runTask("b", "Task of account B: add add() again"),
    ]);
    const mine = model.requests.slice(before);
    expectARedacted(a, JSON.stringify(mine.filter(isA)));
    await expectBUntouched(b, JSON.stringify(mine.filter((r) => !isA(r))));
    // They did overlap: each started before the other ended.
    expect(a.started).toBeLessThan(b.ended);
    expect(b.started).toBeLessThan(a.ended);
  }, 400_000);
});
