import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { claimDelivery, inDelivery } from "../../src/github/delivery.js";
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
  it("acts on a delivery once and answers a repeated one as a duplicate, wherever it acts", async () => {
    const jobs = server.service.db.connection.db!.collection("jobs");
    const send = async (event: string, payload: unknown, id: string) => {
      const { headers, raw } = await signedDelivery(secret, event, payload, id);
      const res = await server.api("POST", "/github/webhooks", { raw, headers });
      expect(res.status).toBe(202);
      return res.body;
    };

    // A command queues a job: the same delivery again, or the same comment under another
    // delivery id, queues nothing.
    const command = examplePayload("issue_comment", "created") as any; // eslint-disable-line @typescript-eslint/no-explicit-any
    command.installation = { id: 77, node_id: "x" };
    command.comment.body = "/status";
    command.comment.user.type = "User";
    const id = randomUUID();
    expect(await send("issue_comment", command, id)).toEqual({ ok: true, duplicate: false });
    expect(await send("issue_comment", command, id)).toEqual({ ok: true, duplicate: true });
    expect(await send("issue_comment", command, randomUUID())).toEqual({
      ok: true,
      duplicate: true,
    });
    expect(
      await jobs.countDocuments({
        name: "github.command-ack",
        "data.comment_id": command.comment.id,
      }),
    ).toBe(1);

    // An installation event writes directly: its delivery id is claimed once.
    const installation = examplePayload("installation", "suspend") as any; // eslint-disable-line @typescript-eslint/no-explicit-any
    const installId = randomUUID();
    const workspace = () =>
      server.service.db.models.Workspace.findById(`gh-${installation.installation.id}`).lean();
    expect(await send("installation", installation, installId)).toEqual({
      ok: true,
      duplicate: false,
    });
    const applied = await workspace();
    expect(applied?.github?.suspended_at).toBeTruthy();
    expect(await send("installation", installation, installId)).toEqual({
      ok: true,
      duplicate: true,
    });
    // Not applied again: every write of the row moves updated_at.
    expect((await workspace())?.updated_at).toEqual(applied?.updated_at);
    expect(
      await server.service.db.models.Once.countDocuments({ _id: `delivery:${installId}` }),
    ).toBe(1);

    // A delivery no handler acts on writes nothing, and has nothing to repeat.
    const quiet = examplePayload("issues", "labeled") as any; // eslint-disable-line @typescript-eslint/no-explicit-any
    quiet.label.name = "bug";
    const quietId = randomUUID();
    const before = await jobs.countDocuments();
    expect(await send("issues", quiet, quietId)).toEqual({ ok: true, duplicate: false });
    expect(await send("issues", quiet, quietId)).toEqual({ ok: true, duplicate: false });
    expect(await jobs.countDocuments()).toBe(before);
    expect(await server.service.db.models.Once.countDocuments({ _id: `delivery:${quietId}` })).toBe(
      0,
    );
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

  it("releases a delivery's claims when a handler fails, so GitHub's redelivery is processed", async () => {
    const models = server.service.db.models;
    const id = randomUUID();
    await expect(
      inDelivery(models, async () => {
        expect(await claimDelivery(models, id)).toBe(true);
        throw new Error("the handler failed");
      }),
    ).rejects.toThrow("the handler failed");
    expect(await models.Once.countDocuments({ _id: `delivery:${id}` })).toBe(0);
    // The redelivery claims it again and acts.
    expect(await inDelivery(models, async () => void (await claimDelivery(models, id)))).toEqual({
      duplicate: false,
    });
    expect(await models.Once.countDocuments({ _id: `delivery:${id}` })).toBe(1);
  });
});
