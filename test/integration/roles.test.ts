// test-matrix: runtime-sensitive: the web and worker roles as processes of this Node, sharing
// one server.
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { MongoClient } from "mongodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort, serverAccepts } from "../../src/db/embedded.js";
import { fakeModelEnv, startFakeModel, type FakeModel } from "../helpers/fake-model.js";
import { createGitRepo, type GitFixture } from "../helpers/git-repo.js";

/*
 * The Procfile's two roles as two real processes on one DATA_DIR and the default embedded
 * database: `web` (RUN_WORKERS=false) serves the API, `worker` runs the task; whichever
 * starts first runs the database server and the other attaches to its socket.
 */

const root = path.resolve(import.meta.dirname, "../..");
const main = path.join(root, "dist", "main.js");
const children: ChildProcess[] = [];
let dataDir: string;
let repo: GitFixture;
let model: FakeModel;

beforeAll(async () => {
  if (!existsSync(main))
    await promisify(execFile)("npx", ["tsc", "-p", "tsconfig.build.json"], { cwd: root });
  dataDir = await mkdtemp(path.join(os.tmpdir(), "foreman-roles-"));
  repo = await createGitRepo({ "src/app.ts": "export const answer = 42;\n" });
  model = await startFakeModel((request) =>
    request.tools.includes("finish")
      ? { toolCalls: [{ name: "finish", arguments: { summary: "Nothing to change." } }] }
      : {
          toolCalls: [
            {
              name: "submit_plan",
              arguments: {
                summary: "Look at the answer.",
                steps: [{ title: "Read", description: "Read it.", files: ["src/app.ts"] }],
              },
            },
          ],
        },
  );
}, 120_000);

afterAll(async () => {
  for (const child of children) if (child.exitCode === null) child.kill("SIGKILL");
  await model?.close();
  await repo?.remove();
  await rm(dataDir, { recursive: true, force: true });
});

function startRole(role: "web" | "worker", port: number): ChildProcess {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    ...fakeModelEnv(model, "sk-fake-roles-key-0123456789abcdef"),
    PORT: String(port),
    HOST: "127.0.0.1",
    DATA_DIR: dataDir,
    LOG_LEVEL: "warn",
    TASK_POLL_MS: "200",
    // The test clones a local repository (the clone URL policy refuses it otherwise).
    ALLOW_LOCAL_REPOS: "true",
    // The Procfile's lines: `web: RUN_WORKERS=false node dist/main.js`, `worker: ... worker`.
    ...(role === "web" ? { RUN_WORKERS: "false" } : {}),
  };
  delete env.MONGODB_URI;
  const child = spawn(process.execPath, role === "web" ? [main] : [main, "worker"], {
    env,
    stdio: ["ignore", "ignore", "pipe"],
  });
  let output = "";
  child.stderr!.on("data", (c: Buffer) => (output = (output + c.toString()).slice(-4000)));
  child.once("exit", (code) => {
    if (code !== 0 && code !== null) console.error(`${role} exited ${code}: ${output}`);
  });
  children.push(child);
  return child;
}

async function until<T>(probe: () => Promise<T | undefined>, what: string): Promise<T> {
  const deadline = Date.now() + 90_000;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

function exited(child: ChildProcess): Promise<number | null> {
  return child.exitCode !== null
    ? Promise.resolve(child.exitCode)
    : new Promise((r) => child.once("exit", (code) => r(code)));
}

describe("web and worker roles on the embedded database", () => {
  it("share one server: the web role takes the task, the worker process runs it", async () => {
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const worker = startRole("worker", await freePort());
    const web = startRole("web", port);
    await until(
      async () => ((await fetch(`${base}/readyz`)).status === 200 ? true : undefined),
      "web",
    );

    const call = async (method: string, url: string, key?: string, body?: unknown) => {
      const res = await fetch(`${base}${url}`, {
        method,
        headers: {
          ...(key ? { "x-api-key": key } : {}),
          ...(body ? { "content-type": "application/json" } : {}),
        },
        body: body ? JSON.stringify(body) : undefined,
      });
      return { status: res.status, body: (await res.json()) as Record<string, any> }; // eslint-disable-line @typescript-eslint/no-explicit-any
    };
    const { key } = (await call("POST", "/keys/generate", undefined, { name: "roles" })).body;
    const ws = await call("POST", "/workspaces", key, {
      name: "w",
      repos: [{ name: "acme/app", clone_url: repo.dir }],
    });
    expect(ws.status).toBe(201);
    const created = await call("POST", "/tasks", key, {
      workspace_id: ws.body.id,
      repo_id: "acme/app",
      description: "Look at the answer",
      auto_approve: true,
    });
    expect(created.status).toBe(201);
    const done = await until(async () => {
      const res = await call("GET", `/tasks/${created.body.id}`, key);
      return ["completed", "failed"].includes(res.body.status) ? res : undefined;
    }, "the task's end");
    expect(done.body).toMatchObject({ status: "completed", phase: "DONE", error: null });
    expect(model.requests.length).toBeGreaterThanOrEqual(2);

    // One server on the data folder, run by one of the two roles.
    const running = JSON.parse(
      await readFile(path.join(dataDir, "db", "running.json"), "utf8"),
    ) as {
      uri: string;
      pid: number;
    };
    expect([web.pid, worker.pid]).toContain(running.pid);
    expect(running.uri).toMatch(/^mongodb:\/\/%2F/);

    // The worker ran the task's stages one after another in the job the web role queued: no
    // job of its own per stage (pipeline/runner.ts, stageJob).
    const client = await MongoClient.connect(running.uri, { directConnection: true });
    try {
      const jobs = await client
        .db("foreman")
        .collection("jobs")
        .find({ name: "pipeline.stage", "data.task_id": created.body.id })
        .toArray();
      expect(jobs.map((j) => j.data.stage)).toEqual(["clone"]);
    } finally {
      await client.close();
    }

    web.kill("SIGTERM");
    worker.kill("SIGTERM");
    expect(await exited(web)).toBe(0);
    expect(await exited(worker)).toBe(0);
    expect(await serverAccepts(running.uri)).toBe(false);
  }, 180_000);
});
