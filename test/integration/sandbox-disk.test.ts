import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentModel, type Script } from "../helpers/agent-model.js";
import { startFakeModel, type FakeModel, fakeModelEnv } from "../helpers/fake-model.js";
import { createGitRepo, type GitFixture } from "../helpers/git-repo.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { openTaskStream } from "../helpers/ws.js";

/*
 * Issue 26 (2): a task whose verification writes past TASK_DISK_LIMIT_MB ends FAILED saying
 * so (the command is stopped, the model never gets it as a failure to fix), and with less free
 * space under DATA_DIR than DATA_DIR_MIN_FREE_MB no task or scan is created at all (503).
 */

const LLM_KEY = "sk-disk-model-key-0011223344556677";

let repo: GitFixture;
let model: FakeModel;
let server: TestServer;
let full: TestServer;

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
    n > 0
      ? [{ name: "finish", arguments: { summary: "Wrote the notes." } }]
      : [{ name: "write_file", arguments: { path: "NOTES.md", content: "# Notes\n" } }],
  fix: () => [{ name: "finish", arguments: { summary: "Nothing to fix." } }],
};

async function addWorkspace(target: TestServer, key: string): Promise<string> {
  const ws = await target.api("POST", "/workspaces", {
    key,
    body: { name: "disk", repos: [{ name: "acme/disk", clone_url: repo.dir }] },
  });
  expect(ws.status).toBe(201);
  return ws.body.id as string;
}

beforeAll(async () => {
  // The repository's own test writes 40 files of 1 MB, slowly: far past a 5 MB budget.
  repo = await createGitRepo({
    "README.md": "# disk\n",
    ".github/foreman.yml": `verify:
  - name: test
    run: i=0; while [ $i -lt 40 ]; do head -c 1000000 /dev/zero > fixture-$i.bin; i=$((i+1)); sleep 0.1; done; echo all written
`,
  });
  model = await startFakeModel(agentModel(script));
  const env = { ...fakeModelEnv(model, LLM_KEY), EVENT_POLL_MS: "50", TASK_DISK_LIMIT_MB: "5" };
  // Web only, and a floor no disk reaches. Started first: the sandbox settings are the
  // process's, and the worker's server below sets them last.
  full = await startTestServer({ env: { ...env, DATA_DIR_MIN_FREE_MB: "16000000" } });
  server = await startTestServer({ workers: true, env });
}, 60_000);

afterAll(async () => {
  await server?.stop();
  await full?.stop();
  await model?.close();
  await repo?.remove();
});

describe("the disk budget of a task", () => {
  it("fails the task when its verification writes past TASK_DISK_LIMIT_MB", async () => {
    const { key } = await server.signup();
    const workspaceId = await addWorkspace(server, key);
    const created = await server.api("POST", "/tasks", {
      key,
      body: {
        workspace_id: workspaceId,
        repo_id: "acme/disk",
        description: "Add notes",
        auto_approve: true,
      },
    });
    expect(created.status).toBe(201);
    const stream = await openTaskStream(server.url, created.body.id, key);
    expect(await stream.closed).toBe(1000);
    const task = (await server.api("GET", `/tasks/${created.body.id}`, { key })).body;
    expect(task).toMatchObject({ status: "failed", phase: "FAILED" });
    expect(task.error).toMatch(
      /^The task's working copy grew past TASK_DISK_LIMIT_MB=5 MB while running `i=0; while .*`.*Raise TASK_DISK_LIMIT_MB/,
    );
    expect(stream.events.at(-1)).toMatchObject({ event_type: "error", error: task.error });
    // Stopped, not run to its end, and never handed to the model as a check to fix.
    const logs = stream.events.filter((e) => e.event_type === "log").map((e) => String(e.message));
    expect(logs.join("\n").split("\n")).not.toContain("all written");
    expect(logs.some((l) => /^test: .* was stopped after .*TASK_DISK_LIMIT_MB=5\)/.test(l))).toBe(
      true,
    );
    expect(logs.some((l) => l.startsWith("Fix attempt"))).toBe(false);
  }, 90_000);
});

describe("the free-space floor (DATA_DIR_MIN_FREE_MB)", () => {
  it("answers 503 insufficient_storage and creates no task and no scan", async () => {
    const { key } = await full.signup();
    const workspaceId = await addWorkspace(full, key);
    const res = await full.api("POST", "/tasks", {
      key,
      body: { workspace_id: workspaceId, repo_id: "acme/disk", description: "Add notes" },
    });
    expect(res.status).toBe(503);
    expect(res.headers.get("retry-after")).toBe("60");
    expect(res.body).toEqual({
      error: {
        code: "insufficient_storage",
        message: expect.stringMatching(
          /^The server is low on disk space \(\d+ MB free for its data, under DATA_DIR_MIN_FREE_MB=16000000\), so no task or scan is started now\./,
        ),
      },
    });
    expect(JSON.stringify(res.body)).not.toContain(full.service.config.dataDir);
    const tasks = await full.api("GET", "/tasks", { key });
    expect(tasks.status).toBe(200);
    expect(tasks.body).toEqual([]);

    const scan = await full.api("POST", "/health-reports/acme%2Fdisk/scan", { key });
    expect(scan.status).toBe(503);
    expect(scan.body.error.code).toBe("insufficient_storage");
    const history = await full.api("GET", "/health-reports/acme%2Fdisk/history", { key });
    expect(history.status).toBe(200);
    expect(history.body).toEqual([]);

    // Everything else still answers.
    expect((await full.api("GET", "/workspaces", { key })).status).toBe(200);
  });
});
