import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pruneOnceMarkers } from "../../src/jobs/housekeeping.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => {
  await server.stop();
});

describe("housekeeping", () => {
  it("drops old once-markers and finished one-off jobs, and keeps the rest", async () => {
    const models = server.service.db.models;
    const jobs = server.service.db.connection.db!.collection("jobs");
    const old = new Date(Date.now() - 30 * 86_400_000);
    const recent = new Date(Date.now() - 60_000);
    await models.Once.collection.insertMany([
      { _id: "hk:old" as never, scope: "test", created_at: old },
      { _id: "hk:new" as never, scope: "test", created_at: recent },
      {
        _id: "hk:lock-old" as never,
        scope: "job-lock",
        created_at: new Date(Date.now() - 2 * 86_400_000),
      },
      { _id: "hk:lock-new" as never, scope: "job-lock", created_at: recent },
    ]);
    await jobs.insertMany([
      { name: "hk-finished-old", nextRunAt: null, lastFinishedAt: old, data: {} },
      { name: "hk-finished-recent", nextRunAt: null, lastFinishedAt: recent, data: {} },
      { name: "hk-pending", nextRunAt: new Date(), lastFinishedAt: old, data: {} },
    ]);
    await pruneOnceMarkers(models, 30).run({}, undefined as never);
    const markers = await models.Once.collection.find({ scope: "test" }).toArray();
    expect(markers.map((m) => m._id)).toEqual(["hk:new"]);
    const locks = await models.Once.collection.find({ _id: /^hk:lock/ as never }).toArray();
    expect(locks.map((m) => m._id)).toEqual(["hk:lock-new"]);
    const left = await jobs.find({ name: /^hk-/ }).toArray();
    expect(left.map((j) => j.name).sort()).toEqual(["hk-finished-recent", "hk-pending"]);
  });
});
