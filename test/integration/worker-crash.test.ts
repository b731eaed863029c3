import { execFile, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeModel, type FakeModel } from "../helpers/fake-model.js";
import { createGitRepo, type GitFixture } from "../helpers/git-repo.js";
import { spawnWorker, WORKER_MAIN } from "../helpers/worker.js";
import { startTestServer, testDatabaseUri, type TestServer } from "../helpers/server.js";
import { openTaskStream } from "../helpers/ws.js";

/*
 * A worker process killed with SIGKILL in the middle of PLANNING (its model call hangs):
 * another worker process resumes the stage (at once when it runs on the same host and
 * DATA_DIR, which tells it the holder is dead: src/queue/identity.ts; else once the lock
 * expires), and the event stream has every event once, in order.
 */

const root = path.resolve(import.meta.dirname, "../..");
const main = WORKER_MAIN;
const children: ChildProcess[] = [];
let repo: GitFixture;
let model: FakeModel;
let api: TestServer;
let dataDir: string;
let uri: string;
let hangs = 1;

beforeAll(async () => {
  if (!existsSync(main))
    await promisify(execFile)("npx", ["tsc", "-p", "tsconfig.build.json"], { cwd: root });
  dataDir = await mkdtemp(path.join(os.tmpdir(), "foreman-crash-"));
  repo = await createGitRepo({ "src/app.ts": "export const answer = 42;\n" });
  model = await startFakeModel(() => {
    if (hangs > 0) {
      hangs -= 1;
      return { hang: true };
    }
    return {
      toolCalls: [
        {
          name: "submit_plan",
          arguments: {
            summary: "Change the answer.",
            steps: [{ title: "Edit", description: "Set it to 43.", files: ["src/app.ts"] }],
          },
        },
      ],
    };
  });
  uri = testDatabaseUri("crash");
  api = await startTestServer({ workers: false, env: { MONGODB_URI: uri, EVENT_POLL_MS: "50" } });
}, 120_000);

afterAll(async () => {
  for (const child of children) if (child.exitCode === null) child.kill("SIGKILL");
  await api?.stop();
  await model?.close();
  await repo?.remove();
  await rm(dataDir, { recursive: true, force: true });
});

function startWorker(extra: Record<string, string> = {}): ChildProcess {
  const child = spawnWorker({
    MONGODB_URI: uri,
    DATA_DIR: dataDir,
    LLM_BASE_URL: model.baseUrl,
    LLM_MODEL: "fake",
    ...extra,
  });
  children.push(child);
  return child;
}

async function until(check: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A new account with a workspace on the fixture repository and one queued task. */
async function queueTask(description: string): Promise<{ key: string; id: string }> {
  const { key } = await api.signup();
  const ws = await api.api("POST", "/workspaces", {
    key,
    body: { name: "w", repos: [{ name: "acme/app", clone_url: repo.dir }] },
  });
  const created = await api.api("POST", "/tasks", {
    key,
    body: { workspace_id: ws.body.id, repo_id: "acme/app", description },
  });
  expect(created.status).toBe(201);
  return { key, id: created.body.id as string };
}

describe("a worker killed mid-stage", () => {
  it("is replaced: the stage resumes on another worker and no event is lost or repeated", async () => {
    const { key, id } = await queueTask("Change the answer");
    const stream = await openTaskStream(api.url, id, key);

    const first = startWorker();
    await until(() => model.requests.length >= 1, 60_000, "the first model call");
    first.kill("SIGKILL");
    await new Promise((r) => first.once("exit", r));
    const stuck = await api.api("GET", `/tasks/${id}`, { key });
    expect(stuck.body).toMatchObject({ status: "running", phase: "PLANNING" });

    startWorker();
    await stream.waitFor(
      (e) => e.event_type === "phase" && e.phase === "AWAITING_APPROVAL",
      60_000,
    );
    const phases = stream.events.filter((e) => e.event_type === "phase").map((e) => e.phase);
    expect(phases).toEqual(["QUEUED", "CLONING", "INDEXING", "PLANNING", "AWAITING_APPROVAL"]);
    expect(stream.events.map((e) => e.seq)).toEqual(stream.events.map((_, i) => i + 1));
    expect(
      stream.events.some((e) => /^Resuming PLANNING \(attempt 2\)/.test(String(e.message))),
    ).toBe(true);
    const task = await api.api("GET", `/tasks/${id}`, { key });
    expect(task.body).toMatchObject({ status: "awaiting_approval", phase: "AWAITING_APPROVAL" });
    expect(model.requests.map((r) => r.stream)).toEqual([false, false]);
    expect(task.body.plan).toHaveLength(1);

    // A reconnecting client replays exactly what the live one saw.
    const replay = await openTaskStream(api.url, id, key);
    await replay.waitFor((e) => e.event_type === "phase" && e.phase === "AWAITING_APPROVAL");
    expect(replay.events).toEqual(stream.events);
    replay.close();
    stream.close();
    for (const child of children) if (child.exitCode === null) child.kill("SIGKILL");
  }, 120_000);

  it("is retaken at once by its restarted successor on the same DATA_DIR, not after the lock lifetime", async () => {
    const { key, id } = await queueTask("Change it after a crash");
    const stream = await openTaskStream(api.url, id, key);
    hangs = 1;
    const seen = model.requests.length;
    // A lock lifetime far longer than the wait below: only the dead-predecessor check can
    // explain a resumption within it.
    const first = startWorker({ JOB_LOCK_LIFETIME_S: "120" });
    await until(() => model.requests.length > seen, 60_000, "the model call");
    first.kill("SIGKILL");
    await new Promise((r) => first.once("exit", r));
    const restartedAt = Date.now();
    startWorker({ JOB_LOCK_LIFETIME_S: "120" });
    await stream.waitFor(
      (e) => e.event_type === "phase" && e.phase === "AWAITING_APPROVAL",
      20_000,
    );
    expect(Date.now() - restartedAt).toBeLessThan(20_000);
    expect(
      stream.events.some((e) => /^Resuming PLANNING \(attempt 2\)/.test(String(e.message))),
    ).toBe(true);
    const task = await api.api("GET", `/tasks/${id}`, { key });
    expect(task.body).toMatchObject({ status: "awaiting_approval", phase: "AWAITING_APPROVAL" });
    stream.close();
    for (const child of children) if (child.exitCode === null) child.kill("SIGKILL");
  }, 120_000);

  it("fails the task, naming the phase, once a stage has used up its runs", async () => {
    const { key, id } = await queueTask("Change it again");
    const stream = await openTaskStream(api.url, id, key);
    hangs = 1;
    const seen = model.requests.length;
    const first = startWorker({ STAGE_MAX_ATTEMPTS: "1" });
    await until(() => model.requests.length > seen, 60_000, "the model call");
    first.kill("SIGKILL");
    await new Promise((r) => first.once("exit", r));
    startWorker({ STAGE_MAX_ATTEMPTS: "1" });
    const error = await stream.waitFor((e) => e.event_type === "error", 60_000);
    expect(String(error.error)).toMatch(/^The worker running PLANNING stopped before finishing it/);
    expect(await stream.closed).toBe(1000);
    const task = await api.api("GET", `/tasks/${id}`, { key });
    expect(task.body).toMatchObject({ status: "failed", phase: "FAILED" });
  }, 120_000);
});
