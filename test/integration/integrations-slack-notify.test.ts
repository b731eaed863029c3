import nock from "nock";
import { createHmac } from "node:crypto";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { notificationTarget } from "../../src/domain/integrations/notify.js";
import type { FakeModel } from "../helpers/fake-model.js";
import type { GitFixture } from "../helpers/git-repo.js";
import type { TestServer } from "../helpers/server.js";
import { startGreeterStack, waitFor } from "../helpers/greeter-stack.js";

/*
 * The Slack notification channel: a task an automation starts (not asked for in Slack)
 * reports its plan, its change and its result into the integration's `notify_channel`, one
 * thread per task, and the gate buttons pressed there take it to DONE. Slack's Web API is
 * faked by nock at https://slack.com/api: every request's form is recorded and checked,
 * nothing else leaves the process.
 */

const SIGNING_SECRET = "slack-signing-secret-notify-0123456789";
const BOT_TOKEN = "xoxb-3333-4444-notifychanneltoken";
const NOTIFY = "C0NOTIFY01";
const SLACK = "https://slack.com";

interface SlackPost {
  method: string;
  authorization: string | undefined;
  body: Record<string, unknown>;
}

let repo: GitFixture;
let model: FakeModel;
let server: TestServer;
let key: string;
let accountId: string;
let repoId: string;
let integrationId: string;
const posts: SlackPost[] = [];
const unmatched: string[] = [];
const onNoMatch = (req: { method?: string; href?: string; url?: string; path?: string }) => {
  const url = req.href ?? req.url ?? req.path ?? "";
  if (!/^(https?:\/\/)?(127\.0\.0\.1|localhost)([:/]|$)/.test(url))
    unmatched.push(`${req.method} ${url}`);
};

