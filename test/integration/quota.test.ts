import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { claimQuota, currentUsage } from "../../src/domain/accounts/quota.js";
import { AppError } from "../../src/errors.js";
import { placeholderRepo } from "../helpers/git-repo.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => {
  await server.stop();
});

async function accountOf(key: string): Promise<string> {
  const me = await server.api("GET", "/keys/me", { key });
  const doc = await server.service.db.models.ApiKey.findOne({ key_id: me.body.id }).lean();
  return doc!.account_id;
}

function outcome(p: Promise<unknown>): Promise<"ok" | string> {
  return p.then(
    () => "ok",
    (e: unknown) => (e instanceof AppError ? e.code : `unexpected: ${String(e)}`),
  );
}

describe("monthly quota", () => {
  it("gives exactly one success to 50 simultaneous claims when one task is left", async () => {
    const { key } = await server.signup("racer");
    const accountId = await accountOf(key);
    const models = server.service.db.models;
    for (let i = 0; i < 9; i += 1) await claimQuota(models, accountId);
    expect((await server.api("GET", "/keys/me", { key })).body.tasks_this_month).toBe(9);

    const results = await Promise.all(
      Array.from({ length: 50 }, () => outcome(claimQuota(models, accountId))),
    );
    expect(results.filter((r) => r === "ok")).toHaveLength(1);
    expect(results.filter((r) => r === "monthly_limit_reached")).toHaveLength(49);

    const me = await server.api("GET", "/keys/me", { key });
    expect(me.body).toMatchObject({ tasks_this_month: 10, monthly_limit: 10 });
    expect(await models.QuotaSlot.countDocuments({ account_id: accountId })).toBe(10);
  });

  it("claims batches all or nothing, also under concurrency", async () => {
    const { key } = await server.signup("batcher");
    const accountId = await accountOf(key);
    const models = server.service.db.models;
    await claimQuota(models, accountId, 7);
    // Three left: a batch of four is refused whole and takes nothing.
    expect(await outcome(claimQuota(models, accountId, 4))).toBe("monthly_limit_reached");
    expect(await currentUsage(models, { _id: accountId })).toBe(7);
    // Ten concurrent batches of two with three left: exactly one fits.
    const results = await Promise.all(
      Array.from({ length: 10 }, () => outcome(claimQuota(models, accountId, 2))),
    );
    expect(results.filter((r) => r === "ok")).toHaveLength(1);
    expect(await models.QuotaSlot.countDocuments({ account_id: accountId })).toBe(9);
    // The slots given back by refused batches are usable again.
    await claimQuota(models, accountId, 1);
    expect(await outcome(claimQuota(models, accountId, 1))).toBe("monthly_limit_reached");
  });

  it("starts afresh each UTC month and releases a claim whose task was not created", async () => {
    const { key } = await server.signup("monthly");
    const accountId = await accountOf(key);
    const models = server.service.db.models;
    const october = new Date("2026-10-31T23:59:59Z");
    const november = new Date("2026-11-01T00:00:00Z");
    await claimQuota(models, accountId, 10, october);
    expect(await outcome(claimQuota(models, accountId, 1, october))).toBe("monthly_limit_reached");
    const claim = await claimQuota(models, accountId, 3, november);
    expect(
      await currentUsage(models, (await models.Account.findById(accountId).lean())!, november),
    ).toBe(3);
    await claim.release();
    // Read through the API, which starts from the account's stored hint.
    const me = await server.api("GET", "/keys/me", { key });
    expect(me.body.tasks_this_month).toBe(0);
    expect(
      await currentUsage(models, (await models.Account.findById(accountId).lean())!, november),
    ).toBe(0);
  });

  it("does not limit the pro tier and reports its usage", async () => {
    const { key } = await server.signup("pro");
    const accountId = await accountOf(key);
    const models = server.service.db.models;
    await models.Account.updateOne({ _id: accountId }, { $set: { tier: "pro" } });
    const ws = await server.api("POST", "/workspaces", {
      key,
      body: { name: "w", repos: [{ name: "acme/app", clone_url: await placeholderRepo() }] },
    });
    const body = { workspace_id: ws.body.id, repo_id: "acme/app", description: "x" };
    const created = await Promise.all(
      Array.from({ length: 15 }, () => server.api("POST", "/tasks", { key, body })),
    );
    expect(created.map((r) => r.status)).toEqual(Array(15).fill(201));
    // Unlimited tiers hold no slots: the tasks are the count.
    expect(await models.QuotaSlot.countDocuments({ account_id: accountId })).toBe(0);
    const me = await server.api("GET", "/keys/me", { key });
    expect(me.body).toMatchObject({ tier: "pro", monthly_limit: null, tasks_this_month: 15 });
  });
});
