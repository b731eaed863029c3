import { createHmac } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../helpers/server.js";

/*
 * What the Slack, Linear and Jira doors answer to requests signed with the right secret
 * but dated outside the vendor's replay window (either way: 401 `unauthorized`), or whose
 * body the door cannot read (400 `invalid_json` / `validation_failed`, never a 500). Nothing
 * is queued for any of them.
 */

const SLACK_SECRET = "door-input-slack-secret-0123456789";
const APP_SECRET = "door-input-slack-app-secret-0123456789";
const LINEAR_SECRET = "door-input-linear-secret-0123456789";
const JIRA_SECRET = "door-input-jira-secret-0123456789";

let server: TestServer;
const ids = { slack: "", linear: "", jira: "" };

beforeAll(async () => {
  server = await startTestServer({ env: { SLACK_SIGNING_SECRET: APP_SECRET } });
  const { key } = await server.signup("doors");
  const create = async (body: Record<string, unknown>) => {
    const res = await server.api("POST", "/integrations", { key, body });
    expect(res.status).toBe(201);
    return String(res.body.id);
  };
  ids.slack = await create({
    type: "slack",
    name: "slack",
    settings: {},
    secrets: { signing_secret: SLACK_SECRET },
  });
  ids.linear = await create({
    type: "linear",
    name: "linear",
    settings: {},
    secrets: { webhook_secret: LINEAR_SECRET, api_key: "lin_api_0123456789" },
  });
  ids.jira = await create({
    type: "jira",
    name: "jira",
    settings: { site_url: "https://acme.atlassian.net", email: "bot@acme.test" },
    secrets: { webhook_secret: JIRA_SECRET, api_token: "ATATT-0123456789" },
  });
}, 120_000);

afterAll(async () => {
  await server?.stop();
});

async function post(path: string, body: string, headers: Record<string, string>) {
  const res = await fetch(`${server.url}${path}`, { method: "POST", headers, body });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // kept as text for the assertion message
  }
  return { status: res.status, body: parsed as { error?: { code: string; message: string } } };
}

/** Task requests queued so far (none of the requests here may queue one). */
const queued = () =>
  server.service.db.connection.db!.collection("jobs").countDocuments({
    name: "integration.task-request",
  });

// ---- Slack ------------------------------------------------------------------------------

function slackHeaders(body: string, secret: string, offsetS = 0, type = "application/json") {
  const timestamp = String(Math.floor(Date.now() / 1000) + offsetS);
  const sig = createHmac("sha256", secret).update(`v0:${timestamp}:${body}`).digest("hex");
  return {
    "content-type": type,
    "x-slack-request-timestamp": timestamp,
    "x-slack-signature": `v0=${sig}`,
  };
}

const FORM = "application/x-www-form-urlencoded";
const command = new URLSearchParams({
  command: "/foreman",
  text: "task add a thing",
  user_id: "U0USER0001",
  channel_id: "C0CHAN0001",
  trigger_id: "trig-window",
}).toString();

describe("Slack: the replay window", () => {
  it("refuses correctly signed requests dated a year ahead, 6 minutes ahead or 6 minutes old", async () => {
    const before = await queued();
    for (const path of [
      `/integrations/${ids.slack}/slack/commands`,
      "/integrations/slack/commands",
    ])
      for (const offsetS of [365 * 24 * 3600, 6 * 60, -6 * 60]) {
        const secret = path.includes(ids.slack) ? SLACK_SECRET : APP_SECRET;
        const res = await post(path, command, slackHeaders(command, secret, offsetS, FORM));
        expect(res.status, `${path} ${offsetS}`).toBe(401);
        expect(res.body.error?.code).toBe("unauthorized");
        expect(res.body.error?.message).toMatch(
          /^The Slack request's timestamp \(X-Slack-Request-Timestamp\) is outside the 5-minute window/,
        );
      }
    // Within the window, ahead or behind, the same command is taken.
    const ahead = await post(
      `/integrations/${ids.slack}/slack/commands`,
      command,
      slackHeaders(command, SLACK_SECRET, 4 * 60, FORM),
    );
    expect(ahead.status).toBe(200);
    expect(await queued()).toBe(before);
  });
});

