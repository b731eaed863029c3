import { MongoClient } from "mongodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createInsertBatcher } from "../../src/db/insert-batcher.js";
import { testDatabaseUri } from "../helpers/server.js";

let client: MongoClient;

beforeAll(async () => {
  client = await MongoClient.connect(testDatabaseUri("batch"));
});
afterAll(async () => {
  await client.db().dropDatabase();
  await client.close();
});

describe("batched inserts", () => {
  it("inserts concurrent documents together and rejects only the ones refused", async () => {
    const collection = client.db().collection<{ _id: string }>("batched");
    await collection.insertOne({ _id: "taken" });
    const insert = createInsertBatcher(collection);
    const outcomes = await Promise.allSettled([
      insert({ _id: "a" }),
      insert({ _id: "taken" }),
      insert({ _id: "b" }),
      insert({ _id: "a" }),
    ]);
    expect(outcomes.map((o) => o.status)).toEqual([
      "fulfilled",
      "rejected",
      "fulfilled",
      "rejected",
    ]);
    const refused = outcomes[1] as PromiseRejectedResult;
    expect((refused.reason as { code?: number }).code).toBe(11000);
    const ids = (await collection.find().toArray()).map((d) => d._id).sort();
    expect(ids).toEqual(["a", "b", "taken"]);
  });

  it("splits large bursts into batches of the given size", async () => {
    const collection = client.db().collection<{ _id: string; i: number }>("burst");
    const insert = createInsertBatcher(collection, 7);
    await Promise.all(Array.from({ length: 50 }, (_, i) => insert({ _id: `d${i}`, i })));
    expect(await collection.countDocuments()).toBe(50);
  });
});
