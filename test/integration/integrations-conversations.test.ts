import { createHmac } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { FakeModel } from "../helpers/fake-model.js";
import type { GitFixture } from "../helpers/git-repo.js";
import type { TestServer } from "../helpers/server.js";
import { startGreeterStack, waitFor } from "../helpers/greeter-stack.js";

/*
 * Feedback from chat and trackers (docs/api.md, "From chat and trackers"; issue 29 item 3): a reply
 * in a task's Slack thread, or a comment on its Linear or Jira issue, revises the task at its gate
 * and, once the task is done with a branch, makes a follow-up task; nothing the integration itself
 * writes acts. One service with the three vendors faked at their HTTP boundary; deliveries are
 * signed as each vendor signs them.
 */

const SLACK_SECRET = "slack-signing-secret-conv-0123456789";
const BOT_TOKEN = "xoxb-3333-4444-conversationtoken";
const CHANNEL = "C0CONVERS1";
const SLACK_USER = "UALLOWED1";

const LINEAR_SECRET = "linear-webhook-secret-conv-0123456789";
const LINEAR_KEY = "lin_api_conversation_0123456789abcdef";
const LINEAR_TEAM = "team-conv-1";
const LINEAR_MEMBER = "user-member-conv";
const LINEAR_BOT = "user-foreman-bot";

const JIRA_SECRET = "jira-webhook-secret-conv-0123456789";
const JIRA_TOKEN = "ATATT-jira-conversation-0123456789";
const JIRA_MEMBER = "acct-member-conv";
const JIRA_BOT = "acct-foreman-bot";