describe("Slack: malformed signed bodies", () => {
  const events = [
    ['{"type":', "invalid_json"],
    ["[]", "validation_failed"],
    ['"event"', "validation_failed"],
    ["null", "validation_failed"],
    ["42", "validation_failed"],
    ['{"type":5}', "validation_failed"],
    ['{"type":"event_callback","event":{"type":"app_mention","text":7}}', "validation_failed"],
  ] as const;

  it("answers 400 to events that are not JSON or not a Slack event, on both URLs", async () => {
    for (const [path, secret] of [
      [`/integrations/${ids.slack}/slack/events`, SLACK_SECRET],
      ["/integrations/slack/events", APP_SECRET],
    ] as const)
      for (const [body, code] of events) {
        const res = await post(path, body, slackHeaders(body, secret));
        expect(res.status, `${path} ${body}`).toBe(400);
        expect(res.body.error?.code, body).toBe(code);
      }
    // Events the door does not act on keep their own shapes (a user_change's user is an
    // object): acknowledged, not refused.
    const other = JSON.stringify({
      type: "event_callback",
      event_id: "Ev0OTHER1",
      event: { type: "user_change", user: { id: "U0USER0001", name: "ann" } },
    });
    const res = await post(
      `/integrations/${ids.slack}/slack/events`,
      other,
      slackHeaders(other, SLACK_SECRET),
    );
    expect(res.status).toBe(200);
  });

  it("answers 400 to commands and interactions that are not what Slack sends", async () => {
    const bodies: Array<[string, string, string]> = [
      ["commands", '{"type":', "validation_failed"],
      ["commands", "text=task+x&channel_id=C0CHAN0001", "validation_failed"],
      ["interactions", "", "validation_failed"],
      ["interactions", `payload=${encodeURIComponent('{"type":')}`, "invalid_json"],
      ["interactions", `payload=${encodeURIComponent("[1]")}`, "validation_failed"],
      [
        "interactions",
        `payload=${encodeURIComponent('{"type":"block_actions","user":{"id":"U1"},"actions":"approve"}')}`,
        "validation_failed",
      ],
    ];
    const before = await queued();
    for (const [path, secret] of [
      [`/integrations/${ids.slack}/slack/`, SLACK_SECRET],
      ["/integrations/slack/", APP_SECRET],
    ] as const)
      for (const [endpoint, body, code] of bodies) {
        const res = await post(path + endpoint, body, slackHeaders(body, secret, 0, FORM));
        expect(res.status, `${endpoint} ${body}`).toBe(400);
        expect(res.body.error?.code, body).toBe(code);
      }
    expect(await queued()).toBe(before);
  });
});

// ---- Linear -----------------------------------------------------------------------------

function linearHeaders(body: string) {
  return {
    "content-type": "application/json",
    "linear-delivery": `dlv-${Math.random()}`,
    "linear-signature": createHmac("sha256", LINEAR_SECRET).update(body).digest("hex"),
  };
}

const linearIssue = (webhookTimestamp: unknown) =>
  JSON.stringify({
    type: "Issue",
    action: "create",
    webhookTimestamp,
    data: { id: "issue-1", title: "x", labels: [{ id: "l", name: "agent" }] },
  });

