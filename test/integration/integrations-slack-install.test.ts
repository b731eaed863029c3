import nock from "nock";
import { createHmac } from "node:crypto";
import { readFile } from "node:fs/promises";
import { parse as parseYaml } from "yaml";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { SLACK_BOT_SCOPES, startSlackInstall } from "../../src/integrations/slack/install.js";
import { isAppError } from "../../src/errors.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

/*
 * Installing the Slack app through Slack's OAuth v2 flow, end to end: the real server and
 * database; Slack faked by nock at https://slack.com/api (each request's form checked, every
 * interceptor used, nothing else let out of the process).
 */

const CLIENT_ID = "1111111111.2222222222";
const CLIENT_SECRET = "slack-client-secret-0123456789abcdef";
const PUBLIC_URL = "https://foreman.example.com";
const REDIRECT = `${PUBLIC_URL}/integrations/slack/oauth/callback`;
const SIGNING_SECRET = "slack-signing-secret-for-install-tests";
const APP_SIGNING_SECRET = "the-slack-apps-own-signing-secret-0123";
const SLACK = "https://slack.com";

let server: TestServer;
let alice: { id: string; key: string };
let bob: { id: string; key: string };
const logLines: string[] = [];
const unmatched: string[] = [];
const onNoMatch = (req: { method?: string; href?: string; url?: string; path?: string }) => {
  const url = req.href ?? req.url ?? req.path ?? "";
  if (!/^(https?:\/\/)?(127\.0\.0\.1|localhost)([:/]|$)/.test(url))
    unmatched.push(`${req.method} ${url}`);
};

beforeAll(async () => {
  nock.disableNetConnect();
  nock.enableNetConnect("127.0.0.1");
  nock.emitter.on("no match", onNoMatch);
  server = await startTestServer({
    env: {
      SLACK_CLIENT_ID: CLIENT_ID,
      SLACK_CLIENT_SECRET: CLIENT_SECRET,
      SLACK_SIGNING_SECRET: APP_SIGNING_SECRET,
      PUBLIC_URL,
    },
    logLines,
  });
  alice = await account("alice");
  bob = await account("bob");
});

afterEach(() => {
  const pending = nock.pendingMocks();
  const stray = [...unmatched];
  nock.cleanAll();
  unmatched.length = 0;
  expect({ pending, stray }).toEqual({ pending: [], stray: [] });
});

afterAll(async () => {
  nock.emitter.removeListener("no match", onNoMatch);
  nock.enableNetConnect();
  await server?.stop();
});

async function account(name: string): Promise<{ id: string; key: string }> {
  const { id: keyId, key } = await server.signup(name);
  const keyDoc = await server.service.db.models.ApiKey.findOne({ key_id: keyId }).lean();
  return { id: keyDoc!.account_id, key };
}

/** A Slack integration with only its signing secret: the bot token comes from the install. */
async function integration(key: string, settings: Record<string, unknown> = {}): Promise<string> {
  const res = await server.api("POST", "/integrations", {
    key,
    body: { type: "slack", name: "slack", settings, secrets: { signing_secret: SIGNING_SECRET } },
  });
  expect(res.status).toBe(201);
  expect(res.body.secrets_set).toEqual(["signing_secret"]);
  expect(res.body.install).toBeNull();
  return res.body.id as string;
}

async function startInstall(key: string, id: string): Promise<string> {
  const res = await server.api("POST", `/integrations/${id}/slack/install`, { key });
  expect(res.status).toBe(201);
  return res.body.state as string;
}

function callback(query: Record<string, string>, headers?: Record<string, string>) {
  return server.api(
    "GET",
    `/integrations/slack/oauth/callback?${new URLSearchParams(query)}`,
    headers ? { headers } : {},
  );
}

/** oauth.v2.access answered as Slack does; the form it got is pushed to `seen`. */
function slackAccess(
  answer: Record<string, unknown>,
  seen: Record<string, string>[],
  status = 200,
) {
  return nock(SLACK)
    .post("/api/oauth.v2.access", (body: Record<string, string>) => {
      seen.push(body);
      return true;
    })
    .reply(status, answer);
}

function botAnswer(token: string, teamId: string, teamName = "Acme") {
  return {
    ok: true,
    access_token: token,
    token_type: "bot",
    scope: SLACK_BOT_SCOPES.join(","),
    bot_user_id: "U0BOT00001",
    app_id: "A0APP00001",
    team: { id: teamId, name: teamName },
    enterprise: null,
    is_enterprise_install: false,
    authed_user: { id: "U0HUMAN001" },
  };
}

