import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentModel, roleOf, userText, type Script } from "../helpers/agent-model.js";
import { startFakeModel, type FakeModel, fakeModelEnv } from "../helpers/fake-model.js";
import type { FakeModelRequest } from "../helpers/fake-model.js";
import { CALC_FIX, CALC_PLAN, calcRepoFiles } from "../helpers/calc-repo.js";
import { createGitRepo, type GitFixture } from "../helpers/git-repo.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { openTaskStream, type EventStream, type StreamEvent } from "../helpers/ws.js";

/*
 * Working with people (docs/api.md, "Revisions, follow-ups and retries"), end to end
 * on the real service with a scripted model and a real local git remote: revisions at both
 * gates, the revision limit, reject reasons, a retry after failed verification, a follow-up on
 * the same branch, and the AI review's one round of changes.
 */

const HALF_FIXED = "return Math.max(value, min);";

/** The text between <feedback> and </feedback> of a request's first user message. */
function feedbackOf(request: FakeModelRequest): string | null {
  return /<feedback>\n([\s\S]*?)\n<\/feedback>/.exec(userText(request))?.[1] ?? null;
}

function isRework(request: FakeModelRequest): boolean {
  return userText(request).includes("asks for changes to it (round");
}

/** How the scripted model behaves; tests switch it. */
const mode = {
  /** IMPLEMENTING writes only half the fix (verification fails). */
  halfFix: false,
  /** REVIEWING answers request_changes. */
  requestChanges: false,
};

const script: Script = {
  plan: (request) => {
    const feedback = feedbackOf(request);
    const followUp = /FOLLOWUP/.test(userText(request));
    const steps = [...CALC_PLAN.steps];
    if (followUp)
      steps.splice(0, steps.length, {
        title: "Add the follow-up note",
        description: "Write notes/follow.txt.",
        files: ["notes/follow.txt"],
      });
    if (feedback)
      steps.push({ title: `Address: ${feedback}`, description: feedback, files: ["README.md"] });
    return [{ name: "submit_plan", arguments: { summary: CALC_PLAN.summary, steps } }];
  },
  implement: (request, n) => {
    if (n > 0) return [{ name: "finish", arguments: { summary: "Implemented." } }];
    if (/FOLLOWUP/.test(userText(request)))
      return [
        {
          name: "write_file",
          arguments: { path: "notes/follow.txt", content: "followed up\n" },
        },
      ];
    return [
      {
        name: "edit_file",
        arguments: {
          path: "src/math.ts",
          old_text: "return value;",
          new_text: mode.halfFix ? HALF_FIXED : CALC_FIX,
        },
      },
    ];
  },
  fix: (request, n) => {
    if (n > 0) return [{ name: "finish", arguments: { summary: "Changed as asked." } }];
    const feedback = feedbackOf(request) ?? "";
    if (isRework(request)) {
      const name = /NOTE:(\w+)/.exec(feedback)?.[1] ?? "review";
      return [
        { name: "write_file", arguments: { path: `notes/${name}.txt`, content: `${feedback}\n` } },
      ];
    }
    // A fix round: only a retry's hint tells the scripted model how to finish the fix.
    if (feedback.includes("RETRY-HINT"))
      return [
        {
          name: "edit_file",
          arguments: { path: "src/math.ts", old_text: HALF_FIXED, new_text: CALC_FIX },
        },
      ];
    return [{ name: "finish", arguments: { summary: "Could not find the cause." } }];
  },
  review: () => [
    {
      name: "submit_review",
      arguments: mode.requestChanges
        ? {
            verdict: "request_changes",
            summary: "Add a note for reviewers.",
            comments: [
              { path: "src/math.ts", line: 6, body: "REVIEW-ASK: explain", severity: "warning" },
            ],
          }
        : { verdict: "approve", summary: "Fine.", comments: [] },
    },
  ],
};

let repo: GitFixture;
let model: FakeModel;
let server: TestServer;
let key: string;
let workspaceId: string;

