import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { examplePayload, signedDelivery, testPrivateKey } from "../helpers/github.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

const secret = "webhook-secret-for-tests";
let server: TestServer;

beforeAll(async () => {
  server = await startTestServer({
    env: { APP_ID: "12345", PRIVATE_KEY: testPrivateKey(), WEBHOOK_SECRET: secret },
  });
});
afterAll(async () => {
  await server.stop();
});

describe("GitHub webhook endpoint", () => {
  it("accepts a signed delivery once and acknowledges a repeated delivery id without acting", async () => {
    const payload = examplePayload("issue_comment", "created");
    const id = randomUUID();
    const { headers, raw } = await signedDelivery(secret, "issue_comment", payload, id);
    const first = await server.api("POST", "/github/webhooks", { raw, headers });
    expect(first.status).toBe(202);
    expect(first.body).toEqual({ ok: true, duplicate: false });
    const again = await server.api("POST", "/github/webhooks", { raw, headers });
    expect(again.status).toBe(202);
    expect(again.body).toEqual({ ok: true, duplicate: true });
    expect(await server.service.db.models.Once.countDocuments({ _id: `delivery:${id}` })).toBe(1);
  });

  it("answers 401 for a bad or missing signature and records nothing", async () => {
    const payload = examplePayload("issues", "labeled");
    const id = randomUUID();
    const { headers, raw } = await signedDelivery("another-secret", "issues", payload, id);
    const bad = await server.api("POST", "/github/webhooks", { raw, headers });
    expect(bad.status).toBe(401);
    expect(bad.body.error.code).toBe("unauthorized");
    const { "x-hub-signature-256": _dropped, ...unsigned } = headers;
    expect((await server.api("POST", "/github/webhooks", { raw, headers: unsigned })).status).toBe(
      401,
    );
    // A body altered after signing fails too.
    const good = await signedDelivery(secret, "issues", payload, id);
    const tampered = await server.api("POST", "/github/webhooks", {
      raw: good.raw.replace("labeled", "unlabeled"),
      headers: good.headers,
    });
    expect(tampered.status).toBe(401);
    expect(await server.service.db.models.Once.countDocuments({ _id: `delivery:${id}` })).toBe(0);
  });

  it("is absent when the GitHub App is not configured", async () => {
    const plain = await startTestServer({ env: { MONGODB_URI: server.service.config.mongodbUri } });
    try {
      const { headers, raw } = await signedDelivery(secret, "ping", { zen: "hi" }, randomUUID());
      const res = await plain.api("POST", "/github/webhooks", { raw, headers });
      expect(res.status).toBe(404);
      expect(res.body.error.code).toBe("not_found");
    } finally {
      await plain.service.stop();
    }
  });
});
