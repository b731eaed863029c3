import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { setTier } from "../../src/domain/accounts/accounts.js";
import { placeholderRepo } from "../helpers/git-repo.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

/** Task creation claims the monthly allowance: exactly, under concurrency, per account. */
let server: TestServer;

beforeAll(async () => {
  server = await startTestServer({ env: { ACCOUNT_VIEW_POLL_MS: "50" } });
});

afterAll(async () => {
  await server.stop();
});

describe("POST /tasks and the monthly allowance", () => {
  it("gives exactly one 201 to 50 simultaneous creates when one task is left", async () => {
    const { key } = await server.signup();
    const ws = await server.api("POST", "/workspaces", {
      key,
      body: { name: "w", repos: [{ name: "acme/app", clone_url: await placeholderRepo() }] },
    });
    const body = { workspace_id: ws.body.id, repo_id: "acme/app", description: "x" };
    for (let i = 0; i < 9; i += 1)
      expect((await server.api("POST", "/tasks", { key, body })).status).toBe(201);
    const results = await Promise.all(
      Array.from({ length: 50 }, () => server.api("POST", "/tasks", { key, body })),
    );
    const statuses = results.map((r) => r.status);
    expect(statuses.filter((s) => s === 201)).toHaveLength(1);
    expect(statuses.filter((s) => s === 429)).toHaveLength(49);
    const refused = results.find((r) => r.status === 429)!;
    expect(refused.body.error.code).toBe("monthly_limit_reached");
    expect((await server.api("GET", "/tasks?limit=200", { key })).body).toHaveLength(10);
    const me = await server.api("GET", "/keys/me", { key });
    expect(me.body).toMatchObject({ tasks_this_month: 10, monthly_limit: 10 });
  }, 60_000);

  it("claims nothing for a request that fails validation or names a foreign repository", async () => {
    const { key } = await server.signup();
    const other = await server.signup("other");
    const theirs = await server.api("POST", "/workspaces", {
      key: other.key,
      body: { name: "w", repos: [{ name: "acme/app", clone_url: await placeholderRepo() }] },
    });
    const bad = await server.api("POST", "/tasks", {
      key,
      body: { workspace_id: theirs.body.id, repo_id: "acme/app", description: "x" },
    });
    expect(bad.status).toBe(404);
    const invalid = await server.api("POST", "/tasks", {
      key,
      body: {
        workspace_id: theirs.body.id,
        repo_id: "acme/app",
        description: "x",
        skill_name: "nope",
      },
    });
    expect(invalid.status).toBe(400);
    const me = await server.api("GET", "/keys/me", { key });
    expect(me.body.tasks_this_month).toBe(0);
  });

  it("counts the tasks of an unlimited month against the limit after a move to free", async () => {
    const { key } = await server.signup();
    const models = server.service.db.models;
    const me = await server.api("GET", "/keys/me", { key });
    const accountId = (await models.ApiKey.findOne({ key_id: me.body.id }).lean())!.account_id;
    await setTier(models, accountId, "pro");
    const ws = await server.api("POST", "/workspaces", {
      key,
      body: { name: "w", repos: [{ name: "acme/app", clone_url: await placeholderRepo() }] },
    });
    const body = { workspace_id: ws.body.id, repo_id: "acme/app", description: "x" };
    // Every process follows tier changes within ACCOUNT_VIEW_POLL_MS (50 ms here).
    await new Promise((r) => setTimeout(r, 200));
    for (let i = 0; i < 12; i += 1)
      expect((await server.api("POST", "/tasks", { key, body })).status).toBe(201);
    await setTier(models, accountId, "free");
    await new Promise((r) => setTimeout(r, 200));
    const refused = await server.api("POST", "/tasks", { key, body });
    expect(refused.status).toBe(429);
    expect(refused.body.error.code).toBe("monthly_limit_reached");
    const usage = await server.api("GET", "/keys/me", { key });
    expect(usage.body).toMatchObject({ tier: "free", tasks_this_month: 12, monthly_limit: 10 });
  });
});
