import nock from "nock";
import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import dotenv from "dotenv";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/env.js";
import { testPrivateKey } from "../helpers/github.js";
import {
  expectValidGithubRequests,
  githubRequests,
  watchGithub,
} from "../helpers/github-openapi.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

/*
 * Registering the GitHub App from app.yml while APP_ID is unset (what Probot's setup mode
 * does): the page's form carries the manifest with this server's URLs; GitHub's callback
 * code is exchanged (nock, checked against GitHub's REST description) and the credentials
 * land in a temporary .env that the next start reads, without a secret in any log line.
 * The flow is the operator's alone: the page needs the setup token the service prints in
 * its log at start, and the callback the one-time state only that page hands out.
 */

const PEM = testPrivateKey();
const CONVERSION = {
  id: 987654,
  slug: "foreman-acme",
  node_id: "A_kwHOAAAAAQ",
  name: "foreman (acme)",
  html_url: "https://github.com/apps/foreman-acme",
  client_id: "Iv1.manifest0test",
  client_secret: "manifest-client-secret-0123456789abcdef",
  webhook_secret: "manifest-webhook-secret-0123456789",
  pem: PEM,
};

let dir: string;
let envFile: string;
let server: TestServer;
const logLines: string[] = [];
let token: string;

/** The setup token a server printed at start, from its log lines. */
function setupToken(lines: string[]): string {
  const line = lines.find((l) => l.includes("GitHub App not configured: open "));
  const found = /\/github\/register\?token=([0-9a-f]+) to register it/.exec(line ?? "")?.[1];
  if (!found) throw new Error(`no setup token in the log:\n${lines.join("")}`);
  return found;
}

beforeAll(async () => {
  nock.disableNetConnect();
  nock.enableNetConnect("127.0.0.1");
  dir = await mkdtemp(path.join(os.tmpdir(), "foreman-manifest-"));
  envFile = path.join(dir, ".env");
  await writeFile(envFile, "# operator's own settings\nLLM_MODEL=kept-model\nAPP_ID=\n");
  server = await startTestServer({
    env: { ENV_FILE: envFile, PUBLIC_URL: "https://foreman.acme.test/" },
    logLines,
  });
  token = setupToken(logLines);
});

afterEach(() => {
  const pending = nock.pendingMocks();
  nock.cleanAll();
  expectValidGithubRequests();
  expect(pending).toEqual([]);
});

afterAll(async () => {
  await server?.stop();
  nock.enableNetConnect();
  await rm(dir, { recursive: true, force: true });
});

/** The form of the registration page: where it posts, and the manifest it carries. */
async function registrationForm(): Promise<{ action: URL; manifest: Record<string, unknown> }> {
  const res = await fetch(`${server.url}/github/register?token=${token}`);
  expect(res.status).toBe(200);
  expect(res.headers.get("cache-control")).toBe("no-store");
  expect(res.headers.get("referrer-policy")).toBe("no-referrer");
  expect(res.headers.get("content-type")).toMatch(/^text\/html/);
  const html = await res.text();
  const action = /<form action="([^"]+)" method="post">/.exec(html)?.[1];
  const value = /name="manifest" value="([^"]+)"/.exec(html)?.[1];
  expect(action && value).toBeTruthy();
  const unescape = (s: string) =>
    s
      .replace(/&quot;/g, '"')
      .replace(/&#39;/g, "'")
      .replace(/&lt;/g, "<")
      .replace(/&gt;/g, ">")
      .replace(/&amp;/g, "&");
  return { action: new URL(unescape(action!)), manifest: JSON.parse(unescape(value!)) };
}