/** The integration as stored: nothing changed means no token and no install. */
async function stored(id: string) {
  const doc = (await server.service.db.models.Integration.collection.findOne({
    _id: id as never,
  })) as unknown as { secrets: Record<string, string>; install?: unknown };
  return { secrets: doc.secrets, install: doc.install ?? null };
}

describe("Slack install: the round trip", () => {
  it("starts at the API, exchanges Slack's code, stores the bot token and team, never answers the token", async () => {
    const id = await integration(alice.key);
    const start = await server.api("POST", `/integrations/${id}/slack/install`, {
      key: alice.key,
    });
    expect(start.status).toBe(201);
    const authorize = new URL(start.body.authorize_url);
    expect(authorize.origin + authorize.pathname).toBe("https://slack.com/oauth/v2/authorize");
    expect(Object.fromEntries(authorize.searchParams)).toEqual({
      client_id: CLIENT_ID,
      scope: "app_mentions:read,chat:write,commands,channels:history,groups:history",
      redirect_uri: REDIRECT,
      state: start.body.state,
    });
    expect(start.body.redirect_uri).toBe(REDIRECT);
    expect(Date.parse(start.body.expires_at) - Date.now()).toBeGreaterThan(9 * 60_000);

    const token = "xoxb-1234-5678-installedbytoken";
    const seen: Record<string, string>[] = [];
    slackAccess(botAnswer(token, "T0ALICE001", "Alice Inc"), seen);
    const done = await callback({ code: "slack-code-1", state: start.body.state });
    expect(done.status).toBe(200);
    expect(done.body).toMatchObject({
      installed: true,
      integration_id: id,
      team_id: "T0ALICE001",
      team_name: "Alice Inc",
      scopes: [...SLACK_BOT_SCOPES],
    });
    // The exchange as Slack documents it: the app's credentials, the code, the same redirect.
    expect(seen).toEqual([
      {
        client_id: CLIENT_ID,
        client_secret: CLIENT_SECRET,
        code: "slack-code-1",
        redirect_uri: REDIRECT,
      },
    ]);

    const view = await server.api("GET", `/integrations/${id}`, { key: alice.key });
    expect(view.body.secrets_set).toEqual(["bot_token", "signing_secret"]);
    expect(view.body.install).toMatchObject({
      team_id: "T0ALICE001",
      team_name: "Alice Inc",
      bot_user_id: "U0BOT00001",
    });
    expect(view.body.endpoints.oauth_redirect).toBe("/integrations/slack/oauth/callback");
    expect((await stored(id)).secrets.bot_token).toBe(token);
    const everything = JSON.stringify([
      view.body,
      (await server.api("GET", "/integrations", { key: alice.key })).body,
      done.body,
      logLines,
    ]);
    expect(everything).not.toContain(token);
    expect(everything).not.toContain(CLIENT_SECRET);

    // The state is spent: the same redirect again is refused and Slack is not asked.
    const again = await callback({ code: "slack-code-1", state: start.body.state });
    expect(again.status).toBe(400);
    expect(again.body.error.details).toEqual([
      { path: "state", message: "The install state has been used already." },
    ]);
  });

  it("answers a browser with a page", async () => {
    const id = await integration(alice.key, { team_id: "T0ALICE002" });
    const state = await startInstall(alice.key, id);
    slackAccess(botAnswer("xoxb-1234-5678-pagepagepage", "T0ALICE002", "<Alice & Co>"), []);
    const res = await callback({ code: "c2", state }, { accept: "text/html" });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/html");
    expect(String(res.body)).toContain("&lt;Alice &amp; Co&gt;");
  });
});

