import { execFile, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentModel, roleOf, type Script } from "../helpers/agent-model.js";
import { CALC_FIX, CALC_PLAN, calcRepoFiles } from "../helpers/calc-repo.js";
import { fakeModelEnv, startFakeModel, type FakeModel } from "../helpers/fake-model.js";
import { createGitRepo, type GitFixture } from "../helpers/git-repo.js";
import { spawnWorker, WORKER_MAIN } from "../helpers/worker.js";
import { startTestServer, testDatabaseUri, type TestServer } from "../helpers/server.js";
import { openTaskStream } from "../helpers/ws.js";

/*
 * A worker killed with SIGKILL in FIXING (its fix model call hangs), with
 * MAX_FIX_ATTEMPTS=1: the resumed stage still has its one fix round, because the round
 * cut short was never finished. Before, the round counted as used when it started and the
 * task failed with "Verification still fails after 1 fix attempt".
 */

const root = path.resolve(import.meta.dirname, "../..");
const main = WORKER_MAIN;
const children: ChildProcess[] = [];
let repo: GitFixture;
let model: FakeModel;
let api: TestServer;
let dataDir: string;
let uri: string;
let fixHangs = 1;

const script: Script = {
  plan: () => [{ name: "submit_plan", arguments: CALC_PLAN }],
  implement: () => [{ name: "finish", arguments: { summary: "Left it to the fix round." } }],
  fix: (_request, n) =>
    n === 0
      ? [
          {
            name: "edit_file",
            arguments: { path: "src/math.ts", old_text: "return value;", new_text: CALC_FIX },
          },
        ]
      : [{ name: "finish", arguments: { summary: "clamp respects both bounds." } }],
  review: () => [
    { name: "submit_review", arguments: { verdict: "approve", summary: "Good.", comments: [] } },
  ],
};

beforeAll(async () => {
  if (!existsSync(main))
    await promisify(execFile)("npx", ["tsc", "-p", "tsconfig.build.json"], { cwd: root });
  dataDir = await mkdtemp(path.join(os.tmpdir(), "foreman-fix-crash-"));
  repo = await createGitRepo(calcRepoFiles());
  const reply = agentModel(script);
  model = await startFakeModel((request) => {
    if (roleOf(request) === "fix" && fixHangs > 0) {
      fixHangs -= 1;
      return { hang: true };
    }
    return reply(request);
  });
  uri = testDatabaseUri("fixcrash");
  api = await startTestServer({ workers: false, env: { MONGODB_URI: uri, EVENT_POLL_MS: "50" } });
}, 120_000);

afterAll(async () => {
  for (const child of children) if (child.exitCode === null) child.kill("SIGKILL");
  await api?.stop();
  await model?.close();
  await repo?.remove();
  await rm(dataDir, { recursive: true, force: true });
});

function startWorker(): ChildProcess {
  const child = spawnWorker({
    MONGODB_URI: uri,
    DATA_DIR: dataDir,
    ...fakeModelEnv(model, "sk-fix-crash-key-0a1b2c3d4e5f6a7b8c9d"),
    MAX_FIX_ATTEMPTS: "1",
    COMMAND_TIMEOUT_S: "120",
  });
  children.push(child);
  return child;
}

describe("a worker killed in FIXING", () => {
  it("leaves the interrupted fix round unused: the resumed stage runs it", async () => {
    const { key } = await api.signup();
    const ws = await api.api("POST", "/workspaces", {
      key,
      body: { name: "w", repos: [{ name: "acme/calc", clone_url: repo.dir }] },
    });
    const created = await api.api("POST", "/tasks", {
      key,
      body: {
        workspace_id: ws.body.id,
        repo_id: "acme/calc",
        description: "Make clamp respect its bounds",
        auto_approve: true,
      },
    });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    const stream = await openTaskStream(api.url, id, key);

    const first = startWorker();
    await stream.waitFor((e) => e.event_type === "phase" && e.phase === "FIXING", 120_000);
    await stream.waitFor((e) => String(e.message ?? "").startsWith("Fix attempt 1 of 1"));
    // The fix round is in progress (its model call hangs): the worker dies here.
    while (fixHangs > 0) await new Promise((r) => setTimeout(r, 50));
    first.kill("SIGKILL");
    await new Promise((r) => first.once("exit", r));

    startWorker();
    expect(await stream.closed).toBe(1000);
    const task = (await api.api("GET", `/tasks/${id}`, { key })).body;
    expect(task.error).toBeNull();
    expect(task).toMatchObject({ status: "completed", phase: "DONE" });
    expect(task.checks).toMatchObject({ fix_attempts: 1, results: [{ name: "test", ok: true }] });
    const logs = stream.events.map((e) => String(e.message ?? ""));
    expect(logs.filter((l) => l.startsWith("Fix attempt 1 of 1"))).toHaveLength(2);
    // The resumed stage starts over: VERIFYING, the failing check, the same fix round again.
    const phases = stream.events.filter((e) => e.event_type === "phase").map((e) => e.phase);
    expect(phases.filter((p) => p === "FIXING")).toHaveLength(2);
  }, 240_000);
});
