import { MongoClient } from "mongodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLookupBatcher } from "../../src/db/lookup-batcher.js";
import { testDatabaseUri } from "../helpers/server.js";

let client: MongoClient;

beforeAll(async () => {
  client = await MongoClient.connect(testDatabaseUri("lookup"), { monitorCommands: true });
});
afterAll(async () => {
  await client.db().dropDatabase();
  await client.close();
});

describe("batched lookups", () => {
  it("answers each concurrent lookup with its own document, over batches of the given size", async () => {
    const collection = client.db().collection<{ _id: string; n: number; secret: string }>("things");
    await collection.insertMany(
      Array.from({ length: 7 }, (_, i) => ({ _id: `t${i}`, n: i, secret: "x" })),
    );
    const commands: number[] = [];
    const listener = (event: { commandName: string }) => {
      if (event.commandName === "find") commands.push(1);
    };
    client.on("commandStarted", listener);
    const lookup = createLookupBatcher<{ _id: string; n: number }>(
      client.db().collection<{ _id: string }>("things"),
      { n: 1 },
      3,
    );
    const ids = ["t0", "t1", "t2", "t3", "t4", "t5", "t6", "t1", "missing"];
    const docs = await Promise.all(ids.map((id) => lookup(id)));
    client.off("commandStarted", listener);
    expect(docs.map((d) => d?.n ?? null)).toEqual([0, 1, 2, 3, 4, 5, 6, 1, null]);
    expect(docs[0]).toEqual({ _id: "t0", n: 0 }); // the projection holds
    // 8 distinct ids in slices of 3: three finds, not nine.
    expect(commands.length).toBe(3);
  });

  it("rejects every lookup of a read the database refused", async () => {
    const lookup = createLookupBatcher(client.db().collection<{ _id: string }>("things"), {
      $bad: 1,
    });
    const outcomes = await Promise.allSettled([lookup("t0"), lookup("t1"), lookup("t0")]);
    expect(outcomes.map((o) => o.status)).toEqual(["rejected", "rejected", "rejected"]);
  });
});
