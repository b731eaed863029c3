import { writeFile } from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentModel, roleOf, userText, type Script } from "../helpers/agent-model.js";
import { startFakeModel, type FakeModel, fakeModelEnv } from "../helpers/fake-model.js";
import { createGitRepo, type GitFixture } from "../helpers/git-repo.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { taskInStatus } from "../helpers/greeter-stack.js";

/*
 * The verification baseline (docs/api.md, "Verification baseline"; issue 29 item 6, issue 41) on
 * the real service: a repository whose test suite already has a failing test. A change that leaves
 * that failure as it was is not failed and uses no fix round (the check is reported pre-existing,
 * with its result on the unchanged code); a change that breaks another test of the same suite still
 * gets a fix round. The unchanged code's results are kept per commit and command: the second task
 * on the same commit does not run them again. A finished task's last verification is kept for the
 * commit it pushed: its follow-up runs nothing on the unchanged code, unless someone pushed to the
 * branch meanwhile (another commit, run as any other).
 */

const files = {
  "package.json": `${JSON.stringify(
    { name: "base", private: true, type: "module", scripts: { test: "node --test test/" } },
    null,
    2,
  )}\n`,
  "src/index.js": "export const v = 1;\n",
  "test/old.test.js": `import { test } from "node:test";
import assert from "node:assert/strict";
test("an old broken test", () => assert.equal(1 + 1, 3));
`,
  "test/index.test.js": `import { test } from "node:test";
import assert from "node:assert/strict";
import { v } from "../src/index.js";
test("v is one", () => assert.equal(v, 1));
`,
};

const write = (path: string, content: string) => ({
  name: "write_file",
  arguments: { path, content },
});

const script: Script = {
  plan: () => [
    {
      name: "submit_plan",
      arguments: {
        summary: "Change the module.",
        steps: [{ title: "Change it", description: "Change it.", files: ["src/index.js"] }],
      },
    },
  ],
  implement: (request, n) =>
    n > 0
      ? [{ name: "finish", arguments: { summary: "Done." } }]
      : /BREAK/.test(userText(request))
        ? [write("src/index.js", "export const v = 2;\n")]
        : /FOLLOW/.test(userText(request))
          ? [write("src/farewell.js", "export const bye = (n) => `Bye ${n}`;\n")]
          : [write("src/greet.js", "export const greet = (n) => `Hi ${n}`;\n")],
  fix: (_request, n) =>
    n > 0
      ? [{ name: "finish", arguments: { summary: "Fixed v." } }]
      : [write("src/index.js", "export const v = 1;\nexport const w = 2;\n")],
  review: () => [
    { name: "submit_review", arguments: { verdict: "approve", summary: "Fine.", comments: [] } },
  ],
};

let repo: GitFixture;
let model: FakeModel;
let server: TestServer;
let key: string;
let workspaceId: string;

beforeAll(async () => {
  repo = await createGitRepo(files);
  model = await startFakeModel(agentModel(script));
  server = await startTestServer({
    workers: true,
    env: {
      ...fakeModelEnv(model, "sk-baseline-test-key-0123456789abcdef"),
      EVENT_POLL_MS: "50",
      COMMAND_TIMEOUT_S: "120",
      MAX_FIX_ATTEMPTS: "2",
    },
  });
  ({ key } = await server.signup());
  const ws = await server.api("POST", "/workspaces", {
    key,
    body: { name: "local", repos: [{ name: "acme/base", clone_url: repo.dir }] },
  });
  expect(ws.status).toBe(201);
  workspaceId = ws.body.id;
}, 60_000);

afterAll(async () => {
  await server?.stop();
  await model?.close();
  await repo?.remove();
});

/** Creates a task, approves its plan, and answers it at the diff gate (or its end). */
async function runToDiffGate(description: string) {
  const res = await server.api("POST", "/tasks", {
    key,
    body: { workspace_id: workspaceId, repo_id: "acme/base", description },
  });
  expect(res.status).toBe(201);
  const id = res.body.id as string;
  await until(id, ["awaiting_approval"]);
  expect((await server.api("POST", `/tasks/${id}/approve`, { key })).status).toBe(200);
  return until(id, ["awaiting_diff_approval", "failed", "completed"]);
}

/** Waits for a task to reach one of `statuses`. */
function until(id: string, statuses: string[]) {
  return taskInStatus(server, key, id, statuses);
}

/** A task run to DONE: its plan and diff approved, its branch pushed. */
async function runToDone(description: string) {
  const task = await runToDiffGate(description);
  expect(task.status).toBe("awaiting_diff_approval");
  expect((await server.api("POST", `/tasks/${task.id}/approve-diff`, { key })).status).toBe(200);
  const done = await until(task.id, ["completed", "failed", "cancelled"]);
  expect(done.status).toBe("completed");
  return done;
}

/** A follow-up of `parentId` with auto_approve, run to its end. */
async function followUp(parentId: string) {
  const res = await server.api("POST", `/tasks/${parentId}/follow-up`, {
    key,
    body: { description: "FOLLOW: add a farewell helper.", auto_approve: true },
  });
  expect(res.status).toBe(201);
  return until(res.body.id, ["completed", "failed", "cancelled"]);
}

/** The kept baselines of a commit. */
function keptFor(commit: string) {
  return server.service.db.models.Task.db.collection("verify_baselines").find({ commit }).toArray();
}

