// test-matrix: runtime-sensitive: the model loop's tools and checks in the sandbox with this
// Node on PATH, a hanging check killed (child processes and signals).
import { mkdtemp, readdir, rm, symlink, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentModel, roleOf, type Script } from "../helpers/agent-model.js";
import {
  startFakeModel,
  toolResults,
  type FakeModel,
  fakeModelEnv,
} from "../helpers/fake-model.js";
import { createGitRepo, type GitFixture } from "../helpers/git-repo.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { openTaskStream } from "../helpers/ws.js";

/*
 * The agent's limits inside a real task: its file tools cannot leave the working copy
 * (`..`, absolute paths, a committed symlink pointing outside), a verification command that
 * hangs is killed at COMMAND_TIMEOUT_S, verification commands never see the service's
 * secrets, and a task whose checks keep failing ends FAILED naming them, its diff kept.
 */

const LLM_KEY = "sk-sandbox-model-key-99aa88bb77cc66dd55ee";
// In the service's own environment while the task runs: none may reach a check, even by name.
const PROCESS_SECRETS = {
  LLM_API_KEY: "sk-process-env-llm-key-0123456789abcdefgh",
  MONGODB_URI: "mongodb://admin:process-env-password@db.internal:27017/prod",
  OPENAI_API_KEY: "sk-process-env-openai-0123456789abcdefgh",
  GITHUB_TOKEN: "ghp_processEnvToken0123456789abcdefghij",
};

let outside: string;
let repo: GitFixture;
let model: FakeModel;
let server: TestServer;
let key: string;
let workspaceId: string;

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
  implement: (_request, n) => {
    if (n > 0) return [{ name: "finish", arguments: { summary: "Wrote the notes." } }];
    return [
      { name: "write_file", arguments: { path: "../escape.txt", content: "out" } },
      { name: "write_file", arguments: { path: path.join(outside, "abs.txt"), content: "out" } },
      { name: "write_file", arguments: { path: "escape-link/pwned.txt", content: "out" } },
      { name: "read_file", arguments: { path: "escape-link/secret.txt" } },
      { name: "delete_file", arguments: { path: "escape-link/secret.txt" } },
      { name: "write_file", arguments: { path: "NOTES.md", content: "# Notes\n" } },
    ];
  },
  fix: () => [{ name: "finish", arguments: { summary: "Nothing I can fix." } }],
};

beforeAll(async () => {
  Object.assign(process.env, PROCESS_SECRETS);
  outside = await mkdtemp(path.join(os.tmpdir(), "foreman-outside-"));
  await writeFile(path.join(outside, "secret.txt"), "outside secret\n");
  repo = await createGitRepo({
    "README.md": "# sandbox\n",
    // Both checks fail only once the task's NOTES.md is there: on the unchanged code they
    // pass, so the verification baseline counts their failures as the change's.
    ".github/foreman.yml": `verify:
  - name: env
    run: node -e "console.log('ENV ' + Object.keys(process.env).sort().join(',')); process.exit(+require('fs').existsSync('NOTES.md'))"
  - name: hang
    run: node -e "if (require('fs').existsSync('NOTES.md')) setInterval(() => {}, 1000)"
`,
  });
  // A symlink committed to the repository, pointing outside it.
  await symlink(outside, path.join(repo.dir, "escape-link"));
  await repo.git("add", "escape-link");
  await repo.git("commit", "-q", "-m", "link");
  model = await startFakeModel(agentModel(script));
  server = await startTestServer({
    workers: true,
    env: {
      ...fakeModelEnv(model, LLM_KEY),
      EVENT_POLL_MS: "50",
      COMMAND_TIMEOUT_S: "2",
      MAX_FIX_ATTEMPTS: "1",
    },
  });
  ({ key } = await server.signup());
  const ws = await server.api("POST", "/workspaces", {
    key,
    body: { name: "sandbox", repos: [{ name: "acme/sandbox", clone_url: repo.dir }] },
  });
  expect(ws.status).toBe(201);
  workspaceId = ws.body.id;
}, 60_000);

afterAll(async () => {
  for (const name of Object.keys(PROCESS_SECRETS)) delete process.env[name];
  await server?.stop();
  await model?.close();
  await repo?.remove();
  await rm(outside, { recursive: true, force: true });
});

describe("the agent's sandbox", () => {
  it("confines tools, kills a hanging check, hides secrets and fails naming the checks", async () => {
    const created = await server.api("POST", "/tasks", {
      key,
      body: {
        workspace_id: workspaceId,
        repo_id: "acme/sandbox",
        description: "Add notes",
        auto_approve: true,
      },
    });
    expect(created.status).toBe(201);
    const started = Date.now();
    const stream = await openTaskStream(server.url, created.body.id, key);
    expect(await stream.closed).toBe(1000);
    const task = (await server.api("GET", `/tasks/${created.body.id}`, { key })).body;

    // Verification failed twice (first run and after the one fix round) and says which.
    expect(task).toMatchObject({ status: "failed", phase: "FAILED" });
    expect(task.error).toMatch(
      /^Verification still fails after 1 fix attempt \(MAX_FIX_ATTEMPTS=1\); failing checks: env, hang\./,
    );
    expect(task.error).toContain("timed out");
    expect(task.diff).toContain("+++ b/NOTES.md");
    expect(stream.events.at(-1)).toMatchObject({ event_type: "error", error: task.error });
    // Two runs of a 2 s limit, not a hang.
    expect(Date.now() - started).toBeLessThan(30_000);

    const logs = stream.events.filter((e) => e.event_type === "log").map((e) => String(e.message));
    const hangLines = logs.filter((l) => l.startsWith("hang: "));
    expect(hangLines).toHaveLength(2);
    // Stopped at the 2 s limit: the time shown includes stopping the process tree, which a
    // loaded machine can stretch by a second or more, never by a hang's worth.
    for (const line of hangLines) {
      const seconds = Number(/timed out after (\d+\.\d) s/.exec(line)?.[1]);
      expect(seconds).toBeGreaterThanOrEqual(2);
      expect(seconds).toBeLessThan(10);
    }
    const envLine = logs.find((l) => l.startsWith("env: "))!;
    const names = /^ENV (.*)$/m.exec(envLine)![1]!.split(",");
    expect(names).toEqual(expect.arrayContaining(["PATH", "HOME", "CI"]));
    for (const forbidden of ["OPENAI_API_KEY", "GITHUB_TOKEN", "LLM_API_KEY", "MONGODB_URI"])
      expect(names).not.toContain(forbidden);

    // Every escape was refused, and nothing outside changed.
    const implement = model.requests.filter((r) => roleOf(r) === "implement").at(-1)!;
    const results = toolResults(implement).map((r) => r.content);
    expect(results).toHaveLength(6);
    for (const result of results.slice(0, 5)) expect(result).toMatch(/^Error: /);
    expect(results[5]).not.toMatch(/^Error: /);
    expect((await readdir(outside)).sort()).toEqual(["secret.txt"]);
    expect(JSON.stringify(model.requests.map((r) => r.body))).not.toContain("outside secret");

    // No secret in any stored event or prompt.
    const stored = JSON.stringify(
      await server.service.db.models.TaskEvent.collection.find({}).toArray(),
    );
    const prompts = JSON.stringify(model.requests.map((r) => r.body));
    for (const secret of [LLM_KEY, ...Object.values(PROCESS_SECRETS)]) {
      expect(stored).not.toContain(secret);
      expect(prompts).not.toContain(secret);
    }
  }, 60_000);
});
