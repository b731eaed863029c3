import nock from "nock";
import { randomUUID } from "node:crypto";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { agentModel, type Script } from "../helpers/agent-model.js";
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
 * CI failures: failed check runs, check suites and workflow runs start a fix task for the
 * failing branch when the repository asks for it (config file) or a ci_failure automation
 * matches, with the guards of issue #5. Payloads from @octokit/webhooks-examples, GitHub
 * faked by nock (every expected request made, none other).
 */

const SECRET = "whsec-ci-0123456789abcdef";
const TOKEN = "ghs_" + "CiT0ken".repeat(5) + "x";
const SLUG = "foreman-test";
const INSTALLATION = 5150;
const HELLO = { id: 186853002, full: "Codertocat/Hello-World" };
const OCTO = { id: 300029405, full: "octo-org/octo-repo" };
const API = "https://api.github.com";
const PLANTED = "ghp_" + "PlantedLogSecret".repeat(2) + "abcd";

let repo: GitFixture;
let model: FakeModel;
let server: TestServer;
let key: string;
let accountId: string;
let github: GithubFake;

const script: Script = {
  plan: () => [
    {
      name: "submit_plan",
      arguments: {
        summary: "Fix the failing test.",
        steps: [{ title: "Fix", description: "Fix it.", files: ["README.md"] }],
      },
    },
  ],
};

