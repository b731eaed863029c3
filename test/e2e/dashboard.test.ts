/// <reference lib="dom" />
import type { Browser, BrowserContext, Dialog, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { setTier } from "../../src/domain/accounts/accounts.js";
import { agentModel, type Script } from "../helpers/agent-model.js";
import { expectAccessible, launchBrowser, screenshot } from "../helpers/browser.js";
import {
  fakeModelEnv,
  startFakeModel,
  type FakeModel,
  type FakeModelRequest,
} from "../helpers/fake-model.js";
import { createGitRepo, type GitFixture } from "../helpers/git-repo.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

/*
 * The dashboard in real Chromium against the real service (workers on, real database, real
 * git, the scripted model): a person signs up, adds a workspace (field errors in the API's
 * words), creates a task, watches its phases arrive, requests changes at both gates, approves,
 * sees it done with its branch and follows it up; sees a task created through the API appear
 * in the open list and the awaiting count; rejects with a reason; retries a failed task; plans
 * a spec into queued tasks; creates and disables an integration; manages keys; runs a health
 * scan; reads analytics; in dark mode and on a phone. Every page state is checked with
 * axe-core and saved as a screenshot (test-results/screenshots).
 */

/** The words a person types at the plan gate; the re-planned plan shows they arrived. */
const PLAN_FEEDBACK = "Also say goodbye";

const script: Script = {
  plan: (req) => [
    {
      name: "submit_plan",
      arguments: {
        summary: "Add a greeting helper.",
        steps: [
          {
            title: JSON.stringify(req.messages).includes(PLAN_FEEDBACK)
              ? "Add greet() and bye()"
              : "Add greet()",
            description: "Export greet(name) from src/greet.js.",
            files: ["src/greet.js"],
          },
        ],
      },
    },
  ],
  implement: (_req, turn) =>
    turn === 0
      ? [
          {
            name: "write_file",
            arguments: {
              path: "src/greet.js",
              content: "export function greet(name) {\n  return `Hello, ${name}!`;\n}\n",
            },
          },
        ]
      : [{ name: "finish", arguments: { summary: "Added greet()." } }],
  // A round of changes at the diff gate: trim the name, as the person asked.
  fix: (_req, turn) =>
    turn === 0
      ? [
          {
            name: "write_file",
            arguments: {
              path: "src/greet.js",
              content: "export function greet(name) {\n  return `Hello, ${name.trim()}!`;\n}\n",
            },
          },
        ]
      : [{ name: "finish", arguments: { summary: "Trimmed the name." } }],
  review: () => [
    {
      name: "submit_review",
      arguments: {
        verdict: "comment",
        summary: "Small and clear.",
        comments: [
          { path: "src/greet.js", line: 2, body: "Consider trimming the name.", severity: "info" },
        ],
      },
    },
  ],
};

// Waits for the pipeline (clone, index, the model, verification in the sandbox) through the
// page or the API: seconds when idle, far longer on a loaded 2-core machine. vitest's
// expect.poll gives up after 1 s by default, so every wait on the service names its bound,
// and the tests that make them allow several (360 s: 4 · PIPELINE_MS).
const PIPELINE_MS = 90_000;

/** The spec planner's answer (submit_tasks): three tasks, the third after the first two. */
const PLANNED = [
  { id: 1, description: "Add a farewell helper", skill: null, depends_on: [], priority: 1 },
  { id: 2, description: "Document the helpers", skill: null, depends_on: [], priority: 2 },
  { id: 3, description: "Test both helpers", skill: null, depends_on: [1, 2], priority: 1 },
];

/** The model: the spec planner's list, or the task script by stage. */
function model_(request: FakeModelRequest) {
  if (request.tools.includes("submit_tasks"))
    return {
      toolCalls: [{ name: "submit_tasks", arguments: { tasks: PLANNED } }],
      usage: { prompt_tokens: 500, completion_tokens: 100 },
    };
  return agentModel(script)(request);
}

let repo: GitFixture;
/** The task the main flow takes to DONE (with its diff), for later page states. */
let mainTaskId = "";
let model: FakeModel;
let server: TestServer;
let browser: Browser;
let context: BrowserContext;
let page: Page;
const pageErrors: string[] = [];

/** The signed-in key of the main page, for API calls a test makes beside the page. */
const keyOf = async () => (await page.evaluate(() => sessionStorage.getItem("foreman.apiKey")))!;

/** The first repository of the first workspace, through the API. */
async function firstRepo(key: string) {
  const ws = (await server.api("GET", "/workspaces", { key })).body[0];
  const repos = await server.api("GET", `/workspaces/${ws.id}/repos`, { key });
  return { workspace_id: ws.id as string, repo_id: repos.body[0].id as string };
}

/** Waits, through the API, for a task to reach `status`. */
async function untilStatus(key: string, id: string, status: string) {
  await expect
    .poll(async () => (await server.api("GET", `/tasks/${id}`, { key })).body.status, {
      timeout: PIPELINE_MS,
      interval: 200,
    })
    .toBe(status);
}

async function visit(path: string, label: string) {
  await page.goto(server.url + "/dashboard" + path);
  await page.getByRole("heading", { level: 1 }).first().waitFor();
  await expectAccessible(page, label);
}

beforeAll(async () => {
  repo = await createGitRepo({
    "README.md": "# greeter\n",
    "package.json": JSON.stringify({ name: "greeter", version: "1.0.0", type: "module" }),
    "src/index.js": "export const version = 1;\n",
    "test/index.test.js":
      "import test from 'node:test';\nimport assert from 'node:assert';\ntest('one', () => assert.equal(1, 1));\n",
    ".github/foreman.yml":
      "verify:\n  - name: unit tests\n    run: node --test test/index.test.js\n",
  });
  model = await startFakeModel(model_);
  server = await startTestServer({
    workers: true,
    env: { ...fakeModelEnv(model, "sk-dashboard-model-key-0123456789ab"), EVENT_POLL_MS: "50" },
  });
  browser = await launchBrowser();
  context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  page = await context.newPage();
  page.on("pageerror", (err) => pageErrors.push(err.message));
  page.on("dialog", (d) => void d.accept());
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await server?.stop();
  await model?.close();
  await repo?.remove();
});

describe("the dashboard", () => {
  it("redirects / to the dashboard and signs a new account up, showing the key once", async () => {
    await page.goto(server.url + "/");
    expect(new URL(page.url()).pathname).toBe("/dashboard/");
    await page.getByRole("heading", { name: "Sign in" }).waitFor();
    await expectAccessible(page, "sign-in");
    await screenshot(page, "sign-in");

    await page.getByLabel("Name of your first key").fill("laptop");
    await page.getByRole("button", { name: "Sign up" }).click();
    const key = await page.getByTestId("new-key").textContent();
    expect(key).toMatch(/^\S{40,}$/);
    // The key works against the API, and the page keeps it in session storage only.
    expect((await server.api("GET", "/keys/me", { key: key! })).status).toBe(200);
    await page.getByRole("button", { name: "Continue to the dashboard" }).click();
    await page.getByRole("heading", { name: "Tasks" }).waitFor();
    const stored = await page.evaluate(() => [
      sessionStorage.getItem("foreman.apiKey"),
      localStorage.getItem("foreman.apiKey"),
    ]);
    expect(stored).toEqual([key, null]);
  });

  it("adds a plain-git workspace and lists its repository", async () => {
    await visit("/workspaces", "workspaces (empty)");
    await page.getByLabel("Workspace name").fill("local");
    await page.getByLabel("Repository name").fill("acme/greeter");
    // Two bad fields: each shows the API's own words under it.
    await page.getByLabel("Clone URL").fill("not a url");
    await page.getByLabel("Default branch (optional)").fill("bad..branch");
    await page.getByRole("button", { name: "Add workspace" }).click();
    const answer = await server.api("POST", "/workspaces", {
      key: await keyOf(),
      body: {
        name: "local",
        repos: [{ name: "acme/greeter", clone_url: "not a url", default_branch: "bad..branch" }],
      },
    });
    const said = (field: string) =>
      (answer.body.error.details as Array<{ path: string; message: string }>).find(
        (d) => d.path === `body.repos.0.${field}`,
      )!.message;
    await expect(page.getByTestId("ws-url-error").textContent()).resolves.toBe(said("clone_url"));
    await expect(page.getByTestId("ws-branch-error").textContent()).resolves.toBe(
      said("default_branch"),
    );
    await expect(page.getByLabel("Clone URL").getAttribute("aria-invalid")).resolves.toBe("true");
    await expect(page.getByRole("alert").first().textContent()).resolves.toContain(
      said("clone_url"),
    );
    await expectAccessible(page, "workspaces (field errors)");
    await screenshot(page, "workspaces-errors");
    await page.getByLabel("Clone URL").fill(repo.dir);
    await page.getByLabel("Default branch (optional)").fill("main");
    await page.getByRole("button", { name: "Add workspace" }).click();
    await expect(page.getByTestId("ws-url-error").count()).resolves.toBe(0);
    await page.getByTestId("workspace-local").getByText("acme/greeter").waitFor();
    await expectAccessible(page, "workspaces");
    await screenshot(page, "workspaces");
  });

  it("creates a task, shows its phases live, and takes both gates to DONE with a branch", async () => {
    await visit("/tasks", "tasks (empty)");
    await page.getByRole("button", { name: "New task" }).click();
    await page.getByLabel("Repository").first().selectOption({ label: "acme/greeter (local)" });
    await page.getByLabel("What should change?").fill("Add a greeting helper");
    await page.getByRole("button", { name: "Create task" }).click();
    await page.waitForURL(/\/dashboard\/tasks\/[^/]+$/);
    const taskId = page.url().split("/").pop()!;
    mainTaskId = taskId;

    // The plan gate: phases arrived over the WebSocket, the plan is shown with its buttons.
    await page.getByRole("button", { name: "Approve plan" }).waitFor({ timeout: PIPELINE_MS });
    await page
      .getByTestId("phase")
      .filter({ hasText: /^AWAITING_APPROVAL$/ })
      .waitFor();
    // The gate's buttons come from the task's fetch, the timeline from the stream's events:
    // waited for, not read once.
    for (const phase of ["CLONING", "INDEXING", "PLANNING"])
      await expect
        .poll(() => page.locator(".timeline .phase-done", { hasText: phase }).count(), {
          timeout: 10_000,
        })
        .toBe(1);
    await page.getByText("Add greet()").waitFor();
    await expectAccessible(page, "task at the plan gate");
    await screenshot(page, "task-plan");
    // The sticky bar says what waits, the tab title and the navigation count it.
    await expect(page.getByTestId("pending").textContent()).resolves.toContain(
      "Waiting for you: approve the plan",
    );
    await page
      .getByTestId("awaiting")
      .filter({ hasText: /^1 awaiting you$/ })
      .waitFor();
    await expect.poll(() => page.title(), { timeout: 5000 }).toMatch(/^\(1\) Task: /);

    // Request changes at the plan gate: the task plans again with the comment, back here.
    await page.getByRole("button", { name: "Request changes" }).click();
    await page.getByLabel("What should change in the plan?").fill(PLAN_FEEDBACK);
    await expectAccessible(page, "plan gate, request changes open");
    await page.getByRole("button", { name: "Send feedback" }).click();
    await page
      .locator("section", { has: page.getByRole("heading", { name: "Plan", exact: true }) })
      .getByText("Add greet() and bye()")
      .waitFor({ timeout: PIPELINE_MS });
    await page.getByRole("button", { name: "Approve plan" }).waitFor({ timeout: PIPELINE_MS });
    await page.getByTestId("rounds").getByText("Round 1: changes requested on the plan").waitFor();
    await page.getByTestId("rounds").locator("summary").first().click();
    await page.getByTestId("rounds").getByText(PLAN_FEEDBACK).waitFor();
    await expectAccessible(page, "plan gate after a round");
    await page.getByRole("button", { name: "Approve plan" }).click();

    // The diff gate: the diff file by file, the review comment beside its line.
    await page.getByRole("button", { name: "Approve diff" }).waitFor({ timeout: PIPELINE_MS });
    await page.locator(".d2h-file-wrapper", { hasText: "src/greet.js" }).waitFor();
    await expect(page.locator(".review-comment").textContent()).resolves.toContain(
      "Consider trimming the name.",
    );
    await page
      .locator("section", { has: page.getByRole("heading", { name: "Checks" }) })
      .getByText("unit tests")
      .waitFor();
    await expectAccessible(page, "task at the diff gate");
    await screenshot(page, "task-diff");
    // Split view, files collapse, each diff box reachable by keyboard.
    await page.getByRole("button", { name: "Split" }).click();
    await page.locator(".d2h-file-side-diff").first().waitFor();
    await expect(
      page.locator(".d2h-file-side-diff").first().getAttribute("tabindex"),
    ).resolves.toBe("0");
    await page.locator(".hljs").first().waitFor(); // syntax colours arrive after the first paint
    await expectAccessible(page, "task at the diff gate, split view");
    await page.getByRole("button", { name: "Collapse all" }).click();
    await expect(page.locator(".d2h-files-diff.d2h-d-none").count()).resolves.toBe(1);
    await page.getByRole("button", { name: "Expand all" }).click();
    await page.getByRole("button", { name: "Unified" }).click();
    await page.locator(".d2h-file-diff").first().waitFor();

    // Request changes at the diff gate: a round of changes on this diff, back at the gate.
    await page.getByRole("button", { name: "Request changes" }).click();
    await page.getByLabel("What should change in the changes?").fill("Trim the name");
    await page.getByRole("button", { name: "Send feedback" }).click();
    await page.getByText("name.trim()").first().waitFor({ timeout: PIPELINE_MS });
    await page.getByRole("button", { name: "Approve diff" }).waitFor({ timeout: PIPELINE_MS });
    await page
      .getByTestId("rounds")
      .getByText("Round 2: changes requested on the changes")
      .waitFor();
    await page.getByRole("button", { name: "Approve diff" }).click();

    await page
      .getByTestId("phase")
      .filter({ hasText: /^DONE$/ })
      .waitFor({ timeout: PIPELINE_MS });
    const branch = await page.getByTestId("branch").textContent();
    expect(branch).toMatch(/\S/);
    expect(branch).not.toBe("—");
    const task = await server.api("GET", `/tasks/${taskId}`, {
      key: (await page.evaluate(() => sessionStorage.getItem("foreman.apiKey")))!,
    });
    expect(task.body).toMatchObject({ status: "completed", phase: "DONE", branch });
    // The log shows the stream, replayed after a reload too. Counted once the stream has
    // ended ("finished": the server closes it after the last event): DONE shows from the
    // task's fetch, and the last log lines may still be on their way then.
    const finished = page.getByTestId("task-bar").getByText("finished");
    await finished.waitFor();
    const lines = await page.getByTestId("log").locator("li").count();
    await page.reload();
    await finished.waitFor({ timeout: 10_000 });
    expect(await page.getByTestId("log").locator("li").count()).toBe(lines);
    await screenshot(page, "task-done");
    await expectAccessible(page, "task done");

    // Follow up: a new task on the same branch, its parent named.
    await page.getByLabel("What should change next?").fill("Add a farewell too");
    await page.getByRole("button", { name: "Follow up" }).click();
    await page.waitForURL((u) => !u.pathname.endsWith(taskId));
    const followId = page.url().split("/").pop()!;
    const follow = await server.api("GET", `/tasks/${followId}`, { key: await keyOf() });
    expect(follow.body).toMatchObject({
      parent_task_id: taskId,
      description: "Add a farewell too",
    });
    await page.getByRole("link", { name: "a finished task" }).waitFor();
    await untilStatus(await keyOf(), followId, "awaiting_approval");
    expect(
      (await server.api("POST", `/tasks/${followId}/cancel`, { key: await keyOf() })).status,
    ).toBe(200);

    await visit("/tasks", "tasks");
    await page.getByRole("link", { name: /Add a greeting helper/ }).waitFor();
    await page.getByLabel("Status").selectOption("failed");
    await page.getByText("No tasks match these filters.").waitFor();
  }, 360_000);

  it("shows a decision lost to a race as a plain message", async () => {
    const key = (await page.evaluate(() => sessionStorage.getItem("foreman.apiKey")))!;
    const list = await server.api("GET", "/workspaces", { key });
    const ws = list.body[0];
    const repos = await server.api("GET", `/workspaces/${ws.id}/repos`, { key });
    const created = await server.api("POST", "/tasks", {
      key,
      body: { workspace_id: ws.id, repo_id: repos.body[0].id, description: "Race me" },
    });
    // Wait for the plan gate through the API, then open the page with its live stream held
    // back, so that it still shows the gate when someone else decides.
    await expect
      .poll(
        async () => (await server.api("GET", `/tasks/${created.body.id}`, { key })).body.status,
        { timeout: PIPELINE_MS, interval: 200 },
      )
      .toBe("awaiting_approval");
    const p = await context.newPage();
    await p.addInitScript((k) => sessionStorage.setItem("foreman.apiKey", k), key);
    await p.routeWebSocket(/\/ws/, () => {});
    await p.goto(`${server.url}/dashboard/tasks/${created.body.id}`);
    await p.getByRole("button", { name: "Reject plan" }).waitFor();
    // Someone else decides first.
    expect((await server.api("POST", `/tasks/${created.body.id}/reject`, { key })).status).toBe(
      200,
    );
    await p.getByRole("button", { name: "Approve plan" }).click();
    await p.getByText("This task is no longer waiting for that decision").waitFor();
    await p
      .getByTestId("phase")
      .filter({ hasText: /^FAILED$/ })
      .waitFor();
    await p.close();
  }, 360_000);

  // The open list asks again every 1.5 s (pages/tasks.tsx LIST_EVERY_MS): about 2 s on an
  // idle machine from creation to the row; bounded at 5 s for a loaded one.
  it("shows a task created through the API in the open list at its next refresh, by repository name", async () => {
    const key = await keyOf();
    await visit("/tasks", "tasks (live)");
    await page.getByTestId("task-list").waitFor();
    const created = await server.api("POST", "/tasks", {
      key,
      body: { ...(await firstRepo(key)), description: "Appears by itself" },
    });
    expect(created.status).toBe(201);
    const row = page.locator(`[data-task="${created.body.id}"]`);
    await row.waitFor({ timeout: 5000 });
    // The repository's name once the repositories are loaded (its id until then).
    await row
      .getByTestId("repo-name")
      .filter({ hasText: /^acme\/greeter$/ })
      .waitFor();
    await expect(row.textContent()).resolves.not.toContain(created.body.repo_id);
    // Its phase changes arrive too, and it is counted as awaiting once at the plan gate.
    await untilStatus(key, created.body.id, "awaiting_approval");
    await row.getByText("awaiting approval").waitFor({ timeout: 5000 });
    await page
      .getByTestId("awaiting")
      .filter({ hasText: /^1 awaiting you$/ })
      .waitFor();
    // Filters and search live in the URL.
    await page.getByLabel("Search").fill("appears");
    await expect.poll(() => new URL(page.url()).searchParams.get("q")).toBe("appears");
    await expect
      .poll(() => page.getByTestId("task-list").locator("li").count(), { timeout: 5000 })
      .toBe(1);
    await page.reload();
    await expect(page.getByLabel("Search").inputValue()).resolves.toBe("appears");
    await expect
      .poll(() => page.getByTestId("task-list").locator("li").count(), { timeout: 5000 })
      .toBe(1);
    await page.getByTestId("awaiting").click();
    await expect.poll(() => new URL(page.url()).searchParams.get("awaiting")).toBe("1");
    await row.waitFor();
    await expectAccessible(page, "tasks awaiting you");
    await screenshot(page, "tasks-live");

    // The log follows its end as lines arrive (a heartbeat is such a line) and scrolls by
    // keyboard.
    await row.click();
    await page.getByRole("button", { name: "Approve plan" }).waitFor();
    for (let i = 1; i <= 60; i++)
      await server.service.events.append(created.body.id, {
        event_type: "log",
        message: i === 60 ? "still running `npm test` (40 s)" : `line ${i} of a long command`,
      });
    await page.getByTestId("log").getByText("still running `npm test` (40 s)").waitFor();
    const atEnd = () =>
      page
        .getByTestId("log")
        .evaluate((el) => Math.abs(el.scrollHeight - el.clientHeight - el.scrollTop) < 4);
    await expect.poll(atEnd, { timeout: 2000 }).toBe(true);
    await page.getByTestId("log").focus();
    await page.keyboard.press("Home");
    await expect
      .poll(() => page.getByTestId("log").evaluate((el) => el.scrollTop), { timeout: 2000 })
      .toBe(0);
    await expectAccessible(page, "task with a long log");

    // Reject, after a confirmation, with a reason: kept in the task's error.
    await page.getByRole("button", { name: "Reject plan" }).click();
    await page.getByRole("dialog", { name: "Reject the plan?" }).waitFor();
    await expectAccessible(page, "reject confirmation");
    await page.getByRole("button", { name: "Keep the task" }).click();
    await expect(page.getByRole("dialog").count()).resolves.toBe(0);
    expect((await server.api("GET", `/tasks/${created.body.id}`, { key })).body.status).toBe(
      "awaiting_approval",
    );
    await page.getByRole("button", { name: "Reject plan" }).click();
    await page.getByLabel("Reason (optional)").fill("Out of scope this quarter");
    await page.getByRole("button", { name: "Confirm rejection" }).click();
    await page.getByTestId("task-error").filter({ hasText: "Out of scope this quarter" }).waitFor();
    expect((await server.api("GET", `/tasks/${created.body.id}`, { key })).body).toMatchObject({
      status: "cancelled",
    });
    await page
      .getByTestId("awaiting")
      .filter({ hasText: /^0 awaiting you$/ })
      .waitFor();
  }, 360_000);

  it("retries a task that failed at verification from its page", async () => {
    const key = await keyOf();
    // A repository whose check fails once the greeting helper is there (and passes on the
    // unchanged code, so the failure is the change's, not pre-existing): the task uses its fix
    // rounds and fails.
    const failing = await createGitRepo({
      "package.json": JSON.stringify({ name: "failing", version: "1.0.0", type: "module" }),
      "src/index.js": "export const version = 1;\n",
      ".github/foreman.yml":
        "verify:\n  - name: red with the helper\n    run: test ! -e src/greet.js\n",
    });
    try {
      const ws = await server.api("POST", "/workspaces", {
        key,
        body: { name: "red", repos: [{ name: "acme/red", clone_url: failing.dir }] },
      });
      expect(ws.status).toBe(201);
      const repos = await server.api("GET", `/workspaces/${ws.body.id}/repos`, { key });
      const created = await server.api("POST", "/tasks", {
        key,
        body: {
          workspace_id: ws.body.id,
          repo_id: repos.body[0].id,
          description: "Add a greeting helper to the red repository",
          auto_approve: true,
        },
      });
      await untilStatus(key, created.body.id, "failed");
      await visit(`/tasks/${created.body.id}`, "failed task");
      await expect(page.getByTestId("pending").textContent()).resolves.toContain("Failed");
      await page.getByLabel("Hint for the retry (optional)").fill("The check is flaky");
      await page.getByRole("button", { name: "Retry task" }).click();
      await page
        .getByTestId("log")
        .getByText(/Retry asked by .*The check is flaky/)
        .waitFor({ timeout: PIPELINE_MS });
      await untilStatus(key, created.body.id, "failed");
      await screenshot(page, "task-retried");
    } finally {
      await failing.remove();
    }
  }, 360_000);

  it("shows in the Checks box what the change did test by test, the pre-existing failures marked", async () => {
    const key = await keyOf();
    // A repository of its own, whose check passes: the task completes.
    const green = await createGitRepo({
      "package.json": JSON.stringify({ name: "green", version: "1.0.0", type: "module" }),
      ".github/foreman.yml": "verify:\n  - name: unit tests\n    run: node --version\n",
    });
    const ws = await server.api("POST", "/workspaces", {
      key,
      body: { name: "green", repos: [{ name: "acme/green", clone_url: green.dir }] },
    });
    expect(ws.status).toBe(201);
    const repos = await server.api("GET", `/workspaces/${ws.body.id}/repos`, { key });
    const created = await server.api("POST", "/tasks", {
      key,
      body: {
        workspace_id: ws.body.id,
        repo_id: repos.body[0].id,
        description: "Add a greeting helper",
        auto_approve: true,
      },
    });
    await untilStatus(key, created.body.id, "completed").finally(() => green.remove());
    // The last verification's results per test, as VERIFYING stores them (docs/api.md,
    // "Verification baseline"): one test fixed, one added and reproduced, one red before and still,
    // one check that failed the same way before the change, and a capped list with its full count.
    const stillFailing = Array.from({ length: 50 }, (_, i) => `test/old.test.js > legacy ${i}`);
    await server.service.db.models.Task.updateOne(
      { _id: created.body.id },
      {
        $set: {
          checks: {
            source: ".github/foreman.yml",
            fix_attempts: 1,
            results: [
              {
                name: "unit tests",
                command: "node --test",
                ok: true,
                duration_ms: 1200,
                tests: {
                  runner: "node:test",
                  total: 3,
                  passed: 3,
                  failed: 0,
                  skipped: 0,
                  new_failures: [],
                  fixed: ["test/greet.test.js > greets by name"],
                  still_failing: [],
                  added: ["test/greet.test.js > trims the name"],
                  reproduced: ["test/greet.test.js > trims the name"],
                },
              },
              {
                name: "legacy suite",
                command: "npm run legacy",
                ok: false,
                pre_existing: true,
                duration_ms: 800,
                tests: {
                  total: 75,
                  passed: 0,
                  failed: 75,
                  skipped: 0,
                  new_failures: [],
                  fixed: [],
                  still_failing: stillFailing,
                  still_failing_count: 75,
                  added: [],
                  reproduced: [],
                },
              },
            ],
          },
        },
      },
    );
    await visit(`/tasks/${created.body.id}`, "task with per-test checks");
    const box = page.getByTestId("checks");
    await expect(
      box.getByRole("listitem").filter({ hasText: "legacy suite" }).textContent(),
    ).resolves.toMatch(/failed\s*pre-existing\s*legacy suite/);
    await expect(box.getByText("Tests: 3 passed, 75 failed (78 in all)").count()).resolves.toBe(1);
    await expect(
      box.getByRole("listitem").filter({ hasText: "unit tests" }).textContent(),
    ).resolves.toBe("passed unit tests node --test 1.2 s · 3 of 3 tests passed (node:test)");
    const fixed = box.getByRole("listitem").filter({ hasText: "greets by name" });
    await expect(fixed.textContent()).resolves.toBe("fixed test/greet.test.js > greets by name");
    await expect(
      box.getByRole("listitem").filter({ hasText: "trims the name" }).textContent(),
    ).resolves.toBe(
      "added test/greet.test.js > trims the name — reproduced: failed before the change",
    );
    await expect(
      box.getByRole("heading", { name: "Still failing, as before the change (75)" }).count(),
    ).resolves.toBe(1);
    await expect(
      box
        .getByRole("listitem")
        .filter({ hasText: /legacy 0$/ })
        .textContent(),
    ).resolves.toBe("pre-existing test/old.test.js > legacy 0");
    // Twenty shown, the rest counted.
    await expect(
      box
        .getByRole("listitem")
        .filter({ hasText: /^pre-existing / })
        .count(),
    ).resolves.toBe(20);
    await expect(box.getByText("and 55 more").count()).resolves.toBe(1);
    await expect(box.getByRole("heading", { name: /New failures/ }).count()).resolves.toBe(0);
    await screenshot(page, "task-checks-per-test");
  }, 240_000);

  it("plans a spec, edits the list and queues it, then shows the levels", async () => {
    await visit("/prism", "spec planner (empty)");
    // An empty spec: the API's words under the field.
    await page.getByRole("button", { name: "Plan tasks" }).click();
    await page.getByTestId("prism-spec-error").waitFor();
    await page.getByLabel("Specification").fill("Greeter v2: farewells, docs and tests.");
    await page.getByRole("button", { name: "Plan tasks" }).click();
    await page.getByTestId("planned").waitFor({ timeout: PIPELINE_MS });
    await expect(page.getByTestId("planned").locator("> li").count()).resolves.toBe(3);
    await page
      .getByLabel("Task", { exact: true })
      .nth(1)
      .fill("Document both helpers in the README");
    await page.getByRole("button", { name: "Remove task 2" }).waitFor();
    await page.getByLabel("Repository").selectOption({ label: "acme/greeter (local)" });
    await expectAccessible(page, "spec planner (parsed list)");
    await screenshot(page, "prism-list");
    await page.getByRole("button", { name: "Queue 3 tasks" }).click();
    await page.getByTestId("levels").waitFor();
    await expect(page.getByTestId("levels").locator("h3").allTextContents()).resolves.toEqual([
      "Level 1",
      "Level 2",
    ]);
    const key = await keyOf();
    const tasks = (await server.api("GET", "/tasks?limit=3", { key })).body as Array<{
      id: string;
      description: string;
      depends_on: string[];
    }>;
    const docs = tasks.find((t) => t.description === "Document both helpers in the README");
    const last = tasks.find((t) => t.description === "Test both helpers");
    expect(docs).toBeDefined();
    expect(last?.depends_on).toContain(docs!.id);
    await page
      .getByTestId("levels")
      .getByRole("link", { name: /Test both helpers/ })
      .waitFor();
    await expectAccessible(page, "spec planner (queued)");
    await screenshot(page, "prism-queued");
    for (const t of tasks) await server.api("POST", `/tasks/${t.id}/cancel`, { key });
  }, 360_000);

  it("creates an integration, shows its endpoints, disables and deletes it", async () => {
    const key = await keyOf();
    // One made through the API is listed too.
    const made = await server.api("POST", "/integrations", {
      key,
      body: {
        type: "linear",
        name: "from-api",
        settings: {},
        secrets: { webhook_secret: "whsec-0123456789", api_key: "lin_api_0123456789" },
      },
    });
    expect(made.status).toBe(201);
    await visit("/integrations", "integrations");
    await page.getByTestId("integration-from-api").waitFor();
    await page.getByLabel("Vendor").selectOption("linear");
    await page.getByLabel("Name").fill("team-linear");
    await page.getByLabel("Webhook signing secret").fill("short");
    await page.getByLabel("API key").fill("lin_api_abcdefghij");
    await page.getByRole("button", { name: "Create integration" }).click();
    await page.getByTestId("int-secret-webhook_secret-error").waitFor();
    await page.getByLabel("Webhook signing secret").fill("whsec-abcdefghij");
    await page.getByRole("button", { name: "Create integration" }).click();
    const item = page.getByTestId("integration-team-linear");
    await item.waitFor();
    await expect(item.locator(".endpoints code").first().textContent()).resolves.toContain(
      server.url + "/",
    );
    await expectAccessible(page, "integrations (two)");
    await screenshot(page, "integrations");
    await item.getByRole("button", { name: "Disable" }).click();
    await page.getByTestId("integration-team-linear").getByText("disabled").waitFor();
    // The page shows what the server answered after its PATCH; the API says the same. Polled:
    // once in CI (a loaded 2-core machine, the embedded FerretDB) the very next read still
    // answered the integration as enabled.
    const enabledOf = async () =>
      (
        (await server.api("GET", "/integrations", { key })).body as Array<{
          name: string;
          enabled: boolean;
        }>
      ).find((i) => i.name === "team-linear")?.enabled;
    await expect.poll(enabledOf, { timeout: 5000 }).toBe(false);
    await page
      .getByTestId("integration-team-linear")
      .getByRole("button", { name: "Delete" })
      .click();
    await expect
      .poll(() => page.getByTestId("integration-team-linear").count(), { timeout: 5000 })
      .toBe(0);
  });

  it("creates a key shown once and revokes it after confirmation", async () => {
    // A route change moves the focus to the new page's heading and names the tab.
    await visit("/tasks", "tasks");
    await page.getByRole("link", { name: "Keys" }).click();
    await page.getByRole("heading", { level: 1, name: "API keys" }).waitFor();
    await expect
      .poll(() => page.evaluate(() => document.activeElement?.tagName), { timeout: 5000 })
      .toBe("H1");
    await expect(page.title()).resolves.toMatch(/Keys · foreman$/);
    await expectAccessible(page, "keys");
    await page.getByTestId("usage").waitFor();
    await page.getByLabel("Name", { exact: true }).fill("ci");
    await page.getByRole("button", { name: "Create key" }).click();
    const ciKey = (await page.getByTestId("created-key").textContent())!;
    expect((await server.api("GET", "/keys/me", { key: ciKey })).status).toBe(200);
    await page.getByRole("button", { name: "Done" }).click();
    await expect(page.getByTestId("created-key").count()).resolves.toBe(0);
    await screenshot(page, "keys");
    await page.getByTestId("key-ci").getByRole("button", { name: "Revoke" }).click();
    await page.getByTestId("key-ci").getByText("revoked").waitFor();
    expect((await server.api("GET", "/keys/me", { key: ciKey })).status).toBe(401);
  });

  it("runs a health scan and charts the history", async () => {
    await visit("/health", "health (first repository)");
    await expect
      .poll(() => page.getByLabel("Repository").inputValue(), { timeout: 10_000 })
      .not.toBe("");
    await page.getByLabel("Repository").selectOption({ label: "acme/greeter (local)" });
    await page.getByText("No report yet: run a scan.").waitFor();
    await page.getByRole("button", { name: "Scan now" }).click();
    await page.getByTestId("health-report").waitFor({ timeout: 90_000 });
    await expect(page.locator(".grade-letter").textContent()).resolves.toMatch(
      /^(A\+|A-?|B[+-]?|C[+-]?|D|F)$/,
    );
    await page.locator("[data-testid='chart-health score history'] canvas").waitFor();
    await expectAccessible(page, "health");
    await screenshot(page, "health");
  }, 180_000);

  it("charts analytics for the period", async () => {
    await visit("/analytics", "analytics");
    await page.getByTestId("velocity").waitFor();
    await expect(page.getByTestId("velocity").textContent()).resolves.toContain("Completed");
    await page.locator("[data-testid='chart-tasks per day'] canvas").waitFor();
    await page.locator("[data-testid='chart-cost per day'] canvas").waitFor();
    await screenshot(page, "analytics");
  });

  it("shows agents, skills and automations, with API errors as messages", async () => {
    await visit("/agents", "agents");
    const all = (await server.api("GET", "/agents/", { key: await keyOf() })).body as Array<{
      category: string;
    }>;
    const security = all.filter((a) => a.category === "security").length;
    expect(security).toBeGreaterThan(0);
    expect(security).toBeLessThan(all.length);
    await page
      .locator(".cards > li")
      .nth(all.length - 1)
      .waitFor();
    await page.getByLabel("Category").selectOption("security");
    // The category's list is fetched again: waited for, not counted at once. Then only that
    // category's agents are listed, all of them.
    const cards = page.locator(".cards > li");
    await expect
      .poll(async () => (await cards.locator(".badge").allTextContents()).join(","), {
        timeout: 10_000,
      })
      .toBe(Array(security).fill("security").join(","));
    await screenshot(page, "agents");

    await visit("/skills", "skills");
    await page.getByLabel("Name").fill("team-style");
    await page.getByLabel("Description").fill("Our house style");
    await page.getByLabel("Instructions added to the task's prompt").fill("Use tabs.");
    await page.getByRole("button", { name: "Create skill" }).click();
    await page.getByRole("heading", { name: "team-style" }).waitFor();
    // A duplicate name: the API's 409 message is on the page, not a blank page.
    await page.getByLabel("Name").fill("team-style");
    await page.getByLabel("Description").fill("Again");
    await page.getByLabel("Instructions added to the task's prompt").fill("Use spaces.");
    await page.getByRole("button", { name: "Create skill" }).click();
    await page.getByRole("alert").first().waitFor();
    await expect(page.getByRole("alert").first().textContent()).resolves.toMatch(/\S/);
    await screenshot(page, "skills");

    await visit("/automations", "automations");
    await page.getByLabel("Repository").selectOption({ label: "acme/greeter (local)" });
    await page.getByLabel("Schedule", { exact: true }).fill("0 9 * *");
    await page.getByLabel("Task template").fill("Weekly dependency check on {{date}}");
    await page.getByRole("button", { name: "Create automation" }).click();
    await page.getByTestId("auto-schedule-error").waitFor();
    await expectAccessible(page, "automations (field error)");
    await page.getByLabel("Schedule", { exact: true }).fill("0 9 * * 1");
    await page.getByLabel("Task template").fill("Weekly dependency check on {{date}}");
    await page.getByRole("button", { name: "Create automation" }).click();
    await page.getByText("Weekly dependency check on {{date}}").waitFor();
    await page.getByRole("button", { name: "Disable" }).click();
    await page.getByText("disabled").waitFor();
    await expectAccessible(page, "automations");
    await screenshot(page, "automations");
  });

  it("on a service without a model: the checklist says so and a task needs confirming", async () => {
    const bare = await startTestServer({
      env: { LLM_API_KEY: undefined, LLM_PROVIDER: undefined },
    });
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    try {
      const { key } = await bare.signup();
      const p = await ctx.newPage();
      await p.addInitScript((k) => sessionStorage.setItem("foreman.apiKey", k), key);
      await p.goto(bare.url + "/dashboard/tasks");
      const checklist = p.getByTestId("checklist");
      await checklist.getByText("Configure a model").waitFor();
      await checklist.getByRole("link", { name: "Add a workspace" }).waitFor();
      await expectAccessible(p, "first-run checklist");
      await screenshot(p, "first-run");
      await bare.api("POST", "/workspaces", {
        key,
        body: { name: "local", repos: [{ name: "acme/greeter", clone_url: repo.dir }] },
      });
      await p.reload();
      await p.getByRole("button", { name: "New task" }).click();
      await p.getByTestId("no-model").waitFor();
      await p.getByLabel("Repository").first().selectOption({ label: "acme/greeter (local)" });
      await p.getByLabel("What should change?").fill("Anything");
      // The confirmation is declined: nothing is created, nothing counted.
      p.once("dialog", (d) => void d.dismiss());
      await p.getByRole("button", { name: "Create task" }).click();
      await expect
        .poll(async () => (await bare.api("GET", "/keys/me", { key })).body.tasks_this_month)
        .toBe(0);
      expect(new URL(p.url()).pathname).toBe("/dashboard/tasks");
      await expectAccessible(p, "new task without a model");
    } finally {
      await ctx.close();
      await bare.stop();
    }
  });

  it("follows the system's dark mode, accessibly, and has a favicon", async () => {
    const dark = await browser.newContext({
      viewport: { width: 1280, height: 900 },
      colorScheme: "dark",
    });
    const p = await dark.newPage();
    await p.addInitScript((k) => sessionStorage.setItem("foreman.apiKey", k), await keyOf());
    await p.goto(server.url + "/dashboard/tasks");
    await p.getByTestId("task-list").waitFor();
    const bg = await p.evaluate(() => getComputedStyle(document.body).backgroundColor);
    const [r, g, b] = bg.match(/\d+/g)!.map(Number);
    expect(r! + g! + b!).toBeLessThan(150);
    await expectAccessible(p, "tasks (dark)");
    await p.screenshot({ path: "test-results/screenshots/dark-tasks.png" });
    // The task with the diff, in dark mode.
    await p.locator(`[data-task="${mainTaskId}"]`).click();
    await p.locator(".d2h-file-wrapper").first().waitFor();
    await p.locator(".hljs").first().waitFor();
    await expectAccessible(p, "task with a diff (dark)");
    await p.screenshot({ path: "test-results/screenshots/dark-task.png", fullPage: true });
    await dark.close();
    const icon = await fetch(server.url + "/favicon.ico");
    expect(icon.status).toBe(200);
    expect(icon.headers.get("content-type")).toMatch(/icon/);
  });

  /*
   * The heartbeat is the service's: a `log` event "still running `<cmd>` (N s)" every
   * SANDBOX_HEARTBEAT_S (10 s) during a long command. A 12-second check in a real repository
   * shows it in the page's log.
   */
  it("shows the service's heartbeat in the log while a slow check runs", async () => {
    const key = await keyOf();
    const slow = await createGitRepo({
      "package.json": JSON.stringify({ name: "slow", version: "1.0.0", type: "module" }),
      ".github/foreman.yml":
        'verify:\n  - name: slow check\n    run: node -e "setTimeout(() => {}, 12000)"\n',
    });
    try {
      const ws = await server.api("POST", "/workspaces", {
        key,
        body: { name: "slow", repos: [{ name: "acme/slow", clone_url: slow.dir }] },
      });
      const repos = await server.api("GET", `/workspaces/${ws.body.id}/repos`, { key });
      const created = await server.api("POST", "/tasks", {
        key,
        body: {
          workspace_id: ws.body.id,
          repo_id: repos.body[0].id,
          description: "Add a greeting helper slowly",
          auto_approve: true,
        },
      });
      await visit(`/tasks/${created.body.id}`, "slow task");
      await page
        .getByTestId("log")
        .getByText(/still running .*\(\d+ s\)/)
        .first()
        .waitFor({ timeout: PIPELINE_MS });
    } finally {
      await slow.remove();
    }
  }, 360_000);

  it("works on a 390 px phone screen", async () => {
    const phone = await browser.newContext({
      viewport: { width: 390, height: 844 },
      isMobile: true,
    });
    const p = await phone.newPage();
    const key = (await page.evaluate(() => sessionStorage.getItem("foreman.apiKey")))!;
    await p.goto(server.url + "/dashboard/");
    await p.getByLabel("API key").fill(key);
    await p.getByRole("button", { name: "Sign in" }).click();
    await p.getByRole("heading", { name: "Tasks" }).waitFor();
    expect(await p.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    await expectAccessible(p, "tasks (phone)");
    // Escape closes the menu and gives the focus back to its button, even pressed at once
    // after opening it (the menu listens from the render that opens it; listening from a
    // plain effect, after the next frame, lost such an Escape on a loaded machine).
    await p.getByRole("button", { name: "Menu" }).click();
    await p.keyboard.press("Escape");
    await expect(
      p.getByRole("button", { name: "Menu" }).getAttribute("aria-expanded"),
    ).resolves.toBe("false");
    await expect(p.evaluate(() => document.activeElement?.textContent)).resolves.toBe("Menu");
    await p.getByRole("button", { name: "Menu" }).click();
    // Touch targets: every link and button of the menu at least 44 px high.
    const small = await p.evaluate(() =>
      Array.from(document.querySelectorAll<HTMLElement>("header a, header button, main button"))
        .filter((el) => el.offsetParent !== null)
        .map((el) => [el.textContent?.trim(), el.getBoundingClientRect().height] as const)
        .filter(([, h]) => h < 44),
    );
    expect(small).toEqual([]);
    await p.getByRole("link", { name: "Keys" }).click();
    await p.getByRole("heading", { name: "API keys" }).waitFor();
    await p.getByTestId("usage").waitFor();
    expect(await p.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    await p.screenshot({ path: "test-results/screenshots/phone-keys.png" });
    // Signing out forgets the key.
    await p.getByRole("button", { name: "Menu" }).click();
    await p.getByRole("button", { name: "Sign out" }).click();
    await p.getByRole("heading", { name: "Sign in" }).waitFor();
    expect(await p.evaluate(() => sessionStorage.getItem("foreman.apiKey"))).toBeNull();
    await phone.close();
    expect(pageErrors).toEqual([]);
  });

  it("deletes a workspace after a confirmation, refused in the API's words while a task of it waits", async () => {
    const key = await keyOf();
    // The tests above used this free-tier account's month (10 tasks): one more needs pro.
    const me = await server.api("GET", "/keys/me", { key });
    const row = await server.service.db.models.ApiKey.findOne({ key_id: me.body.id }).lean();
    await setTier(server.service.db.models, row!.account_id, "pro");
    const ws = await server.api("POST", "/workspaces", {
      key,
      body: { name: "scratch", repos: [{ name: "acme/scratch", clone_url: repo.dir }] },
    });
    expect(ws.status).toBe(201);
    const task = await server.api("POST", "/tasks", {
      key,
      body: { workspace_id: ws.body.id, repo_id: "acme/scratch", description: "Waits at the gate" },
    });
    expect(task.status, JSON.stringify(task.body)).toBe(201);
    await untilStatus(key, task.body.id, "awaiting_approval");
    await visit("/workspaces", "workspaces (two)");
    const card = page.getByTestId("workspace-scratch");
    const asked: string[] = [];
    const record = (d: Dialog) => void asked.push(d.message());
    page.on("dialog", record); // the page's own handler accepts it
    try {
      await card.getByRole("button", { name: "Delete" }).click();
      await card.getByRole("alert").filter({ hasText: task.body.id }).waitFor();
      expect(asked).toEqual([
        expect.stringMatching(/^Delete the workspace scratch and its repositories\? /),
      ]);
      await expectAccessible(page, "workspaces (delete refused)");
      await screenshot(page, "workspaces-delete-refused");
      expect((await server.api("POST", `/tasks/${task.body.id}/cancel`, { key })).status).toBe(200);
      await card.getByRole("button", { name: "Delete" }).click();
      await card.waitFor({ state: "detached" });
    } finally {
      page.off("dialog", record);
    }
    expect(asked).toHaveLength(2);
    expect((await server.api("GET", `/workspaces/${ws.body.id}`, { key })).status).toBe(404);
    await page.getByTestId("workspace-local").waitFor();
    expect(pageErrors).toEqual([]);
  }, 180_000);
});
