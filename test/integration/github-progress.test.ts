import { randomUUID } from "node:crypto";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { agentModel, userText, type Script } from "../helpers/agent-model.js";
import { fakeModelEnv, startFakeModel, type FakeModel } from "../helpers/fake-model.js";
import { createGitRepo, type GitFixture } from "../helpers/git-repo.js";
import {
  examplePayload,
  mockInstallationToken,
  signedDelivery,
  testPrivateKey,
} from "../helpers/github.js";
import { fakeGithub, gh, until, type GithubFake } from "../helpers/github-fake.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

/*
 * Live progress of GitHub tasks as a check run (src/github/progress.ts): created on the
 * commit the task started from, brought through the phases, completed with the outcome.
 * The real server, database, workers and git repositories; GitHub is nock, every request
 * checked against GitHub's REST description, and a request no mock expected fails the test.
 */

const SECRET = "whsec-progress-0123456789";
const TOKEN = "ghs_" + "Pr0gress".repeat(5) + "x";
const LLM_KEY = "sk-progress-model-key-0a1b2c3d4e5f6a7b8c";
const INSTALLATION = 5811;
const REPO_ID = 186853002; // Codertocat/Hello-World in the examples
const API = "https://api.github.com";
const REPO_PATH = "/repos/Codertocat/Hello-World";
const PUBLIC_URL = "https://foreman.example.com";
const CHECK_RUN_ID = 424242;

let repo: GitFixture;
let plainRepo: GitFixture;
let baseSha: string;
let model: FakeModel;
let server: TestServer;
let key: string;
let github: GithubFake;

const script: Script = {
  plan: (request) =>
    userText(request).includes("Loop forever")
      ? [{ name: "read_file", arguments: { path: "README.md" } }]
      : [
          {
            name: "submit_plan",
            arguments: {
              summary: "Add a greeting file.",
              steps: [{ title: "Greeting", description: "Add it.", files: ["greet.txt"] }],
            },
          },
        ],
  implement: (_request, n) =>
    n === 0
      ? [{ name: "write_file", arguments: { path: "greet.txt", content: "hello\n" } }]
      : [{ name: "finish", arguments: { summary: "Added greet.txt." } }],
  review: () => [
    { name: "submit_review", arguments: { verdict: "approve", summary: "Fine.", comments: [] } },
  ],
};

beforeAll(async () => {
  repo = await createGitRepo({ "README.md": "# hello\n" }, "master");
  baseSha = (await repo.git("rev-parse", "HEAD")).trim();
  plainRepo = await createGitRepo({ "README.md": "# plain\n" }, "main");
  model = await startFakeModel(agentModel(script));
  server = await startTestServer({
    workers: true,
    env: {
      ...fakeModelEnv(model, LLM_KEY),
      EVENT_POLL_MS: "50",
      APP_ID: "778",
      PRIVATE_KEY: testPrivateKey(),
      WEBHOOK_SECRET: SECRET,
      APP_SLUG: "foreman-test",
      PUBLIC_URL,
      PLAN_MAX_STEPS: "2",
      GITHUB_PROGRESS: "true",
    },
  });
  const signup = await server.signup();
  key = signup.key;
  const keyDoc = await server.service.db.models.ApiKey.findOne({ key_id: signup.id }).lean();
  await server.service.db.models.Workspace.create({
    _id: `gh-${INSTALLATION}`,
    kind: "github",
    account_id: keyDoc!.account_id,
    name: "Codertocat",
    repos: [
      {
        repo_id: String(REPO_ID),
        name: "Hello-World",
        full_name: "Codertocat/Hello-World",
        clone_url: `file://${repo.dir}`,
        default_branch: "master",
      },
    ],
    github: { installation_id: INSTALLATION, account_login: "Codertocat", account_type: "User" },
  });
  github = fakeGithub();
}, 60_000);

beforeEach(() => {
  mockInstallationToken(INSTALLATION, TOKEN);
});

afterEach(() => {
  github.check();
});

afterAll(async () => {
  github?.close();
  await server?.stop();
  await model?.close();
  await repo?.remove();
  await plainRepo?.remove();
});

interface CheckRunBody {
  name?: string;
  head_sha?: string;
  external_id?: string;
  details_url?: string;
  status?: string;
  conclusion?: string;
  output?: { title: string; summary: string };
}

/** GitHub's checks API for the rest of a test: every creation and update is collected. */
function checksApi() {
  const created: CheckRunBody[] = [];
  const updates: CheckRunBody[] = [];
  const scope = gh(API, { reqheaders: { authorization: `token ${TOKEN}` } })
    .post(`${REPO_PATH}/check-runs`, (body: CheckRunBody) => {
      created.push(body);
      return true;
    })
    .reply(201, { id: CHECK_RUN_ID, name: "foreman", status: "in_progress" })
    .patch(`${REPO_PATH}/check-runs/${CHECK_RUN_ID}`, (body: CheckRunBody) => {
      updates.push(body);
      return true;
    })
    .reply(200, { id: CHECK_RUN_ID, name: "foreman" })
    .persist();
  /** Everything the check run showed, in order: its creation, then each update. */
  const shown = () => [...created, ...updates];
  return { scope, created, updates, shown };
}