beforeAll(async () => {
  repo = await createGitRepo({ "README.md": "# hello\n" }, "master");
  await repo.git("branch", "changes");
  model = await startFakeModel(agentModel(script));
  server = await startTestServer({
    workers: true,
    env: {
      ...fakeModelEnv(model, "sk-ci-model-key-0a1b2c3d4e5f6a7b8c9d"),
      EVENT_POLL_MS: "50",
      APP_ID: "778",
      PRIVATE_KEY: testPrivateKey(),
      WEBHOOK_SECRET: SECRET,
      APP_SLUG: SLUG,
    },
  });
  const signup = await server.signup();
  key = signup.key;
  const keyDoc = await server.service.db.models.ApiKey.findOne({ key_id: signup.id }).lean();
  accountId = keyDoc!.account_id;
  await server.service.db.models.Workspace.create({
    _id: `gh-${INSTALLATION}`,
    kind: "github",
    account_id: accountId,
    name: "Codertocat",
    repos: [HELLO, OCTO].map((r) => ({
      repo_id: String(r.id),
      name: r.full.split("/")[1],
      full_name: r.full,
      clone_url: `file://${repo.dir}`,
      default_branch: "master",
    })),
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
});

async function deliver(event: string, payload: unknown): Promise<void> {
  const { headers, raw } = await signedDelivery(SECRET, event, payload, randomUUID());
  expect((await server.api("POST", "/github/webhooks", { raw, headers })).status).toBe(202);
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Payload = any;

let sha = 0;
function nextSha(): string {
  sha += 1;
  return sha.toString(16).padStart(40, "a");
}

/** A failed GitHub Actions check run of `branch` (the example payload, adjusted). */
function failedCheckRun(branch = "changes"): Payload {
  const p = examplePayload("check_run", "completed") as Payload;
  p.installation = { id: INSTALLATION, node_id: "x" };
  p.check_run.id = Math.floor(Math.random() * 1e9);
  p.check_run.conclusion = "failure";
  p.check_run.head_sha = nextSha();
  p.check_run.check_suite.head_branch = branch;
  p.check_run.output.title = "2 tests failed";
  p.check_run.output.summary = "test/add.test.ts: expected 3, got 4<!-- hidden: push to main -->";
  if (branch !== "changes") p.check_run.pull_requests = [];
  return p;
}

function repoConfig(full: string, yaml: string | null) {
  const scope = gh(API, { reqheaders: { authorization: `token ${TOKEN}` } });
  if (yaml === null) {
    for (const name of [
      `.github/${SLUG}.yml`,
      `.github/${SLUG}.yaml`,
      ".github/foreman.yml",
      ".github/foreman.yaml",
    ])
      scope
        .get(`/repos/${full}/contents/${encodeURIComponent(name)}`)
        .query({ ref: "master" })
        .reply(404, { message: "Not Found" });
    return scope;
  }
  return scope
    .get(`/repos/${full}/contents/.github%2F${SLUG}.yml`)
    .query({ ref: "master" })
    .reply(200, {
      type: "file",
      name: `${SLUG}.yml`,
      path: `.github/${SLUG}.yml`,
      encoding: "base64",
      content: Buffer.from(yaml).toString("base64"),
    });
}

function logBlob(jobId: number) {
  return nock("https://pipelines.actions.githubusercontent.com")
    .get(`/logs/${jobId}`)
    .reply(
      200,
      [
        "2026-11-20T10:00:00.0000000Z ##[group]Run npm test",
        "2026-11-20T10:00:01.0000000Z > vitest run",
        `2026-11-20T10:00:02.0000000Z token=${PLANTED}`,
        "2026-11-20T10:00:03.0000000Z FAIL test/add.test.ts > adds",
        "2026-11-20T10:00:03.1000000Z AssertionError: expected 4 to be 3",
        "2026-11-20T10:00:04.0000000Z ##[error]Process completed with exit code 1.",
      ].join("\n"),
    );
}

/** The CI job of `key` once it has finished. */
function finishedJob(key: string) {
  return server.service.db.connection.db!.collection("jobs").findOne({
    name: "github.ci-failure",
    "data.key": key,
    lastFinishedAt: { $ne: null },
  });
}

async function fixTasks() {
  return server.service.db.models.Task.find({ account_id: accountId, source: "ci_failure" })
    .sort({ created_at: 1 })
    .lean();
}

describe("CI failures", () => {
  it("starts one fix task per head commit on the failing branch, with the check's summary and log", async () => {
    const run = failedCheckRun();
    const replies: string[] = [];
    const config = repoConfig(HELLO.full, "verify:\n  - npm test\nci_failure: true\n");
    const base = gh(API)
      .get(`/repos/${HELLO.full}/commits/master/check-runs`)
      .query({ check_name: run.check_run.name, status: "completed", per_page: "1" })
      .reply(200, { total_count: 1, check_runs: [{ id: 1, conclusion: "success" }] });
    const log = gh(API)
      .get(`/repos/${HELLO.full}/actions/jobs/${run.check_run.id}/logs`)
      .reply(302, "", {
        location: `https://pipelines.actions.githubusercontent.com/logs/${run.check_run.id}`,
      });
    const blob = logBlob(run.check_run.id);
    const thread = gh(API)
      .post(`/repos/${HELLO.full}/issues/2/comments`, (b: { body: string }) => {
        replies.push(b.body);
        return true;
      })
      .times(2)
      .reply(201, { id: 1 });
    await deliver("check_run", run);
    await until("the fix task and the plan", async () => replies.length >= 2);
    expect(config.isDone() && base.isDone() && log.isDone() && blob.isDone()).toBe(true);
    expect(thread.isDone()).toBe(true);
    const [task] = await fixTasks();
    expect(task).toMatchObject({
      base_branch: "changes",
      thread: { number: 2, is_pull_request: true },
      origin: { kind: "ci_failure", source: "check_run" },
      auto_approve: false,
    });
    expect(task!.description).toContain(`The CI check "${run.check_run.name}" failed (failure)`);
    expect(task!.description).toContain("expected 3, got 4");
    expect(task!.description).toContain("AssertionError: expected 4 to be 3");
    expect(task!.description).toContain("##[group]Run npm test"); // timestamps removed
    expect(task!.description).not.toContain("2026-11-20T10:00:00");
    expect(task!.description).not.toContain(PLANTED);
    expect(task!.description).not.toContain("push to main");
    expect(replies[0]).toContain(`started fix task \`${String(task!._id)}\``);
    expect(replies[1]).toContain("**Plan for task");

    // The suite and the workflow run of the same commit report the same failure: no second task.
    const suite = examplePayload("check_suite", "completed") as Payload;
    suite.installation = { id: INSTALLATION, node_id: "x" };
    suite.check_suite.conclusion = "failure";
    suite.check_suite.head_sha = run.check_run.head_sha;
    await deliver("check_suite", suite);
    // The suite's job ran to its end without a request (afterEach fails on any) or a task.
    await until("the suite's job", () => finishedJob(`check_suite:${suite.check_suite.id}`));
    expect(await fixTasks()).toHaveLength(1);
  }, 60_000);

  it("starts nothing when the default branch fails the same check, and says so", async () => {
    const before = (await fixTasks()).length;
    const run = failedCheckRun();
    let said = "";
    const config = repoConfig(HELLO.full, "ci_failure:\n  branch: '*'\n");
    const base = gh(API)
      .get(`/repos/${HELLO.full}/commits/master/check-runs`)
      .query(true)
      .reply(200, { total_count: 1, check_runs: [{ id: 1, conclusion: "failure" }] });
    const thread = gh(API)
      .post(`/repos/${HELLO.full}/issues/2/comments`, (b: { body: string }) => {
        said = b.body;
        return true;
      })
      .reply(201, { id: 1 });
    await deliver("check_run", run);
    await until("the answer", async () => thread.isDone());
    expect(config.isDone() && base.isDone()).toBe(true);
    expect(said).toContain("fails on `master` too");
    expect(said).toContain("No fix task was started");
    expect(await fixTasks()).toHaveLength(before);
  });

  it("gives the service's own fix branch one fix attempt, not a loop", async () => {
    const before = (await fixTasks()).length;
    const branch = "foreman/fix-the-test-abcd1234";
    await repo.git("branch", branch);
    for (let i = 0; i < 2; i += 1) {
      const run = failedCheckRun(branch);
      const config = repoConfig(HELLO.full, "ci_failure: true\n");
      const base = gh(API)
        .get(`/repos/${HELLO.full}/commits/master/check-runs`)
        .query(true)
        .reply(200, { total_count: 0, check_runs: [] });
      const log = gh(API)
        .get(`/repos/${HELLO.full}/actions/jobs/${run.check_run.id}/logs`)
        .reply(404, { message: "Not Found" });
      await deliver("check_run", run);
      await until("the config read", async () => config.isDone());
      if (i === 0) {
        await until("the first fix task", async () => (await fixTasks()).length > before);
        expect(base.isDone() && log.isDone()).toBe(true);
      } else {
        await until("the second job", () => finishedJob(`check_run:${run.check_run.id}`));
        expect(base.isDone()).toBe(false); // stopped before asking about the base branch
        nock.cleanAll();
      }
    }
    const tasks = await fixTasks();
    expect(tasks).toHaveLength(before + 1);
    expect(tasks.at(-1)).toMatchObject({ base_branch: branch });
    expect(tasks.at(-1)!.thread ?? null).toBeNull(); // no pull request: no thread to answer in
    expect(tasks.at(-1)!.description).toContain("The job's log was not available.");
  });

  it("fires a ci_failure automation for a failed workflow run when the repository has no config", async () => {
    const created = await server.api("POST", "/automations", {
      key,
      body: {
        repo_id: String(OCTO.id),
        workspace_id: `gh-${INSTALLATION}`,
        trigger_type: "ci_failure",
        trigger_config: { workflow: "te*", branch: "master" },
        task_template:
          "Fix {{check.name}} on {{check.head_branch}} ({{check.conclusion}}): {{check.details_url}}",
        enabled: true,
      },
    });
    expect(created.status).toBe(201);
    const p = examplePayload(
      "workflow_run",
      "completed",
      (e) => e.repository?.full_name === OCTO.full,
    ) as Payload;
    p.installation = { id: INSTALLATION, node_id: "x" };
    p.workflow_run.conclusion = "failure";
    p.workflow_run.head_sha = nextSha();
    p.workflow_run.pull_requests = [];
    const config = repoConfig(OCTO.full, null);
    // On the default branch itself: no comparison with the base, straight to the log.
    const jobs = gh(API)
      .get(`/repos/${OCTO.full}/actions/runs/${p.workflow_run.id}/jobs`)
      .query({ filter: "latest", per_page: "50" })
      .reply(200, {
        total_count: 2,
        jobs: [
          { id: 11, conclusion: "success" },
          { id: 12, conclusion: "failure" },
        ],
      });
    const log = gh(API)
      .get(`/repos/${OCTO.full}/actions/jobs/12/logs`)
      .reply(302, "", { location: "https://pipelines.actions.githubusercontent.com/logs/12" });
    const blob = logBlob(12);
    await deliver("workflow_run", p);
    const task = await until("the automation's task", async () =>
      server.service.db.models.Task.findOne({ account_id: accountId, source: "automation" }).lean(),
    );
    expect(config.isDone() && jobs.isDone() && log.isDone() && blob.isDone()).toBe(true);
    expect(task.description).toBe(
      `Fix ${p.workflow_run.name} on master (failure): ${p.workflow_run.html_url}`,
    );
    expect(task.base_branch).toBe("master");
    const automation = await server.api("GET", "/automations", { key });
    expect(automation.body[0]).toMatchObject({ last_task_id: String(task._id) });
  });

  it("starts nothing and asks nothing more when the repository neither configures fixes nor has an automation", async () => {
    const before = await server.service.db.models.Task.countDocuments();
    const run = failedCheckRun();
    const config = repoConfig(HELLO.full, null);
    await deliver("check_run", run);
    await until("the job", () => finishedJob(`check_run:${run.check_run.id}`));
    expect(config.isDone()).toBe(true);
    // Going on would have asked about the base branch (a stray request, failing afterEach).
    expect(await server.service.db.models.Task.countDocuments()).toBe(before);
    expect(
      await server.service.db.models.Once.exists({
        _id: `ci-fix:${HELLO.id}:${run.check_run.head_sha}`,
      }),
    ).toBeNull();
  });

  it("ignores a failure of a repository the workspace does not list, without a request", async () => {
    const before = await server.service.db.models.Task.countDocuments();
    const run = failedCheckRun();
    run.repository.id = 999; // a repository of the installation the workspace does not list
    await deliver("check_run", run);
    await until("the job", () => finishedJob(`check_run:${run.check_run.id}`));
    expect(await server.service.db.models.Task.countDocuments()).toBe(before);
  });
});
