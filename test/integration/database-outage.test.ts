// test-matrix: solo: it stops and restarts the database; beside another heavy file on 2 cores
// it timed out (it passes alone, every time).
import { mkdtemp, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fakeModelEnv, startFakeModel, type FakeModel } from "../helpers/fake-model.js";
import { createGitRepo, type GitFixture } from "../helpers/git-repo.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

/*
 * The embedded database killed (SIGKILL) in the middle of a task, on a server of its own
 * (not the run's shared one): while it is away every API call answers 503
 * upstream_unavailable with Retry-After, never 500; its keeper restarts it; the task then
 * finishes.
 */

let dataDir: string;
let repo: GitFixture;
let model: FakeModel;
let server: TestServer;
let releasePlan: () => void = () => undefined;
const planGate = new Promise<void>((resolve) => (releasePlan = resolve));

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(os.tmpdir(), "foreman-outage-"));
  repo = await createGitRepo({ "src/app.ts": "export const answer = 42;\n" });
  model = await startFakeModel(async (request) => {
    if (request.tools.includes("finish"))
      return { toolCalls: [{ name: "finish", arguments: { summary: "Nothing to change." } }] };
    await planGate;
    return {
      toolCalls: [
        {
          name: "submit_plan",
          arguments: {
            summary: "Look at the answer.",
            steps: [{ title: "Read", description: "Read it.", files: ["src/app.ts"] }],
          },
        },
      ],
    };
  });
  server = await startTestServer({
    workers: true,
    env: {
      ...fakeModelEnv(model, "sk-fake-outage-key-0123456789abcdef"),
      MONGODB_URI: undefined,
      DATA_DIR: dataDir,
      TASK_POLL_MS: "200",
      // A request caught in the kill can wait on the driver; the deadline answers it.
      HTTP_HANDLER_TIMEOUT_S: "5",
    },
  });
}, 120_000);

afterAll(async () => {
  releasePlan();
  await server?.service.stop();
  await model?.close();
  await repo?.remove();
  await rm(dataDir, { recursive: true, force: true });
});

async function until<T>(probe: () => Promise<T | undefined>, what: string): Promise<T> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe("the embedded database killed mid-task", () => {
  it("answers 503 upstream_unavailable while it is away, restarts it, and the task finishes", async () => {
    const embedded = server.service.db.embedded!;
    expect(embedded.owner()).toBe(true);
    const { key } = await server.signup();
    const ws = await server.api("POST", "/workspaces", {
      key,
      body: { name: "w", repos: [{ name: "acme/app", clone_url: repo.dir }] },
    });
    const created = await server.api("POST", "/tasks", {
      key,
      body: {
        workspace_id: ws.body.id,
        repo_id: "acme/app",
        description: "Look at the answer",
        auto_approve: true,
      },
    });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    await until(async () => (model.requests.length > 0 ? true : undefined), "the plan call");

    // Held down: the supervising shell is stopped (SIGSTOP) so it cannot hand the lock on,
    // and the server is killed.
    const serverPid = embedded.serverPid()!;
    const shell = Number((await readFile(`/proc/${serverPid}/stat`, "utf8")).split(" ")[3]);
    process.kill(shell, "SIGSTOP");
    process.kill(serverPid, "SIGKILL");
    try {
      // Requests sent at the moment of the kill: answered 503 too (some within the deadline).
      const caught = await Promise.all(
        [0, 1, 2].map(() => server.api("GET", `/tasks/${id}`, { key })),
      );
      for (const res of caught) expect(res.status).toBe(503);
      for (const [method, url, body] of [
        ["GET", `/tasks/${id}`, undefined],
        ["GET", "/tasks", undefined],
        ["GET", `/workspaces/${ws.body.id}`, undefined],
        ["POST", "/tasks", { workspace_id: ws.body.id, repo_id: "acme/app", description: "x" }],
      ] as const) {
        const res = await server.api(method, url, { key, ...(body ? { body } : {}) });
        expect(res.status, `${method} ${url}`).toBe(503);
        expect(res.body.error.code).toBe("upstream_unavailable");
        expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0);
      }
      const health = await server.api("GET", "/healthz");
      expect(health.status).toBe(200);
      expect(health.body).toEqual({ status: "ok", database: "down" });
      expect((await server.api("GET", "/readyz")).status).toBe(503);
    } finally {
      process.kill(shell, "SIGCONT");
    }

    // Restarted by the service's keeper, with a new pid; the client reconnects by itself.
    await until(
      async () => (embedded.serverPid() && embedded.serverPid() !== serverPid ? true : undefined),
      "the restarted server",
    );
    const back = await until(async () => {
      const res = await server.api("GET", `/tasks/${id}`, { key });
      return res.status === 200 ? res : undefined;
    }, "the API back");
    expect(back.body).toMatchObject({ phase: "PLANNING", status: "running" });
    expect((await server.api("GET", "/healthz")).body).toEqual({ status: "ok", database: "ok" });

    // Killed again without holding it down: restarted within seconds, the task goes on.
    const second = embedded.serverPid()!;
    process.kill(second, "SIGKILL");
    await until(
      async () => (embedded.serverPid() && embedded.serverPid() !== second ? true : undefined),
      "the second restart",
    );
    releasePlan();
    const done = await until(async () => {
      const res = await server.api("GET", `/tasks/${id}`, { key });
      return res.status === 200 &&
        ["completed", "failed", "cancelled"].includes(res.body.status as string)
        ? res
        : undefined;
    }, "the task's end");
    expect(done.body).toMatchObject({ status: "completed", phase: "DONE", error: null });
  }, 300_000);
});
