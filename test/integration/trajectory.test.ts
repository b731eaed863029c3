import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pruneOnceMarkers } from "../../src/jobs/housekeeping.js";
import { agentModel, type Script } from "../helpers/agent-model.js";
import { startFakeModel, type FakeModel, fakeModelEnv } from "../helpers/fake-model.js";
import { CALC_FIX, CALC_PLAN, calcRepoFiles } from "../helpers/calc-repo.js";
import { createGitRepo, type GitFixture } from "../helpers/git-repo.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

/*
 * docs/api.md, "GET /tasks/{id}/trajectory": a finished task's trajectory replays its model calls
 * in order (what each call was sent, what the model answered, what its tools gave back), redacted;
 * another account gets 404. And `base_sha`: the task starts from the pinned commit, not the
 * branch's head.
 */

const SECRET = "ghp_trajectorySecretToken0123456789abcdef";

const script: Script = {
  plan: () => [{ name: "submit_plan", arguments: CALC_PLAN }],
  implement: (_request, n) => {
    if (n === 0) return [{ name: "read_file", arguments: { path: "src/math.ts" } }];
    if (n === 1)
      return [
        {
          name: "edit_file",
          arguments: { path: "src/math.ts", old_text: "return value;", new_text: CALC_FIX },
        },
      ];
    return [{ name: "finish", arguments: { summary: `Fixed clamp; token ${SECRET}` } }];
  },
  review: () => [
    { name: "submit_review", arguments: { verdict: "approve", summary: "Fine.", comments: [] } },
  ],
};

let repo: GitFixture;
let model: FakeModel;
let server: TestServer;
let key: string;
let workspaceId: string;
let firstCommit: string;

beforeAll(async () => {
  const files = calcRepoFiles();
  // The secret sits in the file the agent reads: its tool result must come back redacted.
  files["src/math.ts"] = `// deploy token: ${SECRET}\n${files["src/math.ts"]}`;
  repo = await createGitRepo(files);
  firstCommit = (await repo.git("rev-parse", "HEAD")).trim();
  await repo.git("rm", "-q", "README.md");
  await repo.git("commit", "-q", "-m", "drop the readme");
  model = await startFakeModel(agentModel(script));
  server = await startTestServer({
    workers: true,
    env: {
      ...fakeModelEnv(model, "sk-trajectory-model-key-0123456789"),
      EVENT_POLL_MS: "50",
      COMMAND_TIMEOUT_S: "120",
    },
  });
  ({ key } = await server.signup());
  const ws = await server.api("POST", "/workspaces", {
    key,
    body: { name: "local", repos: [{ name: "acme/calc", clone_url: repo.dir }] },
  });
  expect(ws.status).toBe(201);
  workspaceId = ws.body.id;
}, 60_000);

afterAll(async () => {
  await server?.stop();
  await model?.close();
  await repo?.remove();
});

