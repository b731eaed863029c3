import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { toAppError } from "../../src/http/middleware/errors.js";

let server: TestServer;
let key: string;

beforeAll(async () => {
  server = await startTestServer({ env: { SIGNUP_RATE_LIMIT: "3" } });
  ({ key } = await server.signup("errors"));
});
afterAll(async () => {
  await server.stop();
});

const errorShape = (code: string) => ({
  error: expect.objectContaining({ code, message: expect.any(String) }),
});

describe("error bodies and statuses (docs/api.md, Errors)", () => {
  it("400 invalid_json for a malformed body", async () => {
    const res = await server.api("POST", "/workspaces", {
      key,
      raw: '{"name": ',
      headers: { "content-type": "application/json" },
    });
    expect(res.status).toBe(400);
    expect(res.body).toEqual(errorShape("invalid_json"));
  });

  it("400 validation_failed lists each bad field: missing, wrong type, unknown, oversized, $-prefixed", async () => {
    const missing = await server.api("POST", "/workspaces", { key, body: { repos: [] } });
    expect(missing.status).toBe(400);
    expect(missing.body.error.code).toBe("validation_failed");
    const paths = missing.body.error.details.map((d: { path: string }) => d.path);
    expect(paths).toEqual(expect.arrayContaining(["body.name", "body.repos"]));

    const wrongType = await server.api("POST", "/keys/generate", { key, body: { name: 42 } });
    expect(wrongType.status).toBe(400);
    expect(wrongType.body.error.details).toEqual([
      { path: "body.name", message: expect.any(String) },
    ]);

    const unknown = await server.api("POST", "/keys/generate", {
      key,
      body: { name: "a", admin: true },
    });
    expect(unknown.status).toBe(400);
    expect(JSON.stringify(unknown.body.error.details)).toContain("admin");

    const oversized = await server.api("POST", "/keys/generate", {
      key,
      body: { name: "x".repeat(101) },
    });
    expect(oversized.status).toBe(400);
    expect(oversized.body.error.details[0].path).toBe("body.name");

    const dollar = await server.api("POST", "/workspaces", {
      key,
      body: { name: "w", repos: [{ name: "r", clone_url: "/tmp/r", $where: "1" }] },
    });
    expect(dollar.status).toBe(400);
    expect(dollar.body.error.details).toEqual([
      { path: "body.repos.0.$where", message: "Keys may not start with $." },
    ]);

    const badPath = await server.api("GET", "/workspaces/a%2Fb", { key });
    expect([400, 404]).toContain(badPath.status);
    expect(badPath.body.error).toBeDefined();

    const noBody = await server.api("POST", "/keys/generate", { key });
    expect(noBody.status).toBe(400);
    expect(noBody.body.error.details[0].path).toBe("body");

    const unwantedBody = await server.api("DELETE", "/keys/key_doesnotexist", {
      key,
      body: { force: true },
    });
    expect(unwantedBody.status).toBe(400);
  });

  it("401 unauthorized without a key", async () => {
    const res = await server.api("GET", "/keys/me");
    expect(res.status).toBe(401);
    expect(res.body).toEqual(errorShape("unauthorized"));
  });

  it("404 not_found for unknown ids and unknown routes", async () => {
    const unknownId = await server.api("GET", "/workspaces/ws_unknown", { key });
    expect(unknownId.status).toBe(404);
    expect(unknownId.body).toEqual(errorShape("not_found"));
    const unknownRoute = await server.api("GET", "/no/such/route", { key });
    expect(unknownRoute.status).toBe(404);
    expect(unknownRoute.body).toEqual(errorShape("not_found"));
  });

  it("405 for a method the path does not take", async () => {
    const res = await server.api("PUT", "/keys/me", { key });
    expect(res.status).toBe(405);
    expect(res.body).toEqual(errorShape("method_not_allowed"));
    expect(res.headers.get("allow")).toContain("GET");
  });

  it("409 conflict for a duplicate name", async () => {
    const res = await server.api("POST", "/workspaces", {
      key,
      body: {
        name: "w",
        repos: [
          { name: "r", clone_url: "/tmp/r" },
          { name: "R", clone_url: "/tmp/r2" },
        ],
      },
    });
    expect(res.status).toBe(409);
    expect(res.body).toEqual(errorShape("conflict"));
  });

  it("413 payload_too_large beyond 1 MiB, 415 for a non-JSON body", async () => {
    const big = JSON.stringify({ name: "x".repeat(1024 * 1024) });
    const tooLarge = await server.api("POST", "/keys/generate", {
      key,
      raw: big,
      headers: { "content-type": "application/json" },
    });
    expect(tooLarge.status).toBe(413);
    expect(tooLarge.body).toEqual(errorShape("payload_too_large"));
    const text = await server.api("POST", "/keys/generate", {
      key,
      raw: "name=x",
      headers: { "content-type": "text/plain" },
    });
    expect(text.status).toBe(415);
    expect(text.body.error.code).toBe("unsupported_media_type");
  });

  it("429 rate_limited with Retry-After when sign-ups from one address exceed the limit", async () => {
    // beforeAll used one of the three sign-ups this server allows per address.
    const statuses: number[] = [];
    let last;
    for (let i = 0; i < 3; i += 1) {
      last = await server.api("POST", "/keys/generate", { body: { name: `n${i}` } });
      statuses.push(last.status);
    }
    expect(statuses).toEqual([201, 201, 429]);
    expect(last!.body).toEqual(errorShape("rate_limited"));
    expect(Number(last!.headers.get("retry-after"))).toBeGreaterThan(0);
    // A caller with a key is not limited by the sign-up limit.
    expect(
      (await server.api("POST", "/keys/generate", { key, body: { name: "extra" } })).status,
    ).toBe(201);
  });

  it("500 internal hides the cause", () => {
    const error = toAppError(new Error("connect ECONNREFUSED mongodb://admin:hunter22@db:27017"));
    expect(error.status).toBe(500);
    expect(error.code).toBe("internal");
    expect(error.message).not.toContain("hunter22");
    expect(error.message).not.toContain("ECONNREFUSED");
  });

  it("answers every path with and without a trailing slash", async () => {
    for (const path of ["/keys/me", "/workspaces", "/healthz", "/openapi.json"]) {
      const plain = await server.api("GET", path, { key });
      const slashed = await server.api("GET", `${path}/`, { key });
      expect(plain.status, path).toBe(200);
      expect(slashed.status, `${path}/`).toBe(200);
      expect(slashed.body).toEqual(plain.body);
    }
  });
});

