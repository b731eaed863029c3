import { afterAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../helpers/server.js";

/*
 * GET /status: what the operator configured and what is missing, for the dashboard's
 * first-run checklist. Names settings, never their values; a key is needed.
 */

const LLM_KEY = "sk-status-model-key-0a1b2c3d4e5f60718293";
const servers: TestServer[] = [];

afterAll(async () => {
  for (const s of servers) await s.stop();
});

describe("GET /status", () => {
  it("says no model is configured and names the setting, with a key only", async () => {
    const server = await startTestServer({
      env: { LLM_API_KEY: undefined, LLM_PROVIDER: undefined, APP_ID: undefined },
    });
    servers.push(server);
    expect((await server.api("GET", "/status")).status).toBe(401);
    const { key } = await server.signup();
    const res = await server.api("GET", "/status", { key });
    expect(res.status).toBe(200);
    expect(res.body.model).toEqual({ configured: false });
    expect(res.body.github_app).toEqual({ configured: false });
    expect(res.body.sandbox).toEqual({
      engine: expect.stringMatching(/^(bwrap|none)$/),
      network: expect.stringMatching(/^(none|public)$/),
    });
    const settings = (res.body.missing as Array<{ setting: string; why: string }>).map(
      (m) => m.setting,
    );
    expect(settings).toContain("LLM_API_KEY");
    expect(settings).toContain("APP_ID");
    for (const m of res.body.missing) expect(m.why).toMatch(/\S/);
  });

  it("names the model and public URL when set, never the model's key", async () => {
    const server = await startTestServer({
      env: {
        LLM_PROVIDER: "openai-compatible",
        LLM_BASE_URL: "http://127.0.0.1:9/v1",
        LLM_API_KEY: LLM_KEY,
        LLM_MODEL: "fake-coder",
        PUBLIC_URL: "https://foreman.example.com",
      },
    });
    servers.push(server);
    const { key } = await server.signup();
    const res = await server.api("GET", "/status", { key });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      model: { configured: true, provider: "openai-compatible", model: "fake-coder" },
      public_url: { configured: true, value: "https://foreman.example.com" },
    });
    expect(res.body.missing.map((m: { setting: string }) => m.setting)).not.toContain(
      "LLM_API_KEY",
    );
    expect(JSON.stringify(res.body)).not.toContain(LLM_KEY);
  });
});