describe("Slack install: refusals leave the integration as it was", () => {
  it("refuses an unknown, missing or expired state without asking Slack", async () => {
    const id = await integration(alice.key);
    const unknown = await callback({ code: "c", state: "never-issued" });
    expect(unknown.status).toBe(400);
    expect(unknown.body.error.details).toEqual([
      { path: "state", message: "The install state is not known." },
    ]);
    expect(unknown.body.error.message).toContain("POST /integrations/{id}/slack/install");
    expect((await callback({ code: "c" })).status).toBe(400);

    // A state issued eleven minutes ago (they live ten).
    const old = await startSlackInstall(
      server.service.db.models,
      {
        clientId: CLIENT_ID,
        clientSecret: CLIENT_SECRET,
        publicUrl: PUBLIC_URL,
        apiUrl: undefined,
      },
      alice.id,
      id,
      new Date(Date.now() - 11 * 60_000),
    );
    const expired = await callback({ code: "c", state: old.state });
    expect(expired.status).toBe(400);
    expect(expired.body.error.details).toEqual([
      {
        path: "state",
        message: "The install state has expired (states are valid for 10 minutes).",
      },
    ]);
    expect(await stored(id)).toMatchObject({
      secrets: { signing_secret: SIGNING_SECRET },
      install: null,
    });
  });

  it("reports a cancelled install (access_denied) and spends its state", async () => {
    const id = await integration(alice.key);
    const state = await startInstall(alice.key, id);
    const denied = await callback({ error: "access_denied", state });
    expect(denied.status).toBe(400);
    expect(denied.body.error.code).toBe("validation_failed");
    expect(denied.body.error.details[0].message).toContain("cancelled in Slack (access_denied)");
    expect((await callback({ code: "late", state })).status).toBe(400);
    expect((await stored(id)).secrets.bot_token).toBeUndefined();
  });

  it("reports oauth.v2.access refusing the code (400) or failing (502)", async () => {
    const id = await integration(alice.key);
    const seen: Record<string, string>[] = [];
    slackAccess({ ok: false, error: "invalid_code" }, seen);
    const refused = await callback({ code: "bad-code", state: await startInstall(alice.key, id) });
    expect(refused.status).toBe(400);
    expect(refused.body.error.details).toEqual([
      {
        path: "code",
        message: "Slack refused the install's code (oauth.v2.access: invalid_code).",
      },
    ]);
    expect(seen[0]).toMatchObject({ code: "bad-code", redirect_uri: REDIRECT });

    slackAccess({ ok: false, error: "fatal_error" }, [], 500);
    const down = await callback({ code: "c", state: await startInstall(alice.key, id) });
    expect(down.status).toBe(502);
    expect(down.body.error.code).toBe("upstream_unavailable");
    expect(await stored(id)).toMatchObject({ install: null });
    expect((await stored(id)).secrets.bot_token).toBeUndefined();
  });

  it("answers 503 naming what to set when the Slack app is not configured", async () => {
    const unset = {
      clientId: undefined,
      clientSecret: undefined,
      publicUrl: undefined,
      apiUrl: undefined,
    };
    const start = (id: string) =>
      startSlackInstall(server.service.db.models, unset, alice.id, id).catch((e: unknown) => e);
    const error = await start(await integration(alice.key));
    expect(isAppError(error) && error.status).toBe(503);
    expect((error as Error).message).toContain("SLACK_CLIENT_ID, SLACK_CLIENT_SECRET, PUBLIC_URL");
    // An integration that is not the account's is a 404 first, configured or not (the order
    // of checks: the resource, then what the server can do).
    const unknown = await start("int_whatever");
    expect(isAppError(unknown) && unknown.status).toBe(404);
  });
});

describe("Slack install: isolation between accounts", () => {
  it("lets no account start, see or take over another account's install", async () => {
    const mine = await integration(alice.key);
    const state = await startInstall(alice.key, mine);
    slackAccess(botAnswer("xoxb-1234-5678-aliceteamtoken", "T0SHARED01"), []);
    expect((await callback({ code: "a", state })).status).toBe(200);

    // Bob cannot start an install for Alice's integration, nor read it.
    const foreign = await server.api("POST", `/integrations/${mine}/slack/install`, {
      key: bob.key,
    });
    expect(foreign.status).toBe(404);
    expect((await server.api("GET", `/integrations/${mine}`, { key: bob.key })).status).toBe(404);

    // Bob's own install completes Bob's integration only; into Alice's Slack team it is refused
    // and the token Slack issued is revoked.
    const his = await integration(bob.key);
    const revoked: string[] = [];
    slackAccess(botAnswer("xoxb-9999-8888-bobtakeovertoken", "T0SHARED01"), []);
    nock(SLACK)
      .post("/api/auth.revoke")
      .reply(function () {
        revoked.push(String(this.req.headers.authorization));
        return [200, { ok: true, revoked: true }];
      });
    const taken = await callback({ code: "b", state: await startInstall(bob.key, his) });
    expect(taken.status).toBe(409);
    expect(revoked).toEqual(["Bearer xoxb-9999-8888-bobtakeovertoken"]);
    expect(await stored(his)).toMatchObject({ install: null });
    expect((await stored(mine)).secrets.bot_token).toBe("xoxb-1234-5678-aliceteamtoken");

    slackAccess(botAnswer("xoxb-9999-8888-bobowntoken", "T0BOBTEAM1"), []);
    expect((await callback({ code: "c", state: await startInstall(bob.key, his) })).status).toBe(
      200,
    );
    expect((await stored(his)).secrets.bot_token).toBe("xoxb-9999-8888-bobowntoken");
    expect((await stored(mine)).secrets.bot_token).toBe("xoxb-1234-5678-aliceteamtoken");
    const bobs = JSON.stringify((await server.api("GET", "/integrations", { key: bob.key })).body);
    expect(bobs).not.toContain(mine);
    expect(bobs).not.toContain("T0SHARED01");
  });
});