beforeAll(async () => {
  repo = await createGitRepo(calcRepoFiles());
  model = await startFakeModel(agentModel(script));
  server = await startTestServer({
    workers: true,
    env: {
      ...fakeModelEnv(model, "sk-revisions-test-key-0123456789abcdef"),
      EVENT_POLL_MS: "50",
      COMMAND_TIMEOUT_S: "120",
      MAX_FIX_ATTEMPTS: "1",
      MAX_REVISIONS: "4",
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

async function createTask(description: string, autoApprove = false): Promise<string> {
  const res = await server.api("POST", "/tasks", {
    key,
    body: {
      workspace_id: workspaceId,
      repo_id: "acme/calc",
      description,
      auto_approve: autoApprove,
    },
  });
  expect(res.status).toBe(201);
  return res.body.id as string;
}

/** The next phase event with this status after `after`, from the task's stream. */
async function nextStatus(
  stream: EventStream,
  status: string,
  after: number,
  timeoutMs = 120_000,
): Promise<StreamEvent> {
  return stream.waitFor(
    (e) => e.event_type === "phase" && e.status === status && e.seq > after,
    timeoutMs,
  );
}

function requestsSince(index: number, role: string): FakeModelRequest[] {
  return model.requests.slice(index).filter((r) => roleOf(r) === role);
}

/** The task the first test finishes (after four revisions); the follow-up continues it. */
let doneTask: { id: string; branch: string };

describe("revisions", () => {
  it("revises the plan twice, then the diff twice, up to MAX_REVISIONS", async () => {
    const id = await createTask("Make clamp respect both bounds");
    const stream = await openTaskStream(server.url, id, key);
    let at = (await nextStatus(stream, "awaiting_approval", 0)).seq;

    // Not at a gate now? It is: revise the plan.
    let before = model.requests.length;
    const first = await server.api("POST", `/tasks/${id}/revise`, {
      key,
      body: { feedback: "Also explain clamp in the README" },
    });
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ status: "running", phase: "PLANNING" });
    expect(first.body.revisions).toEqual([
      expect.objectContaining({ gate: "plan", feedback: "Also explain clamp in the README" }),
    ]);
    // While it plans again, it is at no gate.
    const busy = await server.api("POST", `/tasks/${id}/revise`, {
      key,
      body: { feedback: "too early" },
    });
    expect(busy.status).toBe(409);
    expect(busy.body.error.code).toBe("invalid_state");
    at = (await nextStatus(stream, "awaiting_approval", at)).seq;
    let [planner] = requestsSince(before, "plan");
    expect(feedbackOf(planner!)).toBe("Also explain clamp in the README");
    expect(userText(planner!)).toContain("Clamp to both bounds");

    before = model.requests.length;
    const second = await server.api("POST", `/tasks/${id}/revise`, {
      key,
      body: { feedback: "Keep the README change short" },
    });
    expect(second.status).toBe(200);
    at = (await nextStatus(stream, "awaiting_approval", at)).seq;
    [planner] = requestsSince(before, "plan");
    // The second round sees the plan the first produced, and the new feedback.
    expect(userText(planner!)).toContain("Address: Also explain clamp in the README");
    expect(feedbackOf(planner!)).toBe("Keep the README change short");
    let task = (await server.api("GET", `/tasks/${id}`, { key })).body;
    expect(task.plan.map((s: { title: string }) => s.title)).toEqual([
      "Clamp to both bounds",
      "Address: Keep the README change short",
    ]);
    expect(task.revisions).toHaveLength(2);
    expect(task.revisions[0].plan.map((s: { title: string }) => s.title)).toContain(
      "Address: Also explain clamp in the README",
    );
    expect(task.revisions[1].plan).toEqual(task.plan);

    expect((await server.api("POST", `/tasks/${id}/approve`, { key })).status).toBe(200);
    at = (await nextStatus(stream, "awaiting_diff_approval", at)).seq;
    const firstDiff = (await server.api("GET", `/tasks/${id}`, { key })).body.diff as string;
    expect(firstDiff).toContain(CALC_FIX);

    // The diff gate, twice: each round adds to the diff before it.
    for (const [n, note] of [
      [3, "first"],
      [4, "second"],
    ] as const) {
      const res = await server.api("POST", `/tasks/${id}/revise`, {
        key,
        body: { feedback: `NOTE:${note} please` },
      });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ status: "running", phase: "FIXING" });
      expect(res.body.revisions).toHaveLength(n);
      at = (await nextStatus(stream, "awaiting_diff_approval", at)).seq;
    }
    task = (await server.api("GET", `/tasks/${id}`, { key })).body;
    expect(task.diff).toContain(CALC_FIX);
    expect(task.diff).toContain("notes/first.txt");
    expect(task.diff).toContain("notes/second.txt");
    expect(task.revisions[2]).toMatchObject({ gate: "diff", feedback: "NOTE:first please" });
    expect(task.revisions[2].diff).toContain("notes/first.txt");
    expect(task.revisions[2].diff).not.toContain("notes/second.txt");
    expect(task.revisions[3].diff).toBe(task.diff);

    // MAX_REVISIONS=4 in this file: a fifth is refused, the gate still waits.
    const over = await server.api("POST", `/tasks/${id}/revise`, {
      key,
      body: { feedback: "NOTE:third" },
    });
    expect(over.status).toBe(409);
    expect(over.body.error).toMatchObject({ code: "invalid_state" });
    expect(over.body.error.message).toContain("MAX_REVISIONS");

    expect((await server.api("POST", `/tasks/${id}/approve-diff`, { key })).status).toBe(200);
    expect(await stream.closed).toBe(1000);
    task = (await server.api("GET", `/tasks/${id}`, { key })).body;
    expect(task).toMatchObject({ status: "completed", phase: "DONE" });
    expect(await repo.git("show", `${task.branch}:notes/second.txt`)).toContain("NOTE:second");
    expect(await repo.git("show", `${task.branch}:src/math.ts`)).toContain(CALC_FIX);
    doneTask = { id, branch: task.branch };

    // The WebSocket replay shows every round: plans, diffs, and who asked.
    const replay = await openTaskStream(server.url, id, key);
    expect(await replay.closed).toBe(1000);
    expect(replay.events.filter((e) => e.event_type === "plan")).toHaveLength(3);
    expect(replay.events.filter((e) => e.event_type === "diff")).toHaveLength(3);
    const asked = replay.events
      .filter((e) => e.event_type === "log" && /^Revision \d of 4/.test(String(e.message)))
      .map((e) => String(e.message));
    expect(asked).toHaveLength(4);
    expect(asked[0]).toMatch(/^Revision 1 of 4 of the plan, asked by API key "test"/);
    expect(asked[3]).toContain('"NOTE:second please"');

    // What the feedback taught is repository memory.
    const memory = await server.service.db.models.RepoMemory.collection
      .find({ source_task_id: id, kind: "feedback" })
      .toArray();
    expect(memory.map((m) => m.text)).toEqual(
      expect.arrayContaining([expect.stringContaining("Keep the README change short")]),
    );
  }, 300_000);

  it("answers bad bodies with 400, unknown tasks with 404, wrong states with 409", async () => {
    const id = doneTask.id;
    for (const body of [
      {},
      { feedback: "" },
      { feedback: 5 },
      { feedback: "x".repeat(10_001) },
      { feedback: "ok", extra: true },
    ]) {
      const res = await server.api("POST", `/tasks/${id}/revise`, { key, body });
      expect(res.status, JSON.stringify(body).slice(0, 40)).toBe(400);
      expect(res.body.error.code).toBe("validation_failed");
    }
    expect((await server.api("POST", `/tasks/${id}/revise`, { key })).status).toBe(400);
    expect(
      (await server.api("POST", `/tasks/${id}/reject`, { key, body: { reason: 5 } })).status,
    ).toBe(400);
    expect(
      (await server.api("POST", `/tasks/${id}/retry`, { key, body: { feedback: "" } })).status,
    ).toBe(400);
    expect((await server.api("POST", `/tasks/${id}/follow-up`, { key, body: {} })).status).toBe(
      400,
    );
    // A finished task is at no gate and has not failed.
    const revise = await server.api("POST", `/tasks/${id}/revise`, {
      key,
      body: { feedback: "more" },
    });
    expect(revise.status).toBe(409);
    const retry = await server.api("POST", `/tasks/${id}/retry`, { key });
    expect(retry.status).toBe(409);
    expect(retry.body.error.code).toBe("invalid_state");
    for (const [action, body] of [
      ["revise", { feedback: "x" }],
      ["retry", {}],
      ["follow-up", { description: "x" }],
    ] as const) {
      const res = await server.api("POST", `/tasks/task_unknown/${action}`, { key, body });
      expect(res.status, action).toBe(404);
      expect(res.body.error.code).toBe("not_found");
    }
    const other = await server.signup("other");
    const foreign = await server.api("POST", `/tasks/${id}/follow-up`, {
      key: other.key,
      body: { description: "not mine" },
    });
    expect(foreign.status).toBe(404);
  });

  it("keeps a rejection's reason in the error and in memory; no body still works", async () => {
    const id = await createTask("Make clamp respect both bounds (plan to reject)");
    let stream = await openTaskStream(server.url, id, key);
    await nextStatus(stream, "awaiting_approval", 0);
    const rejected = await server.api("POST", `/tasks/${id}/reject`, {
      key,
      body: { reason: "Never change src/math.ts without a benchmark" },
    });
    expect(rejected.status).toBe(200);
    expect(rejected.body).toMatchObject({ status: "cancelled", phase: "FAILED" });
    expect(rejected.body.error).toMatch(
      /^The plan was rejected by API key "test"; nothing was pushed\. Reason: Never change src\/math\.ts without a benchmark$/,
    );
    const memory = await server.service.db.models.RepoMemory.collection
      .find({ source_task_id: id })
      .toArray();
    expect(memory).toEqual([
      expect.objectContaining({
        kind: "rejection",
        text: expect.stringContaining("because: Never change src/math.ts without a benchmark"),
      }),
    ]);

    const plain = await createTask("Make clamp respect both bounds (rejected without reason)");
    stream = await openTaskStream(server.url, plain, key);
    await nextStatus(stream, "awaiting_approval", 0);
    // The later task's planner read the reason from memory.
    const planner = model.requests.filter((r) => roleOf(r) === "plan").at(-1)!;
    expect(JSON.stringify(planner.messages)).toContain(
      "Never change src/math.ts without a benchmark",
    );
    const res = await server.api("POST", `/tasks/${plain}/reject`, { key });
    expect(res.status).toBe(200);
    expect(res.body.error).toMatch(
      /^The plan was rejected by API key "test"; nothing was pushed\.$/,
    );
  }, 120_000);
});

describe("retries", () => {
  it("restarts a task that failed verification at VERIFYING, with the feedback, without planning again", async () => {
    mode.halfFix = true;
    let id: string;
    let lastSeq: number;
    try {
      id = await createTask("Make clamp respect both bounds (will fail)", true);
      const first = await openTaskStream(server.url, id, key);
      expect(await first.closed).toBe(1000);
      expect(first.events.at(-1)).toMatchObject({ event_type: "error" });
      lastSeq = first.events.at(-1)!.seq;
    } finally {
      mode.halfFix = false;
    }
    const failed = (await server.api("GET", `/tasks/${id}`, { key })).body;
    expect(failed).toMatchObject({ status: "failed", phase: "FAILED" });
    expect(failed.error).toContain("Verification still fails after 1 fix attempt");
    expect(failed.diff).toContain(HALF_FIXED);
    const quota = (await server.api("GET", "/keys/me", { key })).body.tasks_this_month;

    const before = model.requests.length;
    const retried = await server.api("POST", `/tasks/${id}/retry`, {
      key,
      body: { feedback: "RETRY-HINT: clamp to the upper bound as well" },
    });
    expect(retried.status).toBe(200);
    expect(retried.body).toMatchObject({ status: "running", phase: "VERIFYING", error: null });
    // A second retry while it runs: not failed any more.
    expect((await server.api("POST", `/tasks/${id}/retry`, { key })).status).toBe(409);

    const stream = await openTaskStream(server.url, id, key, { since: lastSeq });
    await stream.waitFor((e) => e.event_type === "done", 120_000);
    const done = (await server.api("GET", `/tasks/${id}`, { key })).body;
    expect(done).toMatchObject({ status: "completed", phase: "DONE", error: null });
    expect(await repo.git("show", `${done.branch}:src/math.ts`)).toContain(CALC_FIX);
    // The plan and the implementation were kept: no planning or implementing call since.
    expect(requestsSince(before, "plan")).toHaveLength(0);
    expect(requestsSince(before, "implement")).toHaveLength(0);
    const [fixer] = requestsSince(before, "fix");
    expect(feedbackOf(fixer!)).toContain("RETRY-HINT");
    // The failure removed the working copy; the retry restored the diff on the same base.
    const logs = stream.events.filter((e) => e.event_type === "log").map((e) => String(e.message));
    expect(logs.some((l) => l.startsWith("Retry asked by API key"))).toBe(true);
    expect(logs.some((l) => l.includes("applying the task's diff"))).toBe(true);
    // A retry is part of its task.
    expect((await server.api("GET", "/keys/me", { key })).body.tasks_this_month).toBe(quota);
    // A replay from the start goes past the first run's error to the retry's end: only the
    // task's last terminal event closes a stream.
    const replay = await openTaskStream(server.url, id, key);
    expect(await replay.closed).toBe(1000);
    const terminal = replay.events.filter(
      (e) => e.event_type === "error" || e.event_type === "done",
    );
    expect(terminal.map((e) => e.event_type)).toEqual(["error", "done"]);
    expect(replay.events.at(-1)).toMatchObject({ event_type: "done" });
  }, 240_000);
});

describe("follow-ups", () => {
  it("continues a finished task on the same branch, counted once", async () => {
    const parent = (await server.api("GET", `/tasks/${doneTask.id}`, { key })).body;
    const parentHead = (await repo.git("rev-parse", parent.branch)).trim();
    // Someone pushes to the branch meanwhile: the follow-up starts from it.
    await repo.git("checkout", "-q", parent.branch);
    await repo.git("commit", "-q", "--allow-empty", "-m", "pushed meanwhile");
    await repo.git("checkout", "-q", "main");
    const quota = (await server.api("GET", "/keys/me", { key })).body.tasks_this_month;
    const before = model.requests.length;

    const res = await server.api("POST", `/tasks/${parent.id}/follow-up`, {
      key,
      body: { description: "FOLLOWUP: add a follow-up note", auto_approve: true },
    });
    expect(res.status).toBe(201);
    expect(res.headers.get("location")).toBe(`/tasks/${res.body.id}`);
    expect(res.body).toMatchObject({ parent_task_id: parent.id, status: "queued" });
    expect((await server.api("GET", "/keys/me", { key })).body.tasks_this_month).toBe(quota + 1);

    const stream = await openTaskStream(server.url, res.body.id, key);
    expect(await stream.closed).toBe(1000);
    const task = (await server.api("GET", `/tasks/${res.body.id}`, { key })).body;
    expect(task).toMatchObject({
      status: "completed",
      branch: parent.branch,
      pr_url: parent.pr_url,
      parent_task_id: parent.id,
    });
    // New commits on the same branch, on top of the one pushed meanwhile.
    const log = await repo.git("log", "--format=%s", parent.branch);
    const subjects = log.trim().split("\n");
    // initial commit, the parent's commit, the one pushed meanwhile, the follow-up's.
    expect(subjects).toHaveLength(4);
    expect(subjects[1]).toBe("pushed meanwhile");
    expect(await repo.git("show", `${parent.branch}:notes/follow.txt`)).toBe("followed up\n");
    expect((await repo.git("rev-parse", `${parent.branch}~2`)).trim()).toBe(parentHead);
    expect(await repo.git("branch", "--list")).not.toContain("followed");
    const [planner] = requestsSince(before, "plan");
    expect(userText(planner!)).toContain(`the working copy is the branch \`${parent.branch}\``);
    // It took over the working copy its parent kept on this worker: no clone, no new volume.
    const logs = stream.events.filter((e) => e.event_type === "log").map((e) => String(e.message));
    expect(
      logs.some((l) => l.startsWith(`Took over the working copy task ${parent.id} kept`)),
      logs.join("\n"),
    ).toBe(true);
    expect(logs.some((l) => l.startsWith("Cloning "))).toBe(false);
    expect(task.base_sha).toBe((await repo.git("rev-parse", `${parent.branch}~1`)).trim());

    // Only a task that ended DONE with a branch can be followed up.
    const queued = await createTask("Make clamp respect both bounds (not done)");
    const early = await server.api("POST", `/tasks/${queued}/follow-up`, {
      key,
      body: { description: "too early" },
    });
    expect(early.status).toBe(409);
    await server.api("POST", `/tasks/${queued}/cancel`, { key });
  }, 180_000);
});

describe("the self-review", () => {
  it("sends requested changes back for one round, then waits at the diff gate", async () => {
    mode.requestChanges = true;
    try {
      const before = model.requests.length;
      const id = await createTask("Make clamp respect both bounds (reviewed)");
      const stream = await openTaskStream(server.url, id, key);
      await nextStatus(stream, "awaiting_approval", 0);
      expect((await server.api("POST", `/tasks/${id}/approve`, { key })).status).toBe(200);
      await nextStatus(stream, "awaiting_diff_approval", 0);
      // Two reviews (the second still asks for changes: no loop), one round between them.
      expect(requestsSince(before, "review")).toHaveLength(2);
      const reworks = requestsSince(before, "fix").filter(isRework);
      // One conversation of changes (its first turn), between the two reviews.
      expect(
        reworks.filter((r) => r.messages.filter((m) => m.role === "assistant").length === 0),
      ).toHaveLength(1);
      expect(feedbackOf(reworks[0]!)).toContain("REVIEW-ASK: explain");
      const task = (await server.api("GET", `/tasks/${id}`, { key })).body;
      expect(task.diff).toContain("notes/review.txt");
      expect(task.review.verdict).toBe("request_changes");
      expect(stream.events.filter((e) => e.event_type === "diff")).toHaveLength(2);
      const rejected = await server.api("POST", `/tasks/${id}/reject-diff`, {
        key,
        body: { reason: "The review notes are noise" },
      });
      expect(rejected.status).toBe(200);
      expect(rejected.body.error).toContain("Reason: The review notes are noise");
    } finally {
      mode.requestChanges = false;
    }
  }, 240_000);
});