describe("Linear", () => {
  const path = () => `/integrations/${ids.linear}/linear/webhook`;

  it("refuses correctly signed deliveries outside the 60-second window, either way", async () => {
    for (const at of [
      Date.now() + 365 * 86_400_000,
      Date.now() + 2 * 60_000,
      Date.now() - 2 * 60_000,
      "now",
      null,
    ]) {
      const body = linearIssue(at);
      const res = await post(path(), body, linearHeaders(body));
      expect(res.status, String(at)).toBe(401);
      expect(res.body.error?.message).toMatch(
        /^The Linear delivery's signed webhookTimestamp is outside the 60-second window/,
      );
    }
  });

  it("answers 400 to signed bodies that are not JSON or not a Linear event", async () => {
    const now = Date.now();
    const before = await queued();
    for (const [body, code] of [
      ['{"type":"Issue",', "invalid_json"],
      ["[]", "validation_failed"],
      ["42", "validation_failed"],
      ["null", "validation_failed"],
      [JSON.stringify({ webhookTimestamp: now }), "validation_failed"],
      [
        JSON.stringify({ type: "Issue", action: "create", webhookTimestamp: now, data: { id: 5 } }),
        "validation_failed",
      ],
      [
        JSON.stringify({ type: "Comment", action: "create", webhookTimestamp: now, data: "x" }),
        "validation_failed",
      ],
    ] as const) {
      const res = await post(path(), body, linearHeaders(body));
      expect(res.status, body).toBe(400);
      expect(res.body.error?.code, body).toBe(code);
    }
    // An event the door does not act on is acknowledged, and so is a comment on a project
    // update (it has no issueId).
    const projectComment = JSON.stringify({
      type: "Comment",
      action: "create",
      webhookTimestamp: now,
      data: { id: "c1", body: "/approve", projectUpdateId: "pu1", userId: "u1" },
    });
    expect((await post(path(), projectComment, linearHeaders(projectComment))).status).toBe(200);
    const other = JSON.stringify({
      type: "Project",
      action: "create",
      webhookTimestamp: now,
      data: {},
    });
    expect((await post(path(), other, linearHeaders(other))).status).toBe(200);
    expect(await queued()).toBe(before);
  });
});

// ---- Jira -------------------------------------------------------------------------------

function jiraHeaders(body: string) {
  return {
    "content-type": "application/json",
    "x-atlassian-webhook-identifier": `dlv-${Math.random()}`,
    "x-hub-signature": `sha256=${createHmac("sha256", JIRA_SECRET).update(body).digest("hex")}`,
  };
}

describe("Jira", () => {
  const path = () => `/integrations/${ids.jira}/jira/webhook`;
  const created = (timestamp: unknown) =>
    JSON.stringify({
      timestamp,
      webhookEvent: "jira:issue_created",
      issue: { id: "10001", key: "ENG-1", fields: { summary: "x", labels: ["agent"] } },
    });

  it("refuses correctly signed deliveries dated ahead or older than its window", async () => {
    for (const at of [
      Date.now() + 365 * 86_400_000,
      Date.now() + 10 * 60_000,
      Date.now() - 40 * 60_000,
    ]) {
      const body = created(at);
      const res = await post(path(), body, jiraHeaders(body));
      expect(res.status, String(at)).toBe(401);
      expect(res.body.error?.code).toBe("unauthorized");
      expect(res.body.error?.message).toMatch(/^The Jira delivery's signed timestamp is outside/);
    }
  });

  it("answers 400 to signed bodies that are not JSON or not a Jira event", async () => {
    const now = Date.now();
    const before = await queued();
    for (const [body, code] of [
      ['{"timestamp":', "invalid_json"],
      ["[]", "validation_failed"],
      ['"jira"', "validation_failed"],
      ["null", "validation_failed"],
      [JSON.stringify({ timestamp: now, webhookEvent: 5 }), "validation_failed"],
      [
        JSON.stringify({ timestamp: now, webhookEvent: "jira:issue_created", issue: { id: 1 } }),
        "validation_failed",
      ],
    ] as const) {
      const res = await post(path(), body, jiraHeaders(body));
      expect(res.status, body).toBe(400);
      expect(res.body.error?.code, body).toBe(code);
    }
    expect(await queued()).toBe(before);
  });
});