/** A slash command as Slack posts it, signed with `secret`. */
async function slashCommand(path: string, team: string, secret: string, text = "help") {
  const body = new URLSearchParams({
    command: "/foreman",
    text,
    user_id: "U0SOMEONE1",
    channel_id: "C0ROUTE001",
    team_id: team,
    trigger_id: `trig-${Math.random()}`,
  }).toString();
  const timestamp = String(Math.floor(Date.now() / 1000));
  const sig = createHmac("sha256", secret).update(`v0:${timestamp}:${body}`).digest("hex");
  const res = await fetch(server.url + path, {
    method: "POST",
    headers: {
      "content-type": "application/x-www-form-urlencoded",
      "x-slack-signature": `v0=${sig}`,
      "x-slack-request-timestamp": timestamp,
    },
    body,
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe("the Slack app's own URLs, routed by team", () => {
  it("hands an installed team's request to its integration, and refuses other signatures", async () => {
    const res = await server.api("POST", "/integrations", {
      key: alice.key,
      body: { type: "slack", name: "routed", settings: { command: "/acme" }, secrets: {} },
    });
    expect(res.status).toBe(201);
    const id = res.body.id as string;
    slackAccess(botAnswer("xoxb-5555-6666-routedteamtoken", "T0ROUTE001"), []);
    expect((await callback({ code: "r", state: await startInstall(alice.key, id) })).status).toBe(
      200,
    );

    const help = await slashCommand(
      "/integrations/slack/commands",
      "T0ROUTE001",
      APP_SIGNING_SECRET,
    );
    expect(help.status).toBe(200);
    expect(help.body.text).toContain("*/acme task [owner/repo] <what to change>*");

    const stranger = await slashCommand(
      "/integrations/slack/commands",
      "T0UNKNOWN1",
      APP_SIGNING_SECRET,
    );
    expect(stranger.status).toBe(200);
    expect(stranger.body.text).toContain("not connected to a foreman account");

    // Signed with anything but the app's secret: 401, nothing done.
    const forged = await slashCommand("/integrations/slack/commands", "T0ROUTE001", SIGNING_SECRET);
    expect(forged.status).toBe(401);
    // The integration has no signing secret of its own: its own URL takes no request.
    const own = await slashCommand(
      `/integrations/${id}/slack/commands`,
      "T0ROUTE001",
      APP_SIGNING_SECRET,
    );
    expect(own.status).toBe(401);
  });
});

describe("the Slack app manifest", () => {
  it("asks for the scopes the install asks for and names the redirect URL", async () => {
    const manifest = parseYaml(await readFile("slack-app.yml", "utf8")) as {
      oauth_config: { redirect_urls: string[]; scopes: { bot: string[] } };
      features: { slash_commands: Array<{ url: string }> };
      settings: {
        event_subscriptions: { request_url: string };
        interactivity: { request_url: string };
      };
    };
    expect([...manifest.oauth_config.scopes.bot].sort()).toEqual([...SLACK_BOT_SCOPES].sort());
    expect(manifest.oauth_config.redirect_urls).toEqual([
      "https://foreman.example.com/integrations/slack/oauth/callback",
    ]);
    // Its request URLs are the app's own, routed by team.
    expect(manifest.features.slash_commands[0]!.url).toBe(
      "https://foreman.example.com/integrations/slack/commands",
    );
    expect(manifest.settings.event_subscriptions.request_url).toBe(
      "https://foreman.example.com/integrations/slack/events",
    );
    expect(manifest.settings.interactivity.request_url).toBe(
      "https://foreman.example.com/integrations/slack/interactions",
    );
  });
});
