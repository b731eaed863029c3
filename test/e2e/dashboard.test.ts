/// <reference lib="dom" />
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentModel, type Script } from "../helpers/agent-model.js";
import { expectAccessible, launchBrowser, screenshot } from "../helpers/browser.js";
import { fakeModelEnv, startFakeModel, type FakeModel } from "../helpers/fake-model.js";
import { createGitRepo, type GitFixture } from "../helpers/git-repo.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

/*
 * The dashboard in real Chromium against the real service (workers on, real database, real
 * git, the scripted model): a person signs up, adds a workspace, creates a task, watches its
 * phases arrive, approves the plan and the diff, sees it done with its branch; manages keys;
 * runs a health scan; reads analytics. Every page is checked with axe-core and saved as a
 * screenshot (test-results/screenshots).
 */

const script: Script = {
  plan: () => [
    {
      name: "submit_plan",
      arguments: {
        summary: "Add a greeting helper.",
        steps: [
          {
            title: "Add greet()",
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

let repo: GitFixture;
let model: FakeModel;
let server: TestServer;
let browser: Browser;
let context: BrowserContext;
let page: Page;
const pageErrors: string[] = [];

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
  model = await startFakeModel(agentModel(script));
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
    await page.getByLabel("Clone URL").fill(repo.dir);
    await page.getByLabel("Default branch (optional)").fill("main");
    await page.getByRole("button", { name: "Add workspace" }).click();
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

    // The plan gate: phases arrived over the WebSocket, the plan is shown with its buttons.
    await page.getByRole("button", { name: "Approve plan" }).waitFor({ timeout: PIPELINE_MS });
    await page
      .getByTestId("phase")
      .filter({ hasText: /^AWAITING_APPROVAL$/ })
      .waitFor();
    for (const phase of ["CLONING", "INDEXING", "PLANNING"])
      await expect(page.locator(".timeline .phase-done", { hasText: phase }).count()).resolves.toBe(
        1,
      );
    await page.getByText("Add greet()").waitFor();
    await expectAccessible(page, "task at the plan gate");
    await screenshot(page, "task-plan");
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
    // The log shows the stream, replayed after a reload too.
    const lines = await page.getByTestId("log").locator("li").count();
    await page.reload();
    await page.getByTestId("log").waitFor();
    await page
      .getByTestId("log")
      .locator("li")
      .nth(lines - 1)
      .waitFor();
    expect(await page.getByTestId("log").locator("li").count()).toBe(lines);
    await screenshot(page, "task-done");

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

  it("creates a key shown once and revokes it after confirmation", async () => {
    await visit("/keys", "keys");
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
    await visit("/health", "health (no repository)");
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
    await page.getByLabel("Category").selectOption("security");
    await expect(page.locator(".cards > li").count()).resolves.toBeGreaterThan(0);
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
    await page.getByLabel("Schedule", { exact: true }).fill("0 9 * * 1");
    await page.getByLabel("Task template").fill("Weekly dependency check on {{date}}");
    await page.getByRole("button", { name: "Create automation" }).click();
    await page.getByText("Weekly dependency check on {{date}}").waitFor();
    await page.getByRole("button", { name: "Disable" }).click();
    await page.getByText("disabled").waitFor();
    await expectAccessible(page, "automations");
    await screenshot(page, "automations");
  });

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
    await p.getByRole("button", { name: "Menu" }).click();
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
});
