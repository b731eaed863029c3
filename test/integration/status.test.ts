import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../helpers/server.js";

/*
 * An operator's first hour (issue 31): the start log says what is configured and what is
 * missing with the variable to set, and the keyed GET /status answers the same summary.
 */

const MODEL_KEY = "sk-status-test-key-0123456789abcdef";
let bare: TestServer;
let configured: TestServer;
const bareLog: string[] = [];

beforeAll(async () => {
  bare = await startTestServer({ logLines: bareLog });
  configured = await startTestServer({
    env: {
      LLM_PROVIDER: "openai-compatible",
      LLM_BASE_URL: "http://127.0.0.1:9/v1",
      LLM_API_KEY: MODEL_KEY,
      LLM_MODEL: "local-coder",
      PUBLIC_URL: "https://foreman.example.com",
      SANDBOX_NETWORK: "public",
    },
  });
}, 60_000);
afterAll(async () => {
  await bare?.stop();
  await configured?.stop();
});

const settings = (body: { missing: { setting: string }[] }) => body.missing.map((m) => m.setting);

describe("GET /status", () => {
  it("needs a key, like the other routes", async () => {
    const res = await bare.api("GET", "/status");
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe("unauthorized");
  });

  it("names what is missing on a bare start, with the variable to set and why", async () => {
    const { key } = await bare.signup();
    const res = await bare.api("GET", "/status", { key });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      model: { configured: false },
      github_app: { configured: false },
      public_url: { configured: false },
      sandbox: { engine: "bwrap", network: "none" },
    });
    expect(settings(res.body)).toEqual([
      expect.stringMatching(/^LLM_API_KEY/),
      expect.stringMatching(/^APP_ID, PRIVATE_KEY/),
      "PUBLIC_URL",
      "SANDBOX_NETWORK",
    ]);
    for (const m of res.body.missing) expect(m.why.length).toBeGreaterThan(20);
    // /readyz stays about the database.
    expect((await bare.api("GET", "/readyz")).body).toEqual({ status: "ready", database: "ok" });
  });

  it("says what is configured, without a secret's value", async () => {
    const { key } = await configured.signup();
    const res = await configured.api("GET", "/status", { key });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      model: { configured: true, provider: "openai-compatible", model: "local-coder" },
      public_url: { configured: true, value: "https://foreman.example.com" },
      sandbox: { engine: "bwrap", network: "public" },
    });
    expect(settings(res.body)).toEqual([expect.stringMatching(/^APP_ID/)]);
    expect(JSON.stringify(res.body)).not.toContain(MODEL_KEY);
  });

  it("is the summary the start log gave, one warning per missing setting", () => {
    const lines = bareLog.map((l) => JSON.parse(l) as { level: number; msg: string });
    const summary = lines.find((l) => l.msg.startsWith("configuration: "));
    expect(summary?.msg).toBe(
      "configuration: model MISSING; GitHub App MISSING; public URL MISSING; sandbox bwrap, network none; open sign-up on (OPEN_SIGNUP unset and HOST is a loopback address)",
    );
    const warnings = lines.filter((l) => l.level === 40 && l.msg.startsWith("set "));
    expect(warnings.map((w) => w.msg.split(":")[0])).toEqual([
      expect.stringMatching(/^set LLM_API_KEY/),
      expect.stringMatching(/^set APP_ID/),
      "set PUBLIC_URL",
      "set SANDBOX_NETWORK",
    ]);
  });

  it("is in the OpenAPI document", async () => {
    const doc = (await bare.api("GET", "/openapi.json")).body;
    expect(doc.paths["/status"].get.security).toEqual([{ apiKey: [] }]);
    expect(doc.paths["/status"].get.responses["200"].content["application/json"].schema).toEqual({
      $ref: "#/components/schemas/ServiceStatus",
    });
  });
});