/** The ids of the tests a kept baseline has failing. */
function failingIn(doc: Record<string, unknown>): string[] {
  return ((doc.tests ?? []) as Array<{ i: string; s: string }>)
    .filter((t) => t.s === "f")
    .map((t) => t.i);
}

async function logs(id: string): Promise<string[]> {
  const events = await server.service.db.models.TaskEvent.collection
    .find({ task_id: id, type: "log" })
    .sort({ seq: 1 })
    .toArray();
  return events.map((e) => String(e.payload?.message ?? ""));
}

describe("verification baseline", () => {
  it("does not fail a task for a test that already failed, and spends no fix round on it", async () => {
    const fixesBefore = model.requests.filter((r) => roleOf(r) === "fix").length;
    const task = await runToDiffGate("Add a greeting helper.");
    expect(task.status).toBe("awaiting_diff_approval");
    expect(task.checks).toMatchObject({
      fix_attempts: 0,
      results: [{ name: "test", ok: false, before: "failed", pre_existing: true }],
    });
    expect(model.requests.filter((r) => roleOf(r) === "fix").length).toBe(fixesBefore);
    const lines = await logs(task.id);
    expect(lines.some((l) => l.includes("on the unchanged code"))).toBe(true);
    expect(lines.some((l) => l.startsWith("Verification passed apart from pre-existing"))).toBe(
      true,
    );
    // The working copy was restored exactly: the diff is the change alone.
    expect(task.diff).toContain("src/greet.js");
    expect(task.diff).not.toContain("test/old.test.js");
  }, 180_000);

  it("still sends a newly broken test to a fix round, and reuses the kept baseline", async () => {
    const task = await runToDiffGate("BREAK: set v to two.");
    expect(task.status).toBe("awaiting_diff_approval");
    // The suite failed with the old failure and a new one: one fix round, then only the old.
    expect(task.checks).toMatchObject({
      fix_attempts: 1,
      results: [{ name: "test", ok: false, before: "failed", pre_existing: true }],
    });
    const lines = await logs(task.id);
    expect(
      lines.some((l) => /^Fix attempt 1 of 2: test failed \(1 new failure: .*v is one\)/.test(l)),
    ).toBe(true);
    // The same commit and command: the first task's baseline is read, not run again.
    expect(lines.some((l) => l.includes("on the unchanged code ("))).toBe(false);
    const fix = model.requests.filter((r) => roleOf(r) === "fix")[0]!;
    expect(userText(fix)).toMatch(
      /failed the same way on the unchanged code[^\n]*an old broken test/,
    );
  }, 180_000);
});

describe("verification baseline of a follow-up", () => {
  it("is the parent's last verification when the follow-up starts from the commit it pushed", async () => {
    const parent = await runToDone("Add a greeting helper for a follow-up.");
    const head = (await repo.git("rev-parse", parent.branch)).trim();
    // The parent kept its checks, per test with the old failure, for the commit it pushed.
    const kept = await keptFor(head);
    expect(kept).toHaveLength(1);
    expect(kept[0]).toMatchObject({ ok: false });
    expect(failingIn(kept[0]!)).toEqual([expect.stringContaining("an old broken test")]);

    const task = await followUp(parent.id);
    expect(task).toMatchObject({ status: "completed", base_sha: head, branch: parent.branch });
    // The old failure is still pre-existing, and nothing ran on the unchanged code.
    expect(task.checks).toMatchObject({
      fix_attempts: 0,
      results: [{ name: "test", ok: false, before: "failed", pre_existing: true }],
    });
    const lines = await logs(task.id);
    expect(lines.some((l) => l.includes("on the unchanged code ("))).toBe(false);
    expect(await repo.git("show", `${parent.branch}:src/farewell.js`)).toContain("Bye");
  }, 240_000);

  it("is run again on the branch's new head when someone pushed to it meanwhile", async () => {
    const parent = await runToDone("Add a greeting helper for a pushed branch.");
    const parentHead = (await repo.git("rev-parse", parent.branch)).trim();
    // Someone pushes a commit to the branch: another old failure comes with it.
    await repo.git("checkout", "-q", parent.branch);
    await writeFile(
      path.join(repo.dir, "test/pushed.test.js"),
      `import { test } from "node:test";
import assert from "node:assert/strict";
test("a test pushed broken", () => assert.equal(2 + 2, 5));
`,
    );
    await repo.git("add", "-A");
    await repo.git("commit", "-q", "-m", "pushed meanwhile");
    await repo.git("checkout", "-q", "main");
    const pushed = (await repo.git("rev-parse", parent.branch)).trim();
    expect(await keptFor(pushed)).toHaveLength(0);

    const task = await followUp(parent.id);
    // It works on the pushed commit: its checks see the pushed test, failing there already.
    expect(task).toMatchObject({ status: "completed", base_sha: pushed });
    expect(task.checks).toMatchObject({
      fix_attempts: 0,
      results: [{ name: "test", ok: false, before: "failed", pre_existing: true }],
    });
    const lines = await logs(task.id);
    expect(lines.some((l) => l.includes(`on the unchanged code (${pushed.slice(0, 12)})`))).toBe(
      true,
    );
    // The parent's results stay its commit's; the pushed commit got its own run.
    expect(await keptFor(parentHead)).toHaveLength(1);
    const ran = await keptFor(pushed);
    expect(failingIn(ran[0]!)).toContainEqual(expect.stringContaining("a test pushed broken"));
    const subjects = (await repo.git("log", "--format=%s", parent.branch)).trim().split("\n");
    expect(subjects[1]).toBe("pushed meanwhile");
  }, 240_000);
});
