import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { placeholderRepo } from "../helpers/git-repo.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

/*
 * Reserved keys in an automation's trigger_config: `$`-keys at any depth (deeper than any
 * fixed walk limit too) and `__proto__`/`constructor`/`prototype` keys, which a schema
 * would drop silently (leaving a rule that matches every payload), are refused with 400 on
 * POST and PATCH, and nothing is stored or changed.
 */

let server: TestServer;
let key: string;
let repoId: string;

beforeAll(async () => {
  server = await startTestServer();
  key = (await server.signup()).key;
  const ws = await server.api("POST", "/workspaces", {
    key,
    body: { name: "w", repos: [{ name: "acme/app", clone_url: await placeholderRepo() }] },
  });
  expect(ws.status).toBe(201);
  repoId = (await server.api("GET", `/workspaces/${ws.body.id}/repos`, { key })).body[0].id;
}, 60_000);

afterAll(async () => {
  await server?.stop();
});

const JSON_HEADERS = { "content-type": "application/json" };

/** A webhook automation body whose trigger_config is the raw JSON text `config`. */
function rawBody(config: string): string {
  return `{"repo_id":${JSON.stringify(repoId)},"trigger_type":"webhook","task_template":"t","trigger_config":${config}}`;
}

function nested(depth: number, inner: string): string {
  return `${'{"a":'.repeat(depth)}${inner}${"}".repeat(depth)}`;
}

const BAD_CONFIGS: Array<[string, string]> = [
  ['{"match":{"__proto__":{"x":1}}}', "body.trigger_config.match.__proto__"],
  ['{"match":{"constructor":1}}', "body.trigger_config.match.constructor"],
  ['{"match":{"a.b":{"prototype":1}}}', "body.trigger_config.match.a.b.prototype"],
  ['{"match":{"a":[{"__proto__":{}}]}}', "body.trigger_config.match.a.0.__proto__"],
  // On POST the strict schema already refuses the unknown key (named by its parent).
  ['{"__proto__":{"match":{}}}', "body.trigger_config"],
  [`{"match":{"a":${nested(70, '{"$where":"1"}')}}}`, "$where"],
  [`{"match":{"a":${nested(200, '{"__proto__":1}')}}}`, "__proto__"],
];

async function storedCount(): Promise<number> {
  return server.service.db.models.Automation.countDocuments({});
}

describe("reserved keys in trigger_config", () => {
  it("are refused on POST with 400 naming the key, and nothing is stored", async () => {
    for (const [config, path] of BAD_CONFIGS) {
      const res = await server.api("POST", "/automations", {
        key,
        raw: rawBody(config),
        headers: JSON_HEADERS,
      });
      expect(res.status, config.slice(0, 60)).toBe(400);
      expect(res.body.error.code).toBe("validation_failed");
      const paths = (res.body.error.details as Array<{ path: string }>).map((d) => d.path);
      expect(
        paths.some((p) => p.includes(path)),
        JSON.stringify(paths),
      ).toBe(true);
    }
    expect(await storedCount()).toBe(0);
  });

  it("are refused on PATCH with 400, and the automation keeps its rule", async () => {
    const created = await server.api("POST", "/automations", {
      key,
      raw: rawBody('{"match":{"action":"opened"}}'),
      headers: JSON_HEADERS,
    });
    expect(created.status).toBe(201);
    const path = `/automations/${created.body.id}`;
    for (const [config, at] of BAD_CONFIGS) {
      const res = await server.api("PATCH", path, {
        key,
        raw: `{"trigger_config":${config}}`,
        headers: JSON_HEADERS,
      });
      expect(res.status, config.slice(0, 60)).toBe(400);
      const paths = (res.body.error.details as Array<{ path: string }>).map((d) => d.path);
      expect(
        paths.some((p) => p.includes(at)),
        JSON.stringify(paths),
      ).toBe(true);
    }
    const after = await server.api("GET", path, { key });
    expect(after.body.trigger_config).toEqual({ match: { action: "opened" } });
    expect(await storedCount()).toBe(1);
    // A payload that does not match the kept rule creates nothing.
    const delivered = await server.api("POST", "/automations/webhook", {
      body: { action: "closed" },
    });
    expect(delivered.body.matched).toBe(0);
  });
});
