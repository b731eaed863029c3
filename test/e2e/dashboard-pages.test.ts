/// <reference lib="dom" />
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { recordModelCall } from "../../src/domain/tasks/trajectories.js";
import { expectAccessible, launchBrowser, screenshot } from "../helpers/browser.js";
import { placeholderRepo } from "../helpers/git-repo.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

/*
 * Dashboard pages in real Chromium against the real service (issue 43, "dead ends and
 * confusions"), without workers: the data a page shows is made through the API, or written
 * to the real database where only the pipeline would make it (a finished scan, a diff, model
 * calls). The getting-started box shows operator settings to the operator only; the Settings
 * page manages the account's MCP servers; an unknown path says "not found"; automations read
 * in words with their webhook URL; an unpriced model's cost says so; a one-scan chart spans
 * its own day; the trajectory names the round of a revision; a diff prints whole.
 */

let server: TestServer;
let browser: Browser;
let page: Page;
let key: string;
let accountId: string;
let workspaceId: string;
let repoId: string;
const pageErrors: string[] = [];

/** A client address beyond the machine, as a proxy TRUST_PROXY trusts would forward it. */
const REMOTE = "203.0.113.7";

async function visit(p: Page, path: string, label: string) {
  await p.goto(server.url + "/dashboard" + path);
  await p.getByRole("heading", { level: 1 }).first().waitFor();
  await expectAccessible(p, label);
}

/** A browser tab signed in with the test's key; `headers` are sent with every request. */
async function tab(headers?: Record<string, string>): Promise<{ ctx: BrowserContext; p: Page }> {
  const ctx = await browser.newContext({
    viewport: { width: 1280, height: 900 },
    ...(headers ? { extraHTTPHeaders: headers } : {}),
  });
  const p = await ctx.newPage();
  p.on("pageerror", (err) => pageErrors.push(err.message));
  p.on("dialog", (d) => void d.accept());
  await p.addInitScript((k) => sessionStorage.setItem("foreman.apiKey", k), key);
  return { ctx, p };
}

async function newTask(description: string): Promise<string> {
  const res = await server.api("POST", "/tasks", {
    key,
    body: { workspace_id: workspaceId, repo_id: repoId, description },
  });
  expect(res.status).toBe(201);
  return res.body.id as string;
}