/** Slack's chat methods, answered ok with a fresh message ts; each call is recorded. */
function fakeSlackChat(): void {
  let ts = 1700001000;
  for (const method of ["chat.postMessage", "chat.postEphemeral"])
    nock(SLACK)
      .persist()
      .post(`/api/${method}`)
      .reply(function (_uri, body) {
        const form = (typeof body === "string"
          ? Object.fromEntries(new URLSearchParams(body))
          : body) as unknown as Record<string, unknown>;
        const parsed = Object.fromEntries(
          Object.entries(form).map(([k, v]) => [
            k,
            typeof v === "string" && /^[[{]/.test(v) ? JSON.parse(v) : v,
          ]),
        );
        posts.push({ method, authorization: this.req.headers.authorization, body: parsed });
        return [200, { ok: true, channel: parsed.channel, ts: `${ts++}.000200` }];
      });
}

function signed(body: string) {
  const timestamp = String(Math.floor(Date.now() / 1000));
  const sig = createHmac("sha256", SIGNING_SECRET).update(`v0:${timestamp}:${body}`).digest("hex");
  return { "x-slack-signature": `v0=${sig}`, "x-slack-request-timestamp": timestamp };
}

async function press(action: string, taskId: string) {
  const body = new URLSearchParams({
    payload: JSON.stringify({
      type: "block_actions",
      user: { id: "UALLOWED1" },
      team: { id: "T0TEAM0002" },
      channel: { id: NOTIFY },
      trigger_id: `press-${action}-${taskId}`,
      actions: [{ action_id: action, value: taskId }],
    }),
  }).toString();
  const res = await fetch(`${server.url}/integrations/${integrationId}/slack/interactions`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", ...signed(body) },
    body,
  });
  expect(res.status).toBe(200);
}

const postStarting = (prefix: string) =>
  posts.find((p) => p.method === "chat.postMessage" && String(p.body.text).startsWith(prefix));

beforeAll(async () => {
  nock.disableNetConnect();
  nock.enableNetConnect("127.0.0.1");
  nock.emitter.on("no match", onNoMatch);
  fakeSlackChat();
  let workspaceId: string;
  ({ repo, model, server, key, workspaceId, repoId } = await startGreeterStack(
    "sk-slack-notify-model-key-0123456789",
  ));
  const keyDoc = await server.service.db.models.ApiKey.findOne({}).lean();
  accountId = keyDoc!.account_id;
  const created = await server.api("POST", "/integrations", {
    key,
    body: {
      type: "slack",
      name: "notices",
      settings: {
        team_id: "T0TEAM0002",
        default_repo: { workspace_id: workspaceId, repo_id: repoId },
        allowed_users: ["UALLOWED1"],
        notify_channel: NOTIFY,
      },
      secrets: { signing_secret: SIGNING_SECRET, bot_token: BOT_TOKEN },
    },
  });
  expect(created.status).toBe(201);
  integrationId = created.body.id;
}, 120_000);

afterEach(() => {
  expect(unmatched).toEqual([]);
});

afterAll(async () => {
  nock.emitter.removeListener("no match", onNoMatch);
  nock.cleanAll();
  nock.enableNetConnect();
  await server?.stop();
  await model?.close();
  await repo?.remove();
});

describe("Slack notification channel", () => {
  it("takes an automation's task through both gates in one thread of the channel", async () => {
    const automation = await server.api("POST", "/automations", {
      key,
      body: {
        repo_id: repoId,
        trigger_type: "webhook",
        trigger_config: { match: { kind: "notify-test" } },
        task_template: "Add a greeting helper",
        enabled: true,
      },
    });
    expect(automation.status).toBe(201);
    const fired = await server.api("POST", "/automations/webhook", {
      body: { kind: "notify-test" },
    });
    expect(fired.body.tasks_created).toHaveLength(1);
    const taskId = fired.body.tasks_created[0] as string;

    const plan = await waitFor("the plan in the notification channel", () =>
      postStarting(`Plan for task \`${taskId}\``),
    );
    // A new message in the channel opens the task's thread; it carries the gate buttons.
    expect(plan.authorization).toBe(`Bearer ${BOT_TOKEN}`);
    expect(plan.body.channel).toBe(NOTIFY);
    expect(plan.body.thread_ts).toBeUndefined();
    const buttons = (plan.body.blocks as Array<{ type: string; elements?: unknown[] }>).find(
      (b) => b.type === "actions",
    );
    expect(buttons?.elements).toEqual([
      expect.objectContaining({ action_id: "gate:approve", value: taskId }),
      expect.objectContaining({ action_id: "gate:reject", value: taskId }),
    ]);
    const threadTs = await waitFor("the thread recorded on the task", async () => {
      const task = await server.service.db.models.Task.collection.findOne({ _id: taskId as never });
      return task?.report_to?.ref?.thread_ts as string | undefined;
    });

    await press("gate:approve", taskId);
    const confirmation = await waitFor("the press confirmed in the thread", () =>
      postStarting("<@UALLOWED1> pressed *approve*"),
    );
    expect(confirmation.body).toMatchObject({ channel: NOTIFY, thread_ts: threadTs });
    const diff = await waitFor("the change in the thread", () =>
      postStarting(`Change ready for task \`${taskId}\``),
    );
    expect(diff.body).toMatchObject({ channel: NOTIFY, thread_ts: threadTs });
    expect(JSON.stringify(diff.body.blocks)).toContain("gate:approve-diff");

    await press("gate:approve-diff", taskId);
    const end = await waitFor("the result in the thread", () =>
      postStarting(`Task \`${taskId}\` is done`),
    );
    expect(end.body).toMatchObject({ channel: NOTIFY, thread_ts: threadTs });
    const done = await server.api("GET", `/tasks/${taskId}`, { key });
    expect(done.body).toMatchObject({ status: "completed", phase: "DONE" });
    // One thread: every post about this task after the first went into it.
    const about = posts.filter((p) => JSON.stringify(p.body).includes(taskId));
    expect(about.filter((p) => p.body.thread_ts === undefined)).toEqual([plan]);
    expect(JSON.stringify(posts)).not.toContain(SIGNING_SECRET);
  });

  it("leaves tasks asked for elsewhere alone, and names the channel for CI failures too", async () => {
    const before = posts.length;
    const task = await server.api("POST", "/tasks", {
      key,
      body: {
        workspace_id: (await server.api("GET", "/workspaces", { key })).body[0].id,
        repo_id: repoId,
        description: "an API task",
      },
    });
    expect(task.status).toBe(201);
    const stored = await server.service.db.models.Task.collection.findOne({
      _id: task.body.id as never,
    });
    expect(stored?.report_to).toBeUndefined();
    await server.api("POST", `/tasks/${task.body.id}/cancel`, { key });
    expect(await notificationTarget(server.service.db.models, accountId, "ci_failure")).toEqual({
      integration_id: integrationId,
      type: "slack",
      ref: { channel: NOTIFY },
    });
    expect(await notificationTarget(server.service.db.models, accountId, "github")).toBeNull();
    // Without a notification channel, nothing is named.
    const patched = await server.api("PATCH", `/integrations/${integrationId}`, {
      key,
      body: { settings: { allowed_users: ["UALLOWED1"] } },
    });
    expect(patched.status).toBe(200);
    expect(await notificationTarget(server.service.db.models, accountId, "automation")).toBeNull();
    expect(
      posts.slice(before).filter((p) => JSON.stringify(p.body).includes(task.body.id)),
    ).toEqual([]);
  });
});