async function deliver(event: string, payload: unknown): Promise<number> {
  const { headers, raw } = await signedDelivery(SECRET, event, payload, randomUUID());
  const res = await server.api("POST", "/github/webhooks", { raw, headers });
  return res.status;
}

let commentId = 7_000_000;
function comment(body: string) {
  const payload = examplePayload("issue_comment", "created") as any; // eslint-disable-line @typescript-eslint/no-explicit-any
  payload.installation = { id: INSTALLATION, node_id: "x" };
  payload.comment.id = commentId += 1;
  payload.comment.body = body;
  return payload as { issue: { number: number }; comment: { id: number } };
}

/** The permission check and the reaction of an accepted command, and the App's replies. */
function commandReplies(commentIdValue: number, n: number, replies: number) {
  const scope = gh(API)
    .get(`${REPO_PATH}/collaborators/Codertocat/permission`)
    .reply(200, { permission: "write", role_name: "write", user: { login: "Codertocat" } })
    .post(`${REPO_PATH}/issues/comments/${commentIdValue}/reactions`, { content: "eyes" })
    .reply(201, { id: 1, content: "eyes" });
  for (let i = 0; i < replies; i++)
    scope.post(`${REPO_PATH}/issues/${n}/comments`).reply(201, { id: commentIdValue * 10 + i });
  return scope;
}

const tasks = () => server.service.db.models.Task.collection;
/** What the progress job keeps of a task's check run: its `gh-progress` marker. */
const checkOf = (taskId: string) =>
  server.service.db.models.Once.collection.findOne({ _id: `gh-progress:${taskId}` as never });

async function reported(taskId: string, state: string) {
  return until(`the check run showing ${state}`, async () => {
    const check = await checkOf(taskId);
    return check?.reported === state ? check : null;
  });
}

/** Waits until every progress job of the task has finished. */
async function progressSettled(taskId: string) {
  const jobs = server.service.db.connection.collection("jobs");
  await until("the progress jobs", async () => {
    const pending = await jobs.countDocuments({
      name: "github.progress",
      "data.task_id": taskId,
      $or: [{ lastFinishedAt: null }, { lockedAt: { $ne: null } }],
    });
    return pending === 0;
  });
}

const ORDER = [
  "Indexing the repository",
  "Planning",
  "Waiting for plan approval",
  "Implementing the plan",
  "Running the repository's checks",
  "Reviewing the change",
  "Waiting for diff approval",
  "Publishing the change",
  "Cleaning up",
  "Done: pull request opened",
];

