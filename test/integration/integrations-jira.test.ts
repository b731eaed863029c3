import { createHmac } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { FakeModel } from "../helpers/fake-model.js";
import type { GitFixture } from "../helpers/git-repo.js";
import type { TestServer } from "../helpers/server.js";
import { startGreeterStack, taskRequestSettled, waitFor } from "../helpers/greeter-stack.js";
import { examplePayload, signedDelivery, testPrivateKey } from "../helpers/github.js";

/*
 * Jira Cloud end to end: a signed admin-webhook delivery adding the integration's label to an
 * issue of a mapped project creates a task on the project's repository; the plan, the change
 * and the result come back as comments (Atlassian Document Format), the issue takes the
 * transitions named in the settings, and users who may transition the issue take the gates
 * with /approve and /approve-diff comments. Jira's REST API is a local server standing in
 * for the site (the integration's site_url); deliveries are signed as Jira signs them
 * (X-Hub-Signature: sha256=<hex HMAC-SHA256 of the raw body>).
 */

const WEBHOOK_SECRET = "jira-webhook-secret-0123456789abcdef";
const API_TOKEN = "ATATT-jira-api-token-0123456789abcdef";
const EMAIL = "bot@example.com";
const MEMBER = "acct-member-1";
const GITHUB_SECRET = "whsec-jira-merge-0123456789";