describe("GitHub App manifest flow", () => {
  it("serves a form that posts app.yml, pointed at PUBLIC_URL, to GitHub", async () => {
    const { action, manifest } = await registrationForm();
    expect(action.origin + action.pathname).toBe("https://github.com/settings/apps/new");
    expect(action.searchParams.get("state")).toMatch(/^[0-9a-f]{32}$/);
    expect(manifest).toMatchObject({
      name: "foreman",
      url: "https://foreman.acme.test",
      redirect_url: "https://foreman.acme.test/github/manifest/callback",
      hook_attributes: { url: "https://foreman.acme.test/github/webhooks", active: true },
      callback_urls: ["https://foreman.acme.test/github/setup"],
      setup_url: "https://foreman.acme.test/github/setup",
      request_oauth_on_install: true,
      default_permissions: { contents: "write", pull_requests: "write" },
    });
    expect(JSON.stringify(manifest)).not.toContain("foreman.example.com");
  });

  it("prints a setup token of 256 bits at start, and refuses the page without it", async () => {
    expect(token).toMatch(/^[0-9a-f]{64}$/);
    // PUBLIC_URL is where the operator opens it.
    expect(logLines.join("")).toContain(
      `GitHub App not configured: open https://foreman.acme.test/github/register?token=${token} to register it`,
    );
    const wrong = `${token.slice(0, -1)}${token.endsWith("0") ? "1" : "0"}`;
    for (const query of [
      "",
      "?token=",
      `?token=${wrong}`,
      `?token=${token}x`,
      "?token=a&token=b",
    ]) {
      const res = await server.api("GET", `/github/register${query}`);
      expect(res.status, query).toBe(403);
      expect(res.body.error.code).toBe("forbidden");
      expect(res.body.error.message).toMatch(
        /setup token: open the address printed in the service's log at start/,
      );
    }
    expect(githubRequests()).toHaveLength(0);
  });

  it("refuses a callback with a state it did not hand out, then one without a code", async () => {
    const stranger = await server.api("GET", "/github/manifest/callback?code=abc123&state=forged");
    expect(stranger.status).toBe(403);
    expect(stranger.body.error.message).toMatch(/^Unknown or expired registration/);
    expect(stranger.body.error.message).toMatch(/setup token/);
    const noState = await server.api("GET", "/github/manifest/callback?code=abc123");
    expect(noState.status).toBe(403);
    const { action } = await registrationForm();
    const state = action.searchParams.get("state")!;
    const noCode = await server.api("GET", `/github/manifest/callback?state=${state}`);
    expect(noCode.status).toBe(400);
    expect(noCode.body.error.code).toBe("validation_failed");
    expect(githubRequests()).toHaveLength(0);
  });

  it("says so when GitHub refuses the code (expired or used)", async () => {
    const { action } = await registrationForm();
    watchGithub(
      nock("https://api.github.com")
        .post("/app-manifests/expired-code/conversions")
        .reply(404, { message: "Not Found" }),
    );
    const res = await server.api(
      "GET",
      `/github/manifest/callback?code=expired-code&state=${action.searchParams.get("state")}`,
    );
    expect(res.status).toBe(502);
    expect(res.body.error.message).toMatch(/did not exchange the code \(404\)/);
  });

  it("exchanges the code, writes the credentials to .env (0600) and asks for a restart", async () => {
    const { action } = await registrationForm();
    const state = action.searchParams.get("state")!;
    watchGithub(
      nock("https://api.github.com")
        .post("/app-manifests/one-time-code/conversions")
        .reply(201, CONVERSION),
    );
    const res = await fetch(
      `${server.url}/github/manifest/callback?code=one-time-code&state=${state}`,
    );
    expect(res.status).toBe(200);
    const html = await res.text();
    expect(html).toContain("Restart the service");
    expect(html).toContain("https://github.com/apps/foreman-acme/installations/new");
    expect(githubRequests()).toHaveLength(1);

    // The state worked once.
    const again = await server.api(
      "GET",
      `/github/manifest/callback?code=one-time-code&state=${state}`,
    );
    expect(again.status).toBe(403);

    expect((await stat(envFile)).mode & 0o777).toBe(0o600);
    const text = await readFile(envFile, "utf8");
    expect(text).toContain("LLM_MODEL=kept-model");
    const values = dotenv.parse(text);
    expect(values).toMatchObject({
      APP_ID: "987654",
      WEBHOOK_SECRET: CONVERSION.webhook_secret,
      GITHUB_CLIENT_ID: CONVERSION.client_id,
      GITHUB_CLIENT_SECRET: CONVERSION.client_secret,
      APP_SLUG: "foreman-acme",
      LLM_MODEL: "kept-model",
    });
    // The next start reads it: the key is the App's PEM again, and the App is configured.
    const next = loadConfig({ ...values, NODE_ENV: "test" });
    expect(next.github).toMatchObject({ appId: "987654", slug: "foreman-acme" });
    expect(next.github!.privateKey.trim()).toBe(PEM.trim());

    // The page now says the App exists (to the operator only); no secret reached a log line.
    const page = await (await fetch(`${server.url}/github/register?token=${token}`)).text();
    expect(page).toContain("Restart the service");
    expect((await server.api("GET", "/github/register")).status).toBe(403);
    const logs = logLines.join("\n");
    expect(logs).toContain("GitHub App registered");
    for (const secret of [
      CONVERSION.client_secret,
      CONVERSION.webhook_secret,
      "BEGIN RSA PRIVATE KEY",
      values.PRIVATE_KEY!,
    ])
      expect(logs).not.toContain(secret);
  });

  it("is not served once an App is configured, and prints no token", async () => {
    const lines: string[] = [];
    const configured = await startTestServer({
      env: { APP_ID: "1", PRIVATE_KEY: testPrivateKey(), WEBHOOK_SECRET: "s3cret-webhook" },
      logLines: lines,
    });
    try {
      expect(lines.join("")).not.toContain("GitHub App not configured");
      expect((await configured.api("GET", "/github/register")).status).toBe(404);
      expect((await configured.api("GET", "/github/manifest/callback?code=x&state=y")).status).toBe(
        404,
      );
    } finally {
      await configured.stop();
    }
  });

  it("registers on GitHub Enterprise Server under an organization when GHE_HOST and GH_ORG are set", async () => {
    const ghesLines: string[] = [];
    const ghes = await startTestServer({
      env: { ENV_FILE: envFile, GHE_HOST: "ghe.acme.test", GH_ORG: "acme" },
      logLines: ghesLines,
    });
    try {
      // Each start prints a token of its own; the other server's is refused here.
      const ghesToken = setupToken(ghesLines);
      expect(ghesToken).not.toBe(token);
      expect(ghesLines.join("")).toContain(`open ${ghes.url}/github/register?token=${ghesToken}`);
      expect((await ghes.api("GET", `/github/register?token=${token}`)).status).toBe(403);
      const res = await fetch(`${ghes.url}/github/register?token=${ghesToken}`);
      const html = await res.text();
      const action = /<form action="([^"]+)"/.exec(html)![1]!.replace(/&amp;/g, "&");
      const url = new URL(action);
      expect(url.origin + url.pathname).toBe(
        "https://ghe.acme.test/organizations/acme/settings/apps/new",
      );
      // No PUBLIC_URL: the address the page was opened at.
      expect(html).toContain(`${ghes.url}/github/webhooks`);
      watchGithub(
        nock("https://ghe.acme.test")
          .post("/api/v3/app-manifests/ghes-code/conversions")
          .reply(201, {
            ...CONVERSION,
            html_url: "https://ghe.acme.test/github-apps/foreman-acme",
          }),
      );
      const done = await fetch(
        `${ghes.url}/github/manifest/callback?code=ghes-code&state=${url.searchParams.get("state")}`,
      );
      expect(done.status).toBe(200);
      expect(githubRequests().map((r) => r.url)).toEqual([
        "https://ghe.acme.test/api/v3/app-manifests/ghes-code/conversions",
      ]);
    } finally {
      await ghes.stop();
    }
  });
});