async function waitForEnd(id: string, timeoutMs = 90_000): Promise<Record<string, unknown>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await server.api("GET", `/tasks/${id}`, { key });
    if (["failed", "cancelled", "completed"].includes(res.body.status)) return res.body;
    if (Date.now() > deadline) throw new Error(`task is still ${res.body.phase}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

function create(body: Record<string, unknown>) {
  return server.api("POST", "/tasks", {
    key,
    body: { workspace_id: workspaceId, repo_id: "acme/calc", auto_approve: true, ...body },
  });
}

describe("trajectories and base_sha", () => {
  it("pins the task to base_sha and replays its model calls, redacted", async () => {
    const created = await create({
      description: "Make clamp respect both bounds",
      base_sha: firstCommit.slice(0, 10),
    });
    expect(created.status).toBe(201);
    expect(created.body.base_sha).toBe(firstCommit.slice(0, 10));
    const id = created.body.id as string;
    const done = await waitForEnd(id);
    expect(done).toMatchObject({ status: "completed", base_sha: firstCommit });
    // README.md exists at the pinned commit only (the head removed it): the model saw it.
    expect(JSON.stringify(model.requests[0]!.messages)).toContain("README.md");

    const res = await fetch(`${server.url}/tasks/${id}/trajectory`, {
      headers: { "x-api-key": key },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^application\/x-ndjson/);
    const text = await res.text();
    expect(text).not.toContain(SECRET);
    const lines = text
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as Record<string, any>); // eslint-disable-line @typescript-eslint/no-explicit-any
    // The calls in the order the model got them: plan, three implementing steps, review.
    expect(lines.map((l) => `${l.stage}#${l.step}`)).toEqual([
      "plan#1",
      "implement#1",
      "implement#2",
      "implement#3",
      "review#1",
    ]);
    expect(lines.map((l) => l.response.tool_calls.map((c: { name: string }) => c.name))).toEqual([
      ["submit_plan"],
      ["read_file"],
      ["edit_file"],
      ["finish"],
      ["submit_review"],
    ]);
    // The fake model saw exactly as many calls (order of its requests = order of the lines).
    expect(model.requests).toHaveLength(lines.length);
    const read = lines[1]!;
    expect(read.tool_results).toHaveLength(1);
    expect(read.tool_results[0].output).toContain("[REDACTED]");
    expect(read.tool_results[0].output).toContain("export function clamp");
    // The next call was sent that result: its messages end with it.
    expect(JSON.stringify(lines[2]!.messages)).toContain("export function clamp");
    expect(lines[2]!.messages[0]).toMatchObject({ role: "system" });
    expect(JSON.stringify(lines[3]!.response)).toContain("[REDACTED]");
    for (const l of lines) {
      expect(l.usage).toEqual({
        input_tokens: 2000,
        output_tokens: 200,
        cache_read_tokens: 0,
        cache_write_tokens: 0,
      });
      expect(l.model).toBeTypeOf("string");
      expect(l.ms).toBeGreaterThanOrEqual(0);
    }
    expect(Date.parse(lines[0]!.at)).toBeLessThanOrEqual(Date.parse(lines[4]!.at));

    // Another account: 404 with the error body; an unknown task too.
    const other = await server.signup("other");
    const foreign = await server.api("GET", `/tasks/${id}/trajectory`, { key: other.key });
    expect(foreign.status).toBe(404);
    expect(foreign.body.error.code).toBe("not_found");
    const unknown = await server.api("GET", `/tasks/task_nope/trajectory`, { key });
    expect(unknown.status).toBe(404);

    // Past TRAJECTORY_RETENTION_DAYS (30 by default): housekeeping drops the calls, and the
    // endpoint answers 410 for a task that ended before.
    const { models } = server.service.db;
    const old = new Date(Date.now() - 31 * 86_400_000);
    await models.TrajectoryStep.collection.updateMany({ task_id: id }, { $set: { at: old } });
    await models.Task.collection.updateOne({ _id: id as never }, { $set: { finished_at: old } });
    await pruneOnceMarkers(models, 30).run({}, undefined as never);
    expect(await models.TrajectoryStep.collection.countDocuments({ task_id: id })).toBe(0);
    const gone = await server.api("GET", `/tasks/${id}/trajectory`, { key });
    expect(gone.status).toBe(410);
    expect(gone.body.error.code).toBe("gone");
  }, 120_000);

  it("rejects a malformed base_sha with 400 and fails an unknown one at CLONING", async () => {
    const bad = await create({ description: "x", base_sha: "not-a-sha" });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe("validation_failed");
    expect(JSON.stringify(bad.body.error.details)).toContain("base_sha");

    const missing = "0123456789abcdef0123456789abcdef01234567";
    const created = await create({ description: "x", base_sha: missing });
    expect(created.status).toBe(201);
    const ended = await waitForEnd(created.body.id as string);
    expect(ended).toMatchObject({ status: "failed", phase: "FAILED" });
    expect(String(ended.error)).toContain(missing);
  }, 60_000);
});