describe("sign-up switch", () => {
  it("403 when open sign-up is off, while a key can still add keys", async () => {
    const closed = await startTestServer({
      env: { OPEN_SIGNUP: "false", MONGODB_URI: server.service.config.mongodbUri },
    });
    try {
      const res = await closed.api("POST", "/keys/generate", { body: { name: "nope" } });
      expect(res.status).toBe(403);
      expect(res.body).toEqual(errorShape("forbidden"));
      expect(
        (await closed.api("POST", "/keys/generate", { key, body: { name: "ok" } })).status,
      ).toBe(201);
    } finally {
      await closed.service.stop();
    }
  });
});

describe("OpenAPI and probes", () => {
  it("serves an OpenAPI 3.1 document generated from the route schemas", async () => {
    const res = await server.api("GET", "/openapi.json");
    expect(res.status).toBe(200);
    expect(res.body.openapi).toBe("3.1.0");
    const generate = res.body.paths["/keys/generate"].post;
    // Request bodies are named components (docs/api.md, "GET /openapi.json").
    const bodyOf = (op: {
      requestBody: { content: Record<string, { schema: { $ref: string } }> };
    }) =>
      res.body.components.schemas[
        op.requestBody.content["application/json"]!.schema.$ref.split("/").pop()!
      ];
    expect(bodyOf(generate)).toMatchObject({
      type: "object",
      required: ["name"],
      additionalProperties: false,
      properties: { name: { type: "string", minLength: 1, maxLength: 100 } },
    });
    expect(res.body.paths["/keys/{key_id}"].delete.responses["204"]).toBeDefined();
    expect(res.body.paths["/keys/me"].get.security).toEqual([{ apiKey: [] }]);
    expect(res.body.components.schemas.Error.type).toBe("object");
    const createTask = res.body.paths["/tasks"].post;
    expect(bodyOf(createTask).required).toEqual(["workspace_id", "repo_id", "description"]);
    expect(createTask.responses["201"]).toBeDefined();
    expect(createTask.responses["429"]).toBeDefined();
    expect(res.body.paths["/tasks/{id}/approve"].post.responses["409"]).toBeDefined();
    expect(res.body.components.schemas.Task.properties.phase.enum).toContain("AWAITING_APPROVAL");
    // Every $ref points at a component that exists.
    const refs = [
      ...JSON.stringify(res.body).matchAll(/"\$ref":"#\/components\/schemas\/([^"]+)"/g),
    ].map((m) => m[1]);
    for (const ref of refs) expect(res.body.components.schemas[ref!], ref).toBeDefined();
  });

  it("/healthz and /readyz answer without a key; /readyz is 503 when the database is gone", async () => {
    expect((await server.api("GET", "/healthz")).body).toEqual({ status: "ok", database: "ok" });
    expect((await server.api("GET", "/readyz")).body).toEqual({ status: "ready", database: "ok" });
    const lonely = await startTestServer({
      env: { MONGODB_URI: server.service.config.mongodbUri },
    });
    await lonely.service.db.connection.close();
    const res = await lonely.api("GET", "/readyz");
    expect(res.status).toBe(503);
    expect(res.body).toEqual(errorShape("not_ready"));
    await lonely.service.http!.close();
    await lonely.service.scheduler.stop(0);
  });
});
