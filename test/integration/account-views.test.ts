import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../helpers/server.js";

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer({ env: { ACCOUNT_VIEW_POLL_MS: "200" } });
});
afterAll(async () => {
  await server.stop();
});

describe("usage view across processes", () => {
  it("follows a tier change made by another process once the shared marker moves", async () => {
    const { key, id } = await server.signup("views");
    expect((await server.api("GET", "/keys/me", { key })).body.tier).toBe("free");
    const { account_id } = (await server.service.db.models.ApiKey.findOne({ key_id: id }).lean())!;

    // What another process (the operator CLI, a second API process) does: write the
    // account, then bump the marker, without touching this process's memory.
    const db = server.service.db.connection.db!;
    await db
      .collection("accounts")
      .updateOne({ _id: account_id as never }, { $set: { tier: "pro" } });
    await db
      .collection("once_markers")
      .updateOne(
        { _id: "accounts-generation" as never },
        { $set: { scope: "account-views", value: `other-${Date.now()}` } },
        { upsert: true },
      );

    await expect
      .poll(async () => (await server.api("GET", "/keys/me", { key })).body, {
        timeout: 3000,
        interval: 50,
      })
      .toMatchObject({ tier: "pro", monthly_limit: null });
  });

  it("answers 401 at once for a revoked key even while its account view is cached", async () => {
    const { key, id } = await server.signup("revoke-cached");
    expect((await server.api("GET", "/keys/me", { key })).status).toBe(200);
    await server.service.db.connection
      .db!.collection("api_keys")
      .updateOne({ key_id: id }, { $set: { revoked_at: new Date() } });
    expect((await server.api("GET", "/keys/me", { key })).status).toBe(401);
  });
});