describe("task progress as a check run", () => {
  it("creates the check run of a /task, brings it through the phases and completes it with the pull request", async () => {
    const checks = checksApi();
    const first = comment("/task Add a greeting file.");
    const n = first.issue.number;
    const start = commandReplies(first.comment.id, n, 2); // created, plan
    expect(await deliver("issue_comment", first)).toBe(202);
    const task = await until("the task", async () =>
      tasks().findOne({ "thread.number": n, "thread.installation_id": INSTALLATION }),
    );
    const taskId = String(task._id);
    await reported(taskId, "awaiting_approval:AWAITING_APPROVAL");
    await until("the created and plan comments", async () => start.isDone());

    // One check run, on the commit the task started from, linking to the dashboard.
    expect(checks.created).toHaveLength(1);
    expect(checks.created[0]).toMatchObject({
      name: "foreman",
      head_sha: baseSha,
      external_id: taskId,
      status: "in_progress",
      details_url: `${PUBLIC_URL}/dashboard/tasks/${taskId}`,
    });
    const waiting = checks.shown().at(-1)!;
    expect(waiting.status).toBe("in_progress");
    expect(waiting.output!.title).toBe("Waiting for plan approval");
    expect(waiting.output!.summary).toContain(`Task \`${taskId}\`: Add a greeting file.`);
    expect(waiting.output!.summary).toContain("`/approve`");
    expect(waiting.output!.summary).toContain(`(${PUBLIC_URL}/dashboard/tasks/${taskId})`);

    const approve = comment("/approve");
    const approved = commandReplies(approve.comment.id, n, 2); // approved, diff
    expect(await deliver("issue_comment", approve)).toBe(202);
    await reported(taskId, "awaiting_diff_approval:REVIEWING");
    await until("the approval and diff comments", async () => approved.isDone());
    expect(checks.shown().at(-1)!.output!.title).toBe("Waiting for diff approval");

    const approveDiff = comment("/approve-diff");
    const published = commandReplies(approveDiff.comment.id, n, 2) // approved, done
      .get(`${REPO_PATH}/pulls`)
      .query(true)
      .reply(200, [])
      .post(`${REPO_PATH}/pulls`)
      .reply(201, { number: 78, html_url: "https://github.com/Codertocat/Hello-World/pull/78" });
    expect(await deliver("issue_comment", approveDiff)).toBe(202);
    await reported(taskId, "completed:DONE");
    await progressSettled(taskId);
    await until("the pull request and the done comment", async () => published.isDone());

    // Created once; the last thing shown is the outcome, with the pull request.
    expect(checks.created).toHaveLength(1);
    const last = checks.shown().at(-1)!;
    expect(last).toMatchObject({ status: "completed", conclusion: "success" });
    expect(last.output!.title).toBe("Done: pull request opened");
    expect(last.output!.summary).toContain(
      "Done: https://github.com/Codertocat/Hello-World/pull/78",
    );
    // Phases were shown in the order the task went through them: a job running late never
    // puts an older phase back.
    const titles = checks.shown().map((b) => b.output!.title);
    const positions = titles.map((t) => ORDER.indexOf(t));
    expect(positions.every((p) => p >= 0)).toBe(true);
    expect(positions).toEqual([...positions].sort((a, b) => a - b));
    expect(titles).toContain("Implementing the plan");
    expect(checks.shown().filter((b) => b.status === "completed")).not.toHaveLength(0);
  }, 90_000);

  it("completes the check run of a failing task with failure and the task's error", async () => {
    const checks = checksApi();
    const created = await server.api("POST", "/tasks", {
      key,
      body: {
        workspace_id: `gh-${INSTALLATION}`,
        repo_id: String(REPO_ID),
        description: "Loop forever",
      },
    });
    expect(created.status).toBe(201);
    const taskId = created.body.id as string;
    await reported(taskId, "failed:FAILED");
    await progressSettled(taskId);
    const task = await tasks().findOne({ _id: taskId as never });
    expect(task?.error).toBeTruthy();
    expect(checks.created).toHaveLength(1);
    expect(checks.created[0]).toMatchObject({ head_sha: baseSha, external_id: taskId });
    const last = checks.shown().at(-1)!;
    expect(last).toMatchObject({ status: "completed", conclusion: "failure" });
    expect(last.output!.title).toBe("Failed");
    expect(last.output!.summary).toContain(`Failed: ${task!.error}`);
    // An API task has no thread: the task's own answers are unaffected.
    expect((await server.api("GET", `/tasks/${taskId}`, { key })).body).toMatchObject({
      status: "failed",
      phase: "FAILED",
    });
  }, 60_000);

  it("leaves the task unaffected when GitHub refuses the checks API (403), and stops trying", async () => {
    const refused = gh(API).post(`${REPO_PATH}/check-runs`).reply(403, {
      message: "Resource not accessible by integration",
      documentation_url: "https://docs.github.com/rest/checks/runs#create-a-check-run",
    });
    const created = await server.api("POST", "/tasks", {
      key,
      body: {
        workspace_id: `gh-${INSTALLATION}`,
        repo_id: String(REPO_ID),
        description: "Add a greeting file.",
      },
    });
    expect(created.status).toBe(201);
    const taskId = created.body.id as string;
    const check = await until("the refusal recorded", async () => {
      const c = await checkOf(taskId);
      return c?.unavailable ? c : null;
    });
    expect(refused.isDone()).toBe(true);
    expect(check.unavailable).toContain("GitHub answered 403");
    // The task goes on to its plan as it would without GitHub.
    const waiting = await until("the plan gate", async () => {
      const t = await tasks().findOne({ _id: taskId as never });
      return t?.status === "awaiting_approval" ? t : null;
    });
    expect(waiting).toMatchObject({ phase: "AWAITING_APPROVAL", status: "awaiting_approval" });
    expect(waiting.error ?? null).toBeNull();
    // Ending it asks nothing more of GitHub (a stray request would fail the test).
    const cancelled = await server.api("POST", `/tasks/${taskId}/cancel`, { key });
    expect(cancelled.status).toBe(200);
    expect(cancelled.body.status).toBe("cancelled");
    await progressSettled(taskId);
    const jobs = server.service.db.connection.collection("jobs");
    expect(
      await jobs.countDocuments({
        name: "github.progress",
        "data.task_id": taskId,
        "data.at": "end",
      }),
    ).toBe(1);
  }, 60_000);

  it("shows no check run for a task on a plain git workspace", async () => {
    const ws = await server.api("POST", "/workspaces", {
      key,
      body: { name: "plain", repos: [{ name: "acme/plain", clone_url: plainRepo.dir }] },
    });
    expect(ws.status).toBe(201);
    const created = await server.api("POST", "/tasks", {
      key,
      body: {
        workspace_id: ws.body.id,
        repo_id: ws.body.repos[0].id,
        description: "Add a greeting file.",
      },
    });
    expect(created.status).toBe(201);
    const taskId = created.body.id as string;
    const waiting = await until("the plan gate", async () => {
      const t = await tasks().findOne({ _id: taskId as never });
      return t?.status === "awaiting_approval" ? t : null;
    });
    expect(waiting.status).toBe("awaiting_approval");
    expect(await checkOf(taskId)).toBeNull();
    const jobs = server.service.db.connection.collection("jobs");
    expect(await jobs.countDocuments({ name: "github.progress", "data.task_id": taskId })).toBe(0);
    expect((await server.api("POST", `/tasks/${taskId}/cancel`, { key })).status).toBe(200);
    // No request reached GitHub: afterEach fails on any stray one.
  }, 60_000);
});