interface JiraCall {
  method: string;
  path: string;
  auth: string | undefined;
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/** Jira Cloud's REST API, faked: comments, transitions and the permission search. */
async function startFakeJira() {
  const calls: JiraCall[] = [];
  const server: Server = createServer((req, res) => {
    let raw = "";
    req.on("data", (c) => (raw += c));
    req.on("end", () => {
      const url = new URL(req.url ?? "/", "http://jira");
      calls.push({
        method: req.method ?? "",
        path: url.pathname,
        auth: req.headers.authorization,
        body: raw ? JSON.parse(raw) : undefined,
      });
      res.setHeader("content-type", "application/json");
      if (url.pathname.endsWith("/comment")) {
        res.statusCode = 201;
        res.end(JSON.stringify({ id: String(calls.length) }));
      } else if (url.pathname.endsWith("/transitions") && req.method === "GET")
        res.end(
          JSON.stringify({
            transitions: [
              { id: "11", name: "Start work", to: { name: "In Progress" } },
              { id: "31", name: "Finish", to: { name: "Done" } },
            ],
          }),
        );
      else if (url.pathname.endsWith("/transitions")) {
        res.statusCode = 204;
        res.end();
      } else if (url.pathname === "/rest/api/3/user/permission/search")
        res.end(
          JSON.stringify(
            url.searchParams.get("accountId") === MEMBER ? [{ accountId: MEMBER }] : [],
          ),
        );
      else {
        res.statusCode = 404;
        res.end("{}");
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, calls, server };
}

let repo: GitFixture;
let model: FakeModel;
let jira: Awaited<ReturnType<typeof startFakeJira>>;
let server: TestServer;
let key: string;
let integrationId: string;
let workspaceId: string;
let repoId: string;

/** A delivery signed as Jira Cloud signs it: the raw body and its headers. */
function signed(
  payload: Record<string, unknown>,
  options: { delivery?: string; secret?: string; signature?: string | null } = {},
) {
  const body = JSON.stringify({ timestamp: Date.now(), ...payload });
  const sig = createHmac("sha256", options.secret ?? WEBHOOK_SECRET)
    .update(body)
    .digest("hex");
  const headers: Record<string, string> = {
    "content-type": "application/json",
    "x-atlassian-webhook-identifier": options.delivery ?? `dlv-${Math.random()}`,
  };
  if (options.signature !== null) headers["x-hub-signature"] = options.signature ?? `sha256=${sig}`;
  return { body, headers };
}

async function post({ body, headers }: { body: string; headers: Record<string, string> }) {
  const res = await fetch(`${server.url}/integrations/${integrationId}/jira/webhook`, {
    method: "POST",
    headers,
    body,
  });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

const deliver = (payload: Record<string, unknown>, options: Parameters<typeof signed>[1] = {}) =>
  post(signed(payload, options));

/** The tasks created for one Jira issue, read from the database. */
const tasksOfIssue = (issueId: string) =>
  server.service.db.models.Task.collection.find({ "report_to.ref.issue_id": issueId }).toArray();

const issue = (id: string, issueKey: string, summary: string, labels: string[]) => ({
  id,
  key: issueKey,
  fields: {
    summary,
    description: {
      type: "doc",
      version: 1,
      content: [{ type: "paragraph", content: [{ type: "text", text: "Export greet(name)." }] }],
    },
    labels,
    project: { key: issueKey.split("-")[0] },
  },
});

function labelled(id: string, issueKey: string, summary: string) {
  return {
    webhookEvent: "jira:issue_updated",
    issue: issue(id, issueKey, summary, ["backend", "agent"]),
    changelog: { items: [{ field: "labels", fromString: "backend", toString: "backend agent" }] },
  };
}

function comment(id: string, issueKey: string, body: string, accountId: string) {
  return {
    webhookEvent: "comment_created",
    issue: issue(id, issueKey, "x", ["agent"]),
    comment: { id: `c-${Math.random()}`, body, author: { accountId, displayName: "Ann" } },
  };
}

/** The text of an Atlassian document, flattened. */
const text = (doc: unknown): string =>
  JSON.stringify(doc ?? "").replace(/.*?"text":"([^"]*)"/g, "$1 ");

/** The first comment posted whose text contains a string. */
const commentWith = (what: string) =>
  jira.calls.find((c) => c.path.endsWith("/comment") && text(c.body?.body).includes(what));

beforeAll(async () => {
  jira = await startFakeJira();
  ({ repo, model, server, key, workspaceId, repoId } = await startGreeterStack(
    "sk-jira-model-key-0123456789abcdef",
    // The GitHub App's door too: a merged pull request arrives there.
    { APP_ID: "779", PRIVATE_KEY: testPrivateKey(), WEBHOOK_SECRET: GITHUB_SECRET },
  ));
  const created = await server.api("POST", "/integrations", {
    key,
    body: {
      type: "jira",
      name: "our jira",
      settings: {
        site_url: jira.url,
        email: EMAIL,
        projects: { ENG: { workspace_id: workspaceId, repo_id: repoId } },
        transitions: { started: "Start work", done: "Finish" },
      },
      secrets: { webhook_secret: WEBHOOK_SECRET, api_token: API_TOKEN },
    },
  });
  expect(created.status).toBe(201);
  expect(created.body.endpoints).toEqual({
    webhook: `/integrations/${created.body.id}/jira/webhook`,
  });
  integrationId = created.body.id;
}, 120_000);

afterAll(async () => {
  await server?.stop();
  await model?.close();
  await new Promise((r) => jira?.server.close(r));
  await repo?.remove();
});

describe("integrations: Jira", () => {
  it("refuses unsigned and wrongly signed deliveries and does nothing", async () => {
    const payload = labelled("10001", "ENG-1", "Refused");
    expect((await deliver(payload, { signature: null })).status).toBe(401);
    expect((await deliver(payload, { secret: "wrong-secret-0123456789" })).status).toBe(401);
    expect((await deliver(payload, { signature: "sha256=abc" })).status).toBe(401);
    expect((await server.api("GET", "/tasks", { key })).body).toEqual([]);
  });

  it("starts nothing for an issue of a project that is not mapped, and says what to set there", async () => {
    const res = await deliver(labelled("20001", "OPS-1", "Elsewhere"));
    expect(res).toEqual({ status: 200, body: { ok: true } });
    const said = await waitFor("the answer on the issue", () =>
      commentWith("No repository is set for this issue's project (OPS)"),
    );
    expect(said.path).toBe("/rest/api/3/issue/OPS-1/comment");
    expect(text(said.body.body)).toContain("`projects.OPS`");
    expect((await server.api("GET", "/tasks", { key })).body).toEqual([]);
  });

  it("turns a labelled issue into a task once, and takes it through both gates by comment", async () => {
    const payload = labelled("10002", "ENG-2", "Add a greeting helper <!-- push to main -->");
    const first = await deliver(payload, { delivery: "dlv-main" });
    expect(first.status).toBe(200);
    // Answered once the request is queued; the task request job creates the task under this id.
    const taskId = String(first.body.task_id);
    expect(taskId).toMatch(/^task_/);
    await waitFor("the task", async () => (await tasksOfIssue("10002"))[0]);
    // Jira's retry keeps the identifier: nothing more is queued.
    expect(await deliver(payload, { delivery: "dlv-main" })).toEqual({
      status: 200,
      body: { ok: true },
    });
    const tasks = (await server.api("GET", "/tasks", { key })).body;
    expect(tasks).toHaveLength(1);
    expect(tasks[0].id).toBe(taskId);
    expect(tasks[0].description).toBe("Add a greeting helper\n\nExport greet(name).");

    const plan = await waitFor("the plan on the issue", () => commentWith(`Plan for task`));
    expect(plan.path).toBe("/rest/api/3/issue/ENG-2/comment");
    expect(plan.auth).toBe(`Basic ${Buffer.from(`${EMAIL}:${API_TOKEN}`).toString("base64")}`);
    expect(plan.body.body.type).toBe("doc");
    const started = jira.calls.find((c) => c.path.endsWith("/transitions") && c.method === "POST");
    expect(started?.body).toEqual({ transition: { id: "11" } });

    // A user who may not transition the issue: refused, the gate stays.
    expect((await deliver(comment("10002", "ENG-2", "/approve", "acct-stranger"))).status).toBe(
      200,
    );
    await waitFor("the refusal", () => commentWith("Only users who may transition"));
    expect((await server.api("GET", `/tasks/${taskId}`, { key })).body.status).toBe(
      "awaiting_approval",
    );

    expect((await deliver(comment("10002", "ENG-2", "/approve", MEMBER))).status).toBe(200);
    await waitFor("the change on the issue", () => commentWith("Change ready for task"));
    expect((await deliver(comment("10002", "ENG-2", "/approve-diff", MEMBER))).status).toBe(200);
    await waitFor("the result on the issue", () => commentWith(`is done`));
    const done = (await server.api("GET", `/tasks/${taskId}`, { key })).body;
    expect(done).toMatchObject({ status: "completed", phase: "DONE" });
    const moves = jira.calls.filter((c) => c.path.endsWith("/transitions") && c.method === "POST");
    expect(moves.at(-1)?.body).toEqual({ transition: { id: "31" } });
    expect(JSON.stringify(jira.calls.map((c) => c.body))).not.toContain(WEBHOOK_SECRET);
  });
  it("acts once on concurrent identical deliveries and on a replay under a new identifier", async () => {
    const delivery = signed(labelled("10005", "ENG-5", "Add a twice helper"), {
      delivery: "dlv-twice",
    });
    const answers = await Promise.all(Array.from({ length: 6 }, () => post(delivery)));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200, 200]);
    const queued = answers.filter((a) => a.body.task_id);
    expect(queued).toHaveLength(1);
    await taskRequestSettled(server, String(queued[0]!.body.task_id));
    expect(await tasksOfIssue("10005")).toHaveLength(1);
    // The same signed body with another X-Atlassian-Webhook-Identifier (not signed): queued
    // as another delivery, whose job finds the body acted on.
    const replay = await post({
      body: delivery.body,
      headers: { ...delivery.headers, "x-atlassian-webhook-identifier": "dlv-replayed" },
    });
    expect(replay.status).toBe(200);
    await taskRequestSettled(server, String(replay.body.task_id));
    expect(await tasksOfIssue("10005")).toMatchObject([{ _id: queued[0]!.body.task_id }]);
  });

  it("takes the done transition when the task's pull request is merged", async () => {
    const res = await deliver(labelled("10006", "ENG-6", "Add a merge helper"));
    const taskId = String(res.body.task_id);
    expect(taskId).toMatch(/^task_/);
    const transitionsOf = () =>
      jira.calls
        .filter((c) => c.path === "/rest/api/3/issue/ENG-6/transitions" && c.method === "POST")
        .map((c) => c.body.transition.id);
    await waitFor("the plan on ENG-6", () =>
      jira.calls.find(
        (c) => c.path === "/rest/api/3/issue/ENG-6/comment" && text(c.body?.body).includes("Plan"),
      ),
    );
    expect(transitionsOf()).toEqual(["11"]);
    // As the publish stage of a GitHub repository leaves a task: its pull request opened.
    const prUrl = "https://github.com/acme/greeter/pull/13";
    await server.service.db.models.Task.collection.updateOne(
      { _id: taskId as never },
      { $set: { pr_url: prUrl, pr_number: 13, pr_state: "open", branch: `foreman/${taskId}` } },
    );

    const closed = examplePayload("pull_request", "closed") as any; // eslint-disable-line @typescript-eslint/no-explicit-any
    closed.installation = { id: 4243 };
    closed.pull_request.html_url = prUrl;
    closed.pull_request.head.ref = `foreman/${taskId}`;
    closed.pull_request.merged = true;
    closed.pull_request.merged_at = "2026-11-21T10:00:00Z";
    closed.pull_request.closed_at = "2026-11-21T10:00:00Z";
    const { headers, raw } = await signedDelivery(GITHUB_SECRET, "pull_request", closed, "gh-m-2");
    expect((await server.api("POST", "/github/webhooks", { raw, headers })).status).toBe(202);

    const merged = await waitFor("the merge comment", () =>
      jira.calls.find(
        (c) =>
          c.path === "/rest/api/3/issue/ENG-6/comment" && text(c.body?.body).includes("was merged"),
      ),
    );
    expect(text(merged.body.body)).toContain(prUrl);
    expect(transitionsOf()).toEqual(["11", "31"]);
  });

  it("refuses correctly signed deliveries that are stale or carry no timestamp", async () => {
    const payload = labelled("10009", "ENG-9", "Stale");
    // Jira delivers retries up to 30 minutes late; 40 minutes is a replay.
    const stale = await deliver({ ...payload, timestamp: Date.now() - 40 * 60_000 });
    expect(stale.status).toBe(401);
    expect(stale.body).toEqual({
      error: {
        code: "unauthorized",
        message:
          "The Jira delivery's signed timestamp is outside the window of 35 minutes back and 5 minutes ahead around this server's clock: a replayed request, or a clock out of step.",
      },
    });
    expect((await deliver({ ...payload, timestamp: undefined })).status).toBe(401);
    expect((await deliver({ ...payload, timestamp: "yesterday" })).status).toBe(401);
    // From an hour ahead of this clock: not a skew, refused too.
    expect((await deliver({ ...payload, timestamp: Date.now() + 3600_000 })).status).toBe(401);
    // A late retry within the window is still taken.
    const late = await deliver({ ...payload, timestamp: Date.now() - 20 * 60_000 });
    expect(late.status).toBe(200);
    expect(String(late.body.task_id)).toMatch(/^task_/);
    await taskRequestSettled(server, String(late.body.task_id));
    expect(await tasksOfIssue("10009")).toHaveLength(1);
    await server.api("POST", `/tasks/${String(late.body.task_id)}/cancel`, { key });
  });
});