interface Call {
  vendor: "slack" | "linear" | "jira";
  op: string;
  body: Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/** One local server answering as Slack's Web API, Linear's GraphQL and a Jira site. */
async function startFakeVendors() {
  const calls: Call[] = [];
  let ts = 1700000000;
  const server: Server = createServer((req, res) => {
    let raw = "";
    req.on("data", (c) => (raw += c));
    req.on("end", () => {
      const url = new URL(req.url ?? "/", "http://vendors");
      res.setHeader("content-type", "application/json");
      if (url.pathname.startsWith("/slack/")) {
        const body = (req.headers["content-type"] ?? "").includes("json")
          ? (JSON.parse(raw || "{}") as Record<string, unknown>)
          : Object.fromEntries(
              [...new URLSearchParams(raw)].map(([k, v]) => [
                k,
                /^[[{]/.test(v) ? JSON.parse(v) : v,
              ]),
            );
        calls.push({ vendor: "slack", op: url.pathname.slice("/slack/".length), body });
        res.end(JSON.stringify({ ok: true, ts: `${ts++}.000100`, channel: body.channel }));
        return;
      }
      if (url.pathname === "/graphql") {
        const { query, variables } = JSON.parse(raw || "{}") as {
          query: string;
          variables: Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
        };
        const op = /(?:query|mutation)\s+(\w+)/.exec(query)?.[1] ?? "unknown";
        calls.push({ vendor: "linear", op, body: (variables?.input ?? variables ?? {}) as never });
        let data: unknown = {};
        if (op === "createComment") data = { commentCreate: { success: true } };
        else if (op === "updateIssue") data = { issueUpdate: { success: true } };
        else if (op === "ForemanViewer") data = { viewer: { id: LINEAR_BOT } };
        else if (op === "team_states")
          data = {
            team: {
              states: {
                nodes: [{ id: "st-progress", name: "In Progress", type: "started", position: 1 }],
                pageInfo: { hasNextPage: false, endCursor: "s1" },
              },
            },
          };
        else if (op === "team_members")
          data = {
            team: {
              members: {
                nodes: [{ id: LINEAR_MEMBER }, { id: LINEAR_BOT }],
                pageInfo: { hasNextPage: false, endCursor: "c1" },
              },
            },
          };
        res.end(JSON.stringify({ data }));
        return;
      }
      // Jira
      calls.push({
        vendor: "jira",
        op: `${req.method} ${url.pathname}`,
        body: raw ? (JSON.parse(raw) as never) : {},
      });
      if (url.pathname.endsWith("/comment")) {
        res.statusCode = 201;
        res.end(JSON.stringify({ id: String(calls.length) }));
      } else if (url.pathname === "/rest/api/3/myself")
        res.end(JSON.stringify({ accountId: JIRA_BOT, displayName: "foreman" }));
      else if (url.pathname === "/rest/api/3/user/permission/search") {
        const who = url.searchParams.get("accountId");
        res.end(
          JSON.stringify(who === JIRA_MEMBER || who === JIRA_BOT ? [{ accountId: who }] : []),
        );
      } else if (url.pathname.endsWith("/transitions") && req.method === "GET")
        res.end(JSON.stringify({ transitions: [] }));
      else {
        res.statusCode = 404;
        res.end("{}");
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { base, calls, server };
}

let repo: GitFixture;
let model: FakeModel;
let vendors: Awaited<ReturnType<typeof startFakeVendors>>;
let server: TestServer;
let key: string;
const ids = { slack: "", linear: "", jira: "" };

const db = () => server.service.db.models.Task.collection;

async function postRaw(path: string, body: string, headers: Record<string, string>) {
  const res = await fetch(server.url + path, { method: "POST", headers, body });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

function slackSigned(body: string) {
  const timestamp = String(Math.floor(Date.now() / 1000));
  const sig = createHmac("sha256", SLACK_SECRET).update(`v0:${timestamp}:${body}`).digest("hex");
  return { "x-slack-signature": `v0=${sig}`, "x-slack-request-timestamp": timestamp };
}

const slackForm = (path: string, form: Record<string, string>) => {
  const body = new URLSearchParams(form).toString();
  return postRaw(`/integrations/${ids.slack}/slack/${path}`, body, {
    "content-type": "application/x-www-form-urlencoded",
    ...slackSigned(body),
  });
};

const slackEvent = (event: Record<string, unknown>, eventId = `Ev${Math.random()}`) => {
  const body = JSON.stringify({
    type: "event_callback",
    team_id: "T0TEAM0001",
    event_id: eventId,
    event,
  });
  return postRaw(`/integrations/${ids.slack}/slack/events`, body, {
    "content-type": "application/json",
    ...slackSigned(body),
  });
};

const press = (action: string, taskId: string) =>
  slackForm("interactions", {
    payload: JSON.stringify({
      type: "block_actions",
      user: { id: SLACK_USER },
      team: { id: "T0TEAM0001" },
      channel: { id: CHANNEL },
      trigger_id: `press-${Math.random()}`,
      actions: [{ action_id: action, value: taskId }],
    }),
  });

function linearDelivery(payload: Record<string, unknown>) {
  const body = JSON.stringify({ ...payload, webhookId: "wh-1", webhookTimestamp: Date.now() });
  return postRaw(`/integrations/${ids.linear}/linear/webhook`, body, {
    "content-type": "application/json",
    "linear-delivery": `dlv-${Math.random()}`,
    "linear-signature": createHmac("sha256", LINEAR_SECRET).update(body).digest("hex"),
  });
}

const linearComment = (issueId: string, body: string, userId: string) =>
  linearDelivery({
    type: "Comment",
    action: "create",
    data: { id: `c-${Math.random()}`, body, issueId, userId, user: { id: userId, name: "Ann" } },
  });

function jiraDelivery(payload: Record<string, unknown>) {
  const body = JSON.stringify({ timestamp: Date.now(), ...payload });
  return postRaw(`/integrations/${ids.jira}/jira/webhook`, body, {
    "content-type": "application/json",
    "x-atlassian-webhook-identifier": `dlv-${Math.random()}`,
    "x-hub-signature": `sha256=${createHmac("sha256", JIRA_SECRET).update(body).digest("hex")}`,
  });
}

const jiraIssue = (id: string, issueKey: string, labels: string[]) => ({
  id,
  key: issueKey,
  fields: {
    summary: "Add a greeting helper",
    description: "Export greet(name).",
    labels,
    project: { key: "ENG" },
  },
});

const jiraComment = (id: string, issueKey: string, body: string, accountId: string) =>
  jiraDelivery({
    webhookEvent: "comment_created",
    issue: jiraIssue(id, issueKey, ["agent"]),
    comment: { id: `c-${Math.random()}`, body, author: { accountId, displayName: "Ann" } },
  });

/** The API's view of a task. */
const task = async (id: string) => (await server.api("GET", `/tasks/${id}`, { key })).body;

/** Waits for the task to reach a status. */
const statusOf = (id: string, status: string) =>
  waitFor(`task ${id} ${status}`, async () => {
    const t = await task(id);
    return t.status === status ? t : undefined;
  });

/** Calls to a vendor whose text contains `what`, in order. */
const said = (vendor: Call["vendor"], what: string) =>
  vendors.calls.filter((c) => c.vendor === vendor && JSON.stringify(c.body).includes(what));

beforeAll(async () => {
  vendors = await startFakeVendors();
  ({ repo, model, server, key } = await startGreeterStack("sk-conv-model-key-0123456789abcdef", {
    SLACK_API_URL: `${vendors.base}/slack/`,
    LINEAR_API_URL: `${vendors.base}/graphql`,
  }));
  const ws = (await server.api("GET", "/workspaces", { key })).body[0];
  const repos = (await server.api("GET", `/workspaces/${ws.id}/repos`, { key })).body;
  const target = { workspace_id: ws.id as string, repo_id: repos[0].id as string };
  const make = async (body: Record<string, unknown>) => {
    const created = await server.api("POST", "/integrations", { key, body });
    expect(created.status).toBe(201);
    return created.body.id as string;
  };
  ids.slack = await make({
    type: "slack",
    name: "chat",
    settings: {
      team_id: "T0TEAM0001",
      channels: { [CHANNEL]: target },
      allowed_users: [SLACK_USER],
    },
    secrets: { signing_secret: SLACK_SECRET, bot_token: BOT_TOKEN },
  });
  ids.linear = await make({
    type: "linear",
    name: "linear",
    settings: { teams: { ENG: target } },
    secrets: { webhook_secret: LINEAR_SECRET, api_key: LINEAR_KEY },
  });
  ids.jira = await make({
    type: "jira",
    name: "jira",
    settings: { site_url: vendors.base, email: "bot@example.com", projects: { ENG: target } },
    secrets: { webhook_secret: JIRA_SECRET, api_token: JIRA_TOKEN },
  });
}, 120_000);

afterAll(async () => {
  await server?.stop();
  await model?.close();
  await new Promise((r) => vendors?.server.close(r));
  await repo?.remove();
});

describe("feedback from chat and trackers", () => {
  it("Slack: a reply in the task's thread revises at the plan gate, the bot's own message does nothing, a reply after DONE follows up", async () => {
    const asked = await slackForm("commands", {
      command: "/foreman",
      text: "task add a greeting helper",
      user_id: SLACK_USER,
      channel_id: CHANNEL,
      team_id: "T0TEAM0001",
      trigger_id: "trig-conv-1",
    });
    expect(asked.status).toBe(200);
    const created = await waitFor("the Slack task", async () => {
      const t = await db().findOne({ "report_to.integration_id": ids.slack });
      return t?.report_to?.ref?.thread_ts ? t : undefined;
    });
    const taskId = String(created._id);
    const threadTs = String(created.report_to.ref.thread_ts);
    await statusOf(taskId, "awaiting_approval");
    await waitFor("the plan in the thread", () => said("slack", `Plan for task`)[0]);

    // The bot's own message in the thread (its notices, its answers) does nothing.
    const own = await slackEvent({
      type: "message",
      channel: CHANNEL,
      user: "UBOTUSER01",
      bot_id: "B0FOREMAN1",
      text: "Plan for task: revise me",
      ts: "1800000000.000001",
      thread_ts: threadTs,
    });
    expect(own.status).toBe(200);
    expect((await task(taskId)).revisions ?? []).toEqual([]);

    // A person's reply arrives twice (as a message and as a mention): one revision.
    const reply = {
      channel: CHANNEL,
      user: SLACK_USER,
      text: "<@UBOTUSER01> please also greet in French",
      ts: "1800000000.000002",
      thread_ts: threadTs,
    };
    expect((await slackEvent({ type: "message", ...reply })).status).toBe(200);
    expect((await slackEvent({ type: "app_mention", ...reply })).status).toBe(200);
    const revised = await task(taskId);
    expect(revised.revisions).toHaveLength(1);
    expect(revised.revisions[0]).toMatchObject({
      gate: "plan",
      feedback: "please also greet in French",
      by: `Slack user <@${SLACK_USER}>`,
    });
    const answered = said("slack", "revising its plan");
    expect(answered).toHaveLength(1);
    expect(answered[0]!.body).toMatchObject({ channel: CHANNEL, thread_ts: threadTs });
    await statusOf(taskId, "awaiting_approval");
    await waitFor("the new plan in the thread", () =>
      said("slack", `Plan for task`).length >= 2 ? true : undefined,
    );

    // Someone the integration does not allow: a plain message is left alone.
    await slackEvent({ type: "message", ...reply, user: "USTRANGER1", ts: "1800000000.000003" });
    expect((await task(taskId)).revisions).toHaveLength(1);

    expect((await press("gate:approve", taskId)).status).toBe(200);
    await statusOf(taskId, "awaiting_diff_approval");
    expect((await press("gate:approve-diff", taskId)).status).toBe(200);
    const done = await statusOf(taskId, "completed");
    expect(done.branch).toBeTruthy();

    // After DONE, a reply in the thread is a follow-up on the task's branch.
    expect(
      (
        await slackEvent({
          type: "message",
          channel: CHANNEL,
          user: SLACK_USER,
          text: "now add a farewell helper too",
          ts: "1800000000.000004",
          thread_ts: threadTs,
        })
      ).status,
    ).toBe(200);
    const followUp = await db().findOne({ parent_task_id: taskId });
    expect(followUp).toMatchObject({
      source: "slack",
      description: "now add a farewell helper too",
      follow_up: { branch: done.branch },
      report_to: { integration_id: ids.slack, ref: { thread_ts: threadTs } },
    });
    expect(said("slack", `Follow-up task \`${String(followUp!._id)}\` created`)).toHaveLength(1);
    // The follow-up is at work: another reply is answered with why nothing happens now.
    await waitFor("the follow-up's plan", async () =>
      (await task(String(followUp!._id))).status === "awaiting_approval" ? true : undefined,
    );
    await server.api("POST", `/tasks/${String(followUp!._id)}/cancel`, { key });
  });

  it("Linear: a team member's comment revises at the plan gate; the integration's own comment does nothing", async () => {
    const res = await linearDelivery({
      type: "Issue",
      action: "create",
      data: {
        id: "lin-issue-1",
        identifier: "ENG-7",
        title: "Add a greeting helper",
        description: "Export greet(name).",
        teamId: LINEAR_TEAM,
        team: { id: LINEAR_TEAM, key: "ENG" },
        labels: [{ id: "lbl-agent", name: "agent" }],
      },
    });
    const taskId = String(res.body.task_id);
    expect(taskId).toMatch(/^task_/);
    await waitFor(
      "the task",
      async () => (await db().findOne({ _id: taskId as never })) ?? undefined,
    );
    await statusOf(taskId, "awaiting_approval");

    // Its own comment (the API key's user, a team member too) never acts.
    expect((await linearComment("lin-issue-1", "Plan for task: x", LINEAR_BOT)).status).toBe(200);
    expect((await task(taskId)).revisions ?? []).toEqual([]);

    expect(
      (await linearComment("lin-issue-1", "Name the helper `hello` instead", LINEAR_MEMBER)).status,
    ).toBe(200);
    const revised = await task(taskId);
    expect(revised.revisions).toEqual([
      expect.objectContaining({
        gate: "plan",
        feedback: "Name the helper `hello` instead",
        by: "Linear user Ann",
      }),
    ]);
    const answer = said("linear", "revising its plan");
    expect(answer).toHaveLength(1);
    expect(answer[0]!.body.issueId).toBe("lin-issue-1");
    await statusOf(taskId, "awaiting_approval");
    await server.api("POST", `/tasks/${taskId}/cancel`, { key });
  });

  it("Jira: a comment revises at the plan gate; the integration's own comment does nothing", async () => {
    const res = await jiraDelivery({
      webhookEvent: "jira:issue_created",
      issue: jiraIssue("30001", "ENG-30", ["agent"]),
    });
    const taskId = String(res.body.task_id);
    expect(taskId).toMatch(/^task_/);
    await waitFor(
      "the task",
      async () => (await db().findOne({ _id: taskId as never })) ?? undefined,
    );
    await statusOf(taskId, "awaiting_approval");

    expect((await jiraComment("30001", "ENG-30", "Plan for task: x", JIRA_BOT)).status).toBe(200);
    expect((await task(taskId)).revisions ?? []).toEqual([]);

    // Someone Jira does not let transition the issue is refused on the issue.
    await jiraComment("30001", "ENG-30", "do something else", "acct-stranger");
    expect((await task(taskId)).revisions ?? []).toEqual([]);
    expect(said("jira", "may revise or follow up")).toHaveLength(1);

    expect(
      (await jiraComment("30001", "ENG-30", "Also export a default", JIRA_MEMBER)).status,
    ).toBe(200);
    expect((await task(taskId)).revisions).toEqual([
      expect.objectContaining({
        gate: "plan",
        feedback: "Also export a default",
        by: "Jira user Ann",
      }),
    ]);
    const answer = said("jira", "revising its plan");
    expect(answer).toHaveLength(1);
    expect(answer[0]!.op).toBe("POST /rest/api/3/issue/ENG-30/comment");
    await statusOf(taskId, "awaiting_approval");
    await server.api("POST", `/tasks/${taskId}/cancel`, { key });
  });
});