beforeAll(async () => {
  // No model and no GitHub App: the service has operator settings missing. TRUST_PROXY 1 lets
  // a test present a remote client address with X-Forwarded-For.
  server = await startTestServer({
    env: { LLM_API_KEY: undefined, LLM_PROVIDER: undefined, TRUST_PROXY: "1" },
  });
  ({ key } = await server.signup());
  const ws = await server.api("POST", "/workspaces", {
    key,
    body: { name: "local", repos: [{ name: "acme/greeter", clone_url: await placeholderRepo() }] },
  });
  expect(ws.status).toBe(201);
  workspaceId = ws.body.id;
  repoId = (await server.api("GET", `/workspaces/${workspaceId}/repos`, { key })).body[0].id;
  const keyDoc = await server.service.db.models.Workspace.findOne({ _id: workspaceId }).lean();
  accountId = (keyDoc as unknown as { account_id: string }).account_id;
  browser = await launchBrowser();
  ({ p: page } = await tab());
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

describe("dashboard pages", () => {
  it("shows operator settings to the operator only; a user reads user-level steps", async () => {
    // From the service's own machine: the operator. GET /status says so.
    const own = await server.api("GET", "/status", { key });
    expect(own.body.viewer).toEqual({ operator: true });
    await visit(page, "/tasks", "getting started (operator)");
    const checklist = page.getByTestId("checklist");
    await checklist.getByText("Configure a model: set LLM_API_KEY").waitFor();
    const operatorBox = checklist.getByTestId("operator-settings");
    await operatorBox.getByText("APP_ID", { exact: false }).first().waitFor();
    expect(await operatorBox.textContent()).toContain("GET /github/register");
    await screenshot(page, "getting-started-operator");

    // From elsewhere: a user. The same status, without the operator's view.
    const remote = await server.api("GET", "/status", {
      key,
      headers: { "x-forwarded-for": REMOTE },
    });
    expect(remote.body.viewer).toEqual({ operator: false });
    const { ctx, p } = await tab({ "x-forwarded-for": REMOTE });
    try {
      await visit(p, "/tasks", "getting started (user)");
      const box = p.getByTestId("checklist");
      await box.getByText("ask the service's operator").waitFor();
      const text = (await box.textContent())!;
      for (const word of [
        "APP_ID",
        "PUBLIC_URL",
        "SANDBOX_NETWORK",
        "LLM_API_KEY",
        "/github/register",
      ])
        expect(text, word).not.toContain(word);
      expect(await box.getByTestId("operator-settings").count()).toBe(0);
      await screenshot(p, "getting-started-user");
    } finally {
      await ctx.close();
    }
  });

  it("has a Settings page for the account's MCP servers: add, edit, secrets set or not, delete", async () => {
    await visit(page, "/settings", "settings (empty)");
    expect(new URL(page.url()).pathname).toBe("/dashboard/settings");
    await page.getByRole("heading", { name: "Settings", level: 1 }).waitFor();
    const add = page.getByTestId("add-server");
    await add.getByLabel("Name").fill("tracker");
    await add.getByLabel("Command").fill("npx");
    await add.getByLabel("Arguments").fill("-y\n@acme/tracker-mcp");
    await add.getByLabel("Secrets as environment variables").fill("TRACKER_TOKEN");
    await add.getByRole("button", { name: "Add server" }).click();
    const card = page.getByTestId("server-tracker");
    await card.getByText("npx -y @acme/tracker-mcp").waitFor();
    await card.getByText("(not set)").waitFor();
    let stored = (await server.api("GET", "/settings/mcp-servers", { key })).body;
    expect(stored.servers.tracker).toEqual({
      command: "npx",
      args: ["-y", "@acme/tracker-mcp"],
      env_secrets: ["TRACKER_TOKEN"],
    });

    // The secret's value is written, then shown as set, never read back.
    const secret = page.getByTestId("secret-TRACKER_TOKEN");
    await secret.getByLabel("New value of TRACKER_TOKEN").fill("tok-secret-value-123");
    await secret.getByRole("button", { name: "Set" }).click();
    await secret.getByText("set", { exact: true }).waitFor();
    await card.getByText("(set)").waitFor();
    expect(await page.content()).not.toContain("tok-secret-value-123");
    stored = (await server.api("GET", "/settings/mcp-servers", { key })).body;
    expect(stored.secrets).toEqual(["TRACKER_TOKEN"]);
    await expectAccessible(page, "settings (a server)");
    await screenshot(page, "settings");

    // Edited into an HTTP server with a header secret.
    await card.getByRole("button", { name: "Edit" }).click();
    const edit = page.getByTestId("edit-tracker");
    await edit.getByLabel("Runs as").selectOption("url");
    await edit.getByLabel("URL").fill("https://mcp.example.com/tracker");
    await edit.getByLabel("Secrets as headers").fill("Authorization: TRACKER_TOKEN");
    await edit.getByRole("button", { name: "Save server" }).click();
    await page.getByTestId("server-tracker").getByText("https://mcp.example.com/tracker").waitFor();
    stored = (await server.api("GET", "/settings/mcp-servers", { key })).body;
    expect(stored.servers.tracker).toEqual({
      url: "https://mcp.example.com/tracker",
      header_secrets: { Authorization: "TRACKER_TOKEN" },
    });

    await page.getByTestId("server-tracker").getByRole("button", { name: "Delete" }).click();
    await page.getByText("No MCP servers yet.").waitFor();
    stored = (await server.api("GET", "/settings/mcp-servers", { key })).body;
    expect(stored.servers).toEqual({});
  });

  it("says a dashboard path that is no page is not found, instead of going to Tasks", async () => {
    await visit(page, "/no-such-page", "not found");
    await page.getByRole("heading", { name: "Page not found" }).waitFor();
    expect(new URL(page.url()).pathname).toBe("/dashboard/no-such-page");
    await page.getByRole("link", { name: "Go to Tasks" }).click();
    await page.getByRole("heading", { name: "Tasks", level: 1 }).waitFor();
    // The dashboard's root still opens Tasks.
    await page.goto(server.url + "/dashboard/");
    await page.getByRole("heading", { name: "Tasks", level: 1 }).waitFor();
    expect(new URL(page.url()).pathname).toBe("/dashboard/tasks");
  });

  it("shows automations in words, by repository name, with a webhook's URL", async () => {
    const base = { workspace_id: workspaceId, repo_id: repoId, task_template: "Do it" };
    for (const body of [
      { ...base, trigger_type: "cron", trigger_config: { schedule: "0 9 * * 1-5" } },
      {
        ...base,
        trigger_type: "webhook",
        trigger_config: { match: { action: "opened" }, secret: "s3cret-value" },
      },
      { ...base, trigger_type: "ci_failure", trigger_config: { branch: "main" } },
    ])
      expect((await server.api("POST", "/automations", { key, body })).status).toBe(201);
    await visit(page, "/automations", "automations in words");
    const triggers = page.getByTestId("trigger");
    await expect
      .poll(async () => (await triggers.allTextContents()).join("\n"), { timeout: 10_000 })
      .toContain("acme/greeter");
    const text = (await triggers.allTextContents()).join("\n");
    expect(text).toContain("Every weekday at 09:00 UTC");
    expect(text).toContain("When CI fails on main");
    expect(text).toContain("On a webhook");
    expect(text).not.toContain(repoId);
    const cards = (await page.locator(".cards").textContent())!;
    expect(cards).not.toContain('{"');
    expect(cards).toContain('action is "opened"');
    expect(await page.getByTestId("webhook-url").textContent()).toBe(
      `${server.url}/automations/webhook`,
    );
    await page.getByRole("button", { name: "Copy URL" }).waitFor();
    await screenshot(page, "automations-in-words");
  });

  it("says unpriced where the model has no price, not $0.0000, on the task and its calls", async () => {
    const id = await newTask("Unpriced task");
    const { Task } = server.service.db.models;
    await Task.updateOne(
      { _id: id },
      { $set: { cost: { input_tokens: 1200, output_tokens: 300, usd: 0 } } },
    );
    await recordModelCall(server.service.db.models, { _id: id, account_id: accountId }, "plan", {
      step: 1,
      at: new Date(),
      model: "local-model",
      messages: [],
      response: { text: "a plan", tool_calls: [] },
      tool_results: [],
      usage: { inputTokens: 1200, outputTokens: 300, usd: 0, priced: false },
      ms: 1000,
    });
    await visit(page, `/tasks/${id}`, "unpriced task");
    await expect.poll(() => page.getByTestId("task-cost").textContent()).toBe("unpriced");
    await page.getByText("Model calls (trajectory)").click();
    const calls = page.getByTestId("trajectory");
    await calls.getByText("unpriced").waitFor();
    expect(await page.locator("#main").textContent()).not.toContain("$0.0000");
    // One NDJSON line: the test client parses it as JSON.
    const line = (await server.api("GET", `/tasks/${id}/trajectory`, { key })).body;
    expect(line).toMatchObject({ stage: "plan", usd: 0, priced: false });
  });

  it("labels the model calls after a revision by their round", async () => {
    const id = await newTask("Revised task");
    const models = server.service.db.models;
    const t0 = Date.now() - 60_000;
    const call = (step: number, at: number) =>
      recordModelCall(models, { _id: id, account_id: accountId }, "plan", {
        step,
        at: new Date(at),
        model: "m",
        messages: [],
        response: { text: "", tool_calls: [] },
        tool_results: [],
        usage: { inputTokens: 10, outputTokens: 5, usd: 0.001, priced: true },
        ms: 10,
      });
    await call(1, t0);
    await call(2, t0 + 1000);
    await models.Task.updateOne(
      { _id: id },
      {
        $set: {
          revisions: [
            { gate: "plan", feedback: "Also say goodbye", by: "me", at: new Date(t0 + 2000) },
          ],
        },
      },
    );
    await call(1, t0 + 3000);
    await call(2, t0 + 4000);
    await visit(page, `/tasks/${id}`, "revised task");
    await page.getByText("Model calls (trajectory)").click();
    const labels = page.getByTestId("trajectory").getByTestId("call-label");
    await expect
      .poll(() => labels.allTextContents())
      .toEqual(["plan #1", "plan #2", "round 1 · plan #1", "round 1 · plan #2"]);
    await page
      .getByTestId("trajectory")
      .getByRole("heading", { name: "Round 1: changes requested on the plan" })
      .waitFor();
    await expectAccessible(page, "trajectory with rounds");
  });

  it("charts a one-scan health history over its own day, not years", async () => {
    const finished = new Date();
    await server.service.db.models.HealthReport.collection.insertOne({
      _id: "hr_one_scan" as never,
      account_id: accountId,
      workspace_id: workspaceId,
      repo_id: repoId,
      status: "completed",
      commit_sha: "0123456789abcdef0123456789abcdef01234567",
      score: 82,
      grade: "B",
      metrics: null,
      weights: null,
      error: null,
      attempts: 1,
      heartbeat_at: finished,
      started_at: finished,
      finished_at: finished,
      created_at: finished,
      updated_at: finished,
    });
    await visit(page, "/health", "health, one scan");
    const chart = page.getByTestId("chart-health score history");
    await chart.waitFor();
    await expect.poll(() => chart.getAttribute("data-x-max")).not.toBeNull();
    const min = Number(await chart.getAttribute("data-x-min"));
    const max = Number(await chart.getAttribute("data-x-max"));
    const at = finished.getTime() / 1000;
    expect(min).toBeLessThanOrEqual(at);
    expect(max).toBeGreaterThanOrEqual(at);
    expect(max - min).toBeLessThanOrEqual(2 * 86_400);
    // The axis labels name the scan's year only.
    const year = String(finished.getUTCFullYear());
    const labels = await page.evaluate(() =>
      Array.from(document.querySelectorAll(".u-legend, .u-axis"))
        .map((e) => e.textContent)
        .join(" "),
    );
    for (const y of labels.match(/\b20\d\d\b/g) ?? []) expect(y).toBe(year);
  });

  it("prints every file of a diff, also those not scrolled to", async () => {
    const id = await newTask("A long diff");
    const files = Array.from({ length: 12 }, (_, i) => {
      const lines = Array.from({ length: 60 }, (__, j) => `+export const v${i}_${j} = ${j};`);
      return [
        `diff --git a/src/f${i}.js b/src/f${i}.js`,
        "new file mode 100644",
        "--- /dev/null",
        `+++ b/src/f${i}.js`,
        `@@ -0,0 +1,60 @@`,
        ...lines,
      ].join("\n");
    });
    await server.service.db.models.Task.updateOne(
      { _id: id },
      { $set: { diff: files.join("\n") + "\n" } },
    );
    await visit(page, `/tasks/${id}`, "long diff");
    const last = page.locator(".d2h-file-wrapper").last();
    await last.waitFor({ state: "attached" });
    await page.emulateMedia({ media: "print" });
    try {
      const drawn = await last.evaluate((el) => {
        const rows = Array.from(el.querySelectorAll<HTMLElement>(".d2h-code-line-ctn"));
        const box = el.querySelector<HTMLElement>(".d2h-file-diff")!;
        return {
          rows: rows.length,
          visible: rows.filter((r) => r.checkVisibility({ contentVisibilityAuto: true })).length,
          clipped: box.scrollHeight > box.clientHeight + 1,
        };
      });
      expect(drawn.rows).toBeGreaterThanOrEqual(60);
      expect(drawn).toEqual({ rows: drawn.rows, visible: drawn.rows, clipped: false });
      const pdf = await page.pdf({ format: "A4" });
      expect(pdf.byteLength).toBeGreaterThan(1000);
    } finally {
      await page.emulateMedia({ media: "screen" });
    }
  });

  it("raised no page errors", () => {
    expect(pageErrors).toEqual([]);
  });
});
