import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sha256 } from "../../src/util/ids.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => {
  await server.stop();
});

describe("key lifecycle", () => {
  it("signs up, reports usage, adds a key, revokes keys", async () => {
    const created = await server.api("POST", "/keys/generate", { body: { name: "laptop" } });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({
      id: expect.stringMatching(/^key_/),
      key: expect.stringMatching(/^fmn_[A-Za-z0-9_-]{43}$/),
      name: "laptop",
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
    });
    const key: string = created.body.key;

    const me = await server.api("GET", "/keys/me", { key });
    expect(me.status).toBe(200);
    expect(me.body).toEqual({
      id: created.body.id,
      name: "laptop",
      tier: "free",
      tasks_this_month: 0,
      monthly_limit: 10,
      created_at: created.body.created_at,
    });

    // A second key on the same account reports the same account figures.
    const second = await server.api("POST", "/keys/generate/", { key, body: { name: "ci" } });
    expect(second.status).toBe(201);
    const meSecond = await server.api("GET", "/keys/me/", { key: second.body.key });
    expect(meSecond.body).toMatchObject({
      id: second.body.id,
      name: "ci",
      tier: "free",
      monthly_limit: 10,
    });

    // Any key of the account may revoke any key of it; the revoked one answers 401 at once.
    const revoke = await server.api("DELETE", `/keys/${second.body.id}`, { key });
    expect(revoke.status).toBe(204);
    expect(revoke.body).toBeUndefined();
    expect((await server.api("GET", "/keys/me", { key: second.body.key })).status).toBe(401);
    expect((await server.api("DELETE", `/keys/${second.body.id}`, { key })).status).toBe(404);

    // A key may revoke itself.
    expect((await server.api("DELETE", `/keys/${created.body.id}/`, { key })).status).toBe(204);
    const after = await server.api("GET", "/keys/me", { key });
    expect(after.status).toBe(401);
    expect(after.body.error.code).toBe("unauthorized");
  });

  it("stores only a hash of the key value", async () => {
    const { key, id } = await server.signup("hash-check");
    const stored = await server.service.db.connection
      .db!.collection("api_keys")
      .findOne({ key_id: id });
    expect(stored).not.toBeNull();
    expect(JSON.stringify(stored)).not.toContain(key);
    expect(stored!._id).toBe(sha256(key));
  });

  it("answers each of many concurrent requests for its own key, revoked ones with 401", async () => {
    // Concurrent lookups share one database read (db/lookup-batcher.ts): each request must
    // still get its own key's answer, and a revoked key none.
    const keys = await Promise.all(Array.from({ length: 6 }, (_, i) => server.signup(`c${i}`)));
    const revoked = keys[5]!;
    expect((await server.api("DELETE", `/keys/${revoked.id}`, { key: revoked.key })).status).toBe(
      204,
    );
    const calls = Array.from({ length: 60 }, (_, i) => keys[i % keys.length]!);
    const answers = await Promise.all(
      calls.map((k) => server.api("GET", "/keys/me", { key: k.key })),
    );
    answers.forEach((answer, i) => {
      const k = calls[i]!;
      if (k === revoked) expect(answer.status).toBe(401);
      else expect(answer.body).toMatchObject({ id: k.id });
    });
    expect((await server.api("GET", "/keys/me", { key: "fmn_" + "x".repeat(43) })).status).toBe(
      401,
    );
  });

  it("gives every key a distinct random value", async () => {
    const keys = await Promise.all(Array.from({ length: 20 }, () => server.signup("many")));
    expect(new Set(keys.map((k) => k.key)).size).toBe(20);
  });
});
