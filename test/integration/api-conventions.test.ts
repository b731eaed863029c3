import http from "node:http";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, inject, it, vi } from "vitest";
import { allRoutes } from "../../src/http/app.js";
import { isIdempotent } from "../../src/http/route.js";
import { startDbProxy } from "../helpers/db-proxy.js";
import { placeholderRepo } from "../helpers/git-repo.js";
import { startTestServer, testDatabaseUri, type TestServer } from "../helpers/server.js";

/**
 * The HTTP conventions of docs/api.md: Idempotency-Key, Location, paging by cursor, the
 * RateLimit headers and limits shared by processes, X-Forwarded-For behind TRUST_PROXY hops,
 * GET /keys, and error bodies (docs/api.md, "Errors") for everything the parsers refuse.
 */
let server: TestServer;

beforeAll(async () => {
  // KEYS_PER_ACCOUNT above the 51 keys the paging test makes (its default is 20).
  server = await startTestServer({ env: { ACCOUNT_VIEW_POLL_MS: "50", KEYS_PER_ACCOUNT: "60" } });
});
afterAll(async () => {
  await server.stop();
});

async function workspaceOf(key: string, name = "w"): Promise<string> {
  const ws = await server.api("POST", "/workspaces", {
    key,
    body: { name, repos: [{ name: "acme/app", clone_url: await placeholderRepo() }] },
  });
  expect(ws.status).toBe(201);
  return ws.body.id as string;
}

const errorShape = (code: string) => ({
  error: expect.objectContaining({ code, message: expect.any(String) }),
});

describe("Idempotency-Key", () => {
  it("answers a repeat with the first answer: one task, one quota use, same Location", async () => {
    const { key } = await server.signup();
    const body = { workspace_id: await workspaceOf(key), repo_id: "acme/app", description: "x" };
    const headers = { "idempotency-key": "create-1" };
    const first = await server.api("POST", "/tasks", { key, body, headers });
    expect(first.status).toBe(201);
    expect(first.headers.get("location")).toBe(`/tasks/${first.body.id}`);
    expect(first.headers.get("idempotent-replayed")).toBeNull();
    // Same body in another key order is the same request.
    const reordered = { description: "x", repo_id: "acme/app", workspace_id: body.workspace_id };
    const again = await server.api("POST", "/tasks", { key, body: reordered, headers });
    expect(again.status).toBe(201);
    expect(again.body).toEqual(first.body);
    expect(again.headers.get("location")).toBe(first.headers.get("location"));
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect((await server.api("GET", "/tasks", { key })).body).toHaveLength(1);
    const me = await server.api("GET", "/keys/me", { key });
    expect(me.body.tasks_this_month).toBe(1);
  });

  it("refuses the same key with another body: 422 idempotency_key_reused, nothing created", async () => {
    const { key } = await server.signup();
    const body = { workspace_id: await workspaceOf(key), repo_id: "acme/app", description: "x" };
    const headers = { "idempotency-key": "k" };
    expect((await server.api("POST", "/tasks", { key, body, headers })).status).toBe(201);
    const other = await server.api("POST", "/tasks", {
      key,
      body: { ...body, description: "y" },
      headers,
    });
    expect(other.status).toBe(422);
    expect(other.body).toEqual(errorShape("idempotency_key_reused"));
    // The same key on another endpoint is another request too.
    const elsewhere = await server.api("POST", "/skills", {
      key,
      body: { name: "s", description: "d", system_prompt_addition: "p" },
      headers,
    });
    expect(elsewhere.status).toBe(422);
    expect((await server.api("GET", "/tasks", { key })).body).toHaveLength(1);
  });

  it("20 concurrent POST /tasks with one key: one task, one quota use, 20 answers naming it", async () => {
    const { key } = await server.signup();
    const body = { workspace_id: await workspaceOf(key), repo_id: "acme/app", description: "x" };
    const headers = { "idempotency-key": "race" };
    const results = await Promise.all(
      Array.from({ length: 20 }, () => server.api("POST", "/tasks", { key, body, headers })),
    );
    expect(results.map((r) => r.status)).toEqual(Array(20).fill(201));
    const ids = new Set(results.map((r) => r.body.id));
    expect(ids.size).toBe(1);
    const list = await server.api("GET", "/tasks", { key });
    expect(list.body.map((t: { id: string }) => t.id)).toEqual([...ids]);
    const me = await server.api("GET", "/keys/me", { key });
    expect(me.body.tasks_this_month).toBe(1);
    const slots = await server.service.db.models.QuotaSlot.countDocuments({
      account_id: (await server.service.db.models.ApiKey.findOne({ key_id: me.body.id }))!
        .account_id,
    });
    expect(slots).toBe(1);
  }, 60_000);

  it("repeats wait out a first request slower than 10 s and all answer its task", async () => {
    // The first request's task insert is held 12 s on its way to the database; the repeats
    // wait for its answer (up to their own handler deadline, 30 s) instead of a 409 at 10 s.
    const proxy = await startDbProxy(inject("mongoUri"));
    const slow = await startTestServer({
      env: { MONGODB_URI: proxy.uri(`idemslow_${randomBytes(4).toString("hex")}`) },
    });
    try {
      const { key } = await slow.signup();
      const ws = await slow.api("POST", "/workspaces", {
        key,
        body: { name: "w", repos: [{ name: "acme/app", clone_url: await placeholderRepo() }] },
      });
      const description = `slow-first-${randomBytes(4).toString("hex")}`;
      const held = proxy.rule({
        match: ["insert", description],
        action: { delayMs: 12_000 },
        once: true,
      });
      const body = { workspace_id: ws.body.id, repo_id: "acme/app", description };
      const headers = { "idempotency-key": "slow" };
      const results = await Promise.all(
        Array.from({ length: 5 }, () => slow.api("POST", "/tasks", { key, body, headers })),
      );
      await held;
      expect(results.map((r) => r.status)).toEqual(Array(5).fill(201));
      expect(new Set(results.map((r) => r.body.id)).size).toBe(1);
      expect(results.filter((r) => r.headers.get("idempotent-replayed"))).toHaveLength(4);
      expect((await slow.api("GET", "/tasks", { key })).body).toHaveLength(1);
    } finally {
      await slow.stop();
      await proxy.close();
    }
  }, 90_000);

  it("keys belong to the account: another account's same key creates its own task", async () => {
    const a = await server.signup("a");
    const b = await server.signup("b");
    const headers = { "idempotency-key": "shared-key" };
    const ta = await server.api("POST", "/tasks", {
      key: a.key,
      body: { workspace_id: await workspaceOf(a.key), repo_id: "acme/app", description: "x" },
      headers,
    });
    const tb = await server.api("POST", "/tasks", {
      key: b.key,
      body: { workspace_id: await workspaceOf(b.key), repo_id: "acme/app", description: "x" },
      headers,
    });
    expect(ta.status).toBe(201);
    expect(tb.status).toBe(201);
    expect(tb.body.id).not.toBe(ta.body.id);
  });

  it("400 for a key that is empty, longer than 255 or not printable", async () => {
    const { key } = await server.signup();
    const body = { workspace_id: await workspaceOf(key), repo_id: "acme/app", description: "x" };
    for (const bad of ["x".repeat(256), "tab\there", "é"]) {
      const res = await server.api("POST", "/tasks", {
        key,
        body,
        headers: { "idempotency-key": bad },
      });
      expect(res.status, bad).toBe(400);
      expect(res.body.error.details[0].path).toBe("header.Idempotency-Key");
    }
    const ok = await server.api("POST", "/tasks", {
      key,
      body,
      headers: { "idempotency-key": "~".repeat(255) },
    });
    expect(ok.status).toBe(201);
  });

  it("a failed first request stores nothing; an expired record no longer answers", async () => {
    const { key } = await server.signup();
    const headers = { "idempotency-key": "retry-me" };
    const body = { workspace_id: "ws_missing", repo_id: "acme/app", description: "x" };
    expect((await server.api("POST", "/tasks", { key, body, headers })).status).toBe(404);
    const good = { ...body, workspace_id: await workspaceOf(key) };
    // The 404 left no record, so the key is free for the corrected request.
    const created = await server.api("POST", "/tasks", { key, body: good, headers });
    expect(created.status).toBe(201);
    // 24 h later (moved back in the database): the key runs again.
    await server.service.db.models.IdempotencyRecord.updateMany(
      {},
      { $set: { expires_at: new Date(Date.now() - 1000) } },
    );
    const later = await server.api("POST", "/tasks", { key, body: good, headers });
    expect(later.status).toBe(201);
    expect(later.body.id).not.toBe(created.body.id);
  });

  it("sign-up without a key is scoped to the client address and replays the same key", async () => {
    const headers = { "idempotency-key": `signup-${Date.now()}` };
    const first = await server.api("POST", "/keys/generate", { body: { name: "n" }, headers });
    const again = await server.api("POST", "/keys/generate", { body: { name: "n" }, headers });
    expect(first.status).toBe(201);
    expect(again.status).toBe(201);
    expect(again.body).toEqual(first.body);
    expect(first.headers.get("location")).toBe(`/keys/${first.body.id}`);
    expect(await server.service.db.models.ApiKey.countDocuments({ key_id: first.body.id })).toBe(1);
    // The stored answer is sealed: the new key's value is not readable in the database.
    const records = await server.service.db.models.IdempotencyRecord.find({}).lean();
    expect(JSON.stringify(records)).not.toContain(first.body.key);
  });

  it("a second POST /skills with the key is a replay, not a 409 for the taken name", async () => {
    const { key } = await server.signup();
    const body = { name: "once", description: "d", system_prompt_addition: "p" };
    const headers = { "idempotency-key": "skill-1" };
    const first = await server.api("POST", "/skills", { key, body, headers });
    const again = await server.api("POST", "/skills", { key, body, headers });
    expect(first.status).toBe(201);
    expect(first.headers.get("location")).toBe("/skills/once");
    expect(again.status).toBe(201);
    expect(again.body).toEqual(first.body);
    expect((await server.api("POST", "/skills", { key, body })).status).toBe(409);
  });

  it("every POST that answers 201 or 202 takes the key, and each 201 names a Location", () => {
    const creating = allRoutes().filter(
      (r) => r.method === "post" && [201, 202].includes(r.status),
    );
    expect(creating.map((r) => r.operationId).sort()).toEqual(
      [
        "createAutomation",
        "createIntegration",
        "createSkill",
        "createTask",
        "createWorkspace",
        "followUpTask",
        "generateKey",
        "installMarketplaceSkill",
        "linkWorkspace",
        "queueTasks",
        "runAgent",
        "scanRepository",
        "startSlackInstall",
      ].sort(),
    );
    for (const r of creating) expect(isIdempotent(r), r.operationId).toBe(true);
    // POST /workspaces/link and /integrations/{id}/slack/install make a state, which has no
    // URL of its own (docs/api.md).
    for (const r of creating.filter(
      (x) => !["linkWorkspace", "startSlackInstall"].includes(x.operationId),
    ))
      expect(r.location, r.operationId).toBeTypeOf("function");
  });
});

describe("Location", () => {
  it("points at the created resource, which answers there", async () => {
    const { key } = await server.signup();
    const ws = await server.api("POST", "/workspaces", {
      key,
      body: { name: "w", repos: [{ name: "acme/app", clone_url: await placeholderRepo() }] },
    });
    expect(ws.headers.get("location")).toBe(`/workspaces/${ws.body.id}`);
    const automation = await server.api("POST", "/automations", {
      key,
      body: {
        repo_id: "acme/app",
        workspace_id: ws.body.id,
        trigger_type: "webhook",
        trigger_config: { match: { action: "x" } },
        task_template: "t",
      },
    });
    expect(automation.status).toBe(201);
    const task = await server.api("POST", "/agents/secret-scanner/run", {
      key,
      body: { workspace_id: ws.body.id, repo_id: "acme/app" },
    });
    for (const res of [ws, automation, task]) {
      const location = res.headers.get("location")!;
      expect(location).toMatch(/^\/[a-z]+\//);
      const read = await server.api("GET", location, { key });
      expect(read.status, location).toBe(200);
      expect(read.body.id).toBe(res.body.id);
    }
    const scan = await server.api("POST", `/health-reports/acme%2Fapp/scan`, { key });
    expect(scan.status).toBe(202);
    const poll = await server.api("GET", scan.headers.get("location")!, { key });
    expect(poll.status).toBe(200);
    expect(poll.body.id).toBe(scan.body.id);
  });
});

describe("paging", () => {
  function nextOf(res: { headers: Headers }): string | null {
    const link = res.headers.get("link");
    if (!link) return null;
    const match = /^<([^>]+)>; rel="next"$/.exec(link);
    expect(match, link).not.toBeNull();
    const cursor = new URL(match![1]!, "http://x").searchParams.get("cursor");
    expect(cursor).toBe(res.headers.get("x-next-cursor"));
    return match![1]!;
  }

  it("walks every list by Link rel=next, stable while items are added", async () => {
    const { key } = await server.signup();
    const made: string[] = [];
    for (let i = 0; i < 5; i++) made.unshift(await workspaceOf(key, `w${i}`));
    const seen: string[] = [];
    let path: string | null = "/workspaces?limit=2";
    let pages = 0;
    while (path) {
      const res = await server.api("GET", path, { key });
      expect(res.status).toBe(200);
      expect(Array.isArray(res.body)).toBe(true);
      seen.push(...res.body.map((w: { id: string }) => w.id));
      path = nextOf(res);
      // A workspace created between pages is newer: it does not shift the later pages.
      if (pages++ === 0) await workspaceOf(key, "late");
    }
    expect(seen).toEqual(made);
    expect(pages).toBe(3);
  });

  it("pages tasks by cursor, and `before` still works", async () => {
    const { key } = await server.signup();
    const body = { workspace_id: await workspaceOf(key), repo_id: "acme/app", description: "x" };
    const ids: string[] = [];
    for (let i = 0; i < 3; i++)
      ids.unshift((await server.api("POST", "/tasks", { key, body })).body.id);
    const first = await server.api("GET", "/tasks?limit=2&status=queued", { key });
    expect(first.body.map((t: { id: string }) => t.id)).toEqual(ids.slice(0, 2));
    const next = nextOf(first)!;
    expect(next).toContain("status=queued");
    const second = await server.api("GET", next, { key });
    expect(second.body.map((t: { id: string }) => t.id)).toEqual(ids.slice(2));
    expect(second.headers.get("link")).toBeNull();
    const before = await server.api("GET", `/tasks?limit=2&before=${ids[1]}`, { key });
    expect(before.body.map((t: { id: string }) => t.id)).toEqual(ids.slice(2));
  });

  it("MCP list_tasks pages with the REST fields: `cursor` in, `next_cursor` out; `before` still works", async () => {
    const { key } = await server.signup();
    const body = { workspace_id: await workspaceOf(key), repo_id: "acme/app", description: "x" };
    const ids: string[] = [];
    for (let i = 0; i < 3; i++)
      ids.unshift((await server.api("POST", "/tasks", { key, body })).body.id);
    const client = new Client({ name: "paging-test", version: "1.0.0" });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), {
        requestInit: { headers: { "x-api-key": key } },
      }),
    );
    try {
      const list = async (args: Record<string, unknown>) => {
        const res = await client.callTool({ name: "list_tasks", arguments: args });
        expect(res.isError, JSON.stringify(res.content)).toBeFalsy();
        return res.structuredContent as {
          tasks: Array<{ id: string }>;
          next_cursor: string | null;
          next_before: string | null;
        };
      };
      const first = await list({ limit: 2 });
      expect(first.tasks.map((t) => t.id)).toEqual(ids.slice(0, 2));
      // The same cursor REST gives for the same page, usable on either door.
      const rest = await server.api("GET", "/tasks?limit=2", { key });
      expect(first.next_cursor).toBe(rest.headers.get("x-next-cursor"));
      const second = await list({ limit: 2, cursor: first.next_cursor });
      expect(second.tasks.map((t) => t.id)).toEqual(ids.slice(2));
      expect(second.next_cursor).toBeNull();
      const restSecond = await server.api("GET", `/tasks?limit=2&cursor=${first.next_cursor}`, {
        key,
      });
      expect(restSecond.body.map((t: { id: string }) => t.id)).toEqual(ids.slice(2));
      // The older names, deprecated, still page.
      expect(first.next_before).toBe(ids[1]);
      expect((await list({ limit: 2, before: first.next_before })).tasks.map((t) => t.id)).toEqual(
        ids.slice(2),
      );
    } finally {
      await client.close();
    }
  });

  it("pages fixed lists too: agents, and skills across own ones and built-ins", async () => {
    const { key } = await server.signup();
    const all = (await server.api("GET", "/agents", { key })).body.map(
      (a: { name: string }) => a.name,
    );
    const walked: string[] = [];
    let path: string | null = "/agents?limit=7";
    while (path) {
      const res = await server.api("GET", path, { key });
      walked.push(...res.body.map((a: { name: string }) => a.name));
      path = nextOf(res);
    }
    expect(walked).toEqual(all);

    await server.api("POST", "/skills", {
      key,
      body: { name: "mine", description: "d", system_prompt_addition: "p" },
    });
    const skills = (await server.api("GET", "/skills", { key })).body.map(
      (s: { id: string }) => s.id,
    );
    const pagedSkills: string[] = [];
    path = "/skills?limit=1";
    while (path) {
      const res = await server.api("GET", path, { key });
      pagedSkills.push(...res.body.map((s: { id: string }) => s.id));
      path = nextOf(res);
    }
    expect(pagedSkills).toEqual(skills);
  });

  it("limit is 1..200 (default 50); a cursor it did not give out is 400", async () => {
    const { key } = await server.signup();
    for (let i = 0; i < 51; i++)
      await server.api("POST", "/keys/generate", { key, body: { name: `k${i}` } });
    const page = await server.api("GET", "/keys", { key });
    expect(page.body).toHaveLength(50);
    expect(page.headers.get("x-next-cursor")).toBeTruthy();
    for (const bad of ["limit=0", "limit=201", "cursor=%%%", "cursor=bm9wZQ"]) {
      const res = await server.api("GET", `/keys?${bad}`, { key });
      expect(res.status, bad).toBe(400);
      expect(res.body.error.code).toBe("validation_failed");
    }
  });
});

describe("GET /keys", () => {
  it("lists the account's keys newest first, by prefix, never another account's", async () => {
    const mine = await server.signup("first");
    const other = await server.signup("theirs");
    const second = await server.api("POST", "/keys/generate", {
      key: mine.key,
      body: { name: "second" },
    });
    await server.api("DELETE", `/keys/${second.body.id}`, { key: mine.key });
    const list = await server.api("GET", "/keys", { key: mine.key });
    expect(list.status).toBe(200);
    expect(list.body.map((k: { name: string }) => k.name)).toEqual(["second", "first"]);
    const [revoked, first] = list.body;
    expect(revoked.revoked_at).not.toBeNull();
    expect(first).toEqual({
      id: mine.id,
      name: "first",
      prefix: expect.any(String),
      created_at: expect.any(String),
      last_used_at: expect.anything(),
      revoked_at: null,
    });
    expect(mine.key.startsWith(first.prefix)).toBe(true);
    expect(first.prefix.length).toBeLessThan(12);
    expect(JSON.stringify(list.body)).not.toContain(mine.key);
    expect(JSON.stringify(list.body)).not.toContain(other.id);
    const theirs = await server.api("GET", "/keys", { key: other.key });
    expect(theirs.body.map((k: { id: string }) => k.id)).toEqual([other.id]);
  });

  it("records last_used_at, at most once a minute per key", async () => {
    const { id, key } = await server.signup();
    const keyDoc = await server.service.db.models.ApiKey.findOne({ key_id: id }).lean();
    const stored = () =>
      server.service.db.models.KeyUse.findById(keyDoc!._id)
        .lean()
        .then((d) => d?.last_used_at ?? null);
    expect(await stored()).toBeNull();
    await server.api("GET", "/keys/me", { key });
    await vi.waitFor(async () => expect(await stored()).not.toBeNull());
    const at = await stored();
    await Promise.all(Array.from({ length: 10 }, () => server.api("GET", "/keys/me", { key })));
    const list = await server.api("GET", "/keys", { key });
    expect(list.body[0].last_used_at).toBe(at!.toISOString());
    expect(await stored()).toEqual(at);
  });
});

describe("rate limits", () => {
  it("shares the sign-up limit between two processes on one database, with RateLimit headers", async () => {
    const env = { SIGNUP_RATE_LIMIT: "3", MONGODB_URI: testDatabaseUri("rl") };
    const a = await startTestServer({ env });
    const b = await startTestServer({ env });
    try {
      const results = [];
      for (const s of [a, b, a, b])
        results.push(await s.api("POST", "/keys/generate", { body: { name: "n" } }));
      expect(results.map((r) => r.status)).toEqual([201, 201, 201, 429]);
      expect(results[0]!.headers.get("ratelimit-policy")).toBe('"signup";q=3;w=3600');
      expect(results[0]!.headers.get("ratelimit")).toMatch(/^"signup";r=2;t=\d+$/);
      expect(results[2]!.headers.get("ratelimit")).toMatch(/^"signup";r=0;t=\d+$/);
      const refused = results[3]!;
      expect(refused.body).toEqual(errorShape("rate_limited"));
      expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
      expect(refused.headers.get("ratelimit")).toMatch(/^"signup";r=0;t=\d+$/);
      expect(refused.headers.get("ratelimit-policy")).toBe('"signup";q=3;w=3600');
      // Concurrent requests on both processes: still exactly the limit (fresh addresses).
      const burst = await Promise.all(
        Array.from({ length: 12 }, (_, i) =>
          (i % 2 ? a : b).api("POST", "/keys/generate", {
            body: { name: "n" },
            headers: { "x-forwarded-for": "192.0.2.1" },
          }),
        ),
      );
      // Without TRUST_PROXY the header is ignored: these count against 127.0.0.1, used up.
      expect(burst.every((r) => r.status === 429)).toBe(true);
    } finally {
      await a.stop();
      await b.service.stop();
    }
  }, 60_000);

  it("counts a burst across two processes exactly", async () => {
    const env = {
      SIGNUP_RATE_LIMIT: "5",
      TRUST_PROXY: "1",
      MONGODB_URI: testDatabaseUri("rl2"),
    };
    const a = await startTestServer({ env });
    const b = await startTestServer({ env });
    try {
      const burst = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          (i % 2 ? a : b).api("POST", "/keys/generate", {
            body: { name: "n" },
            headers: { "x-forwarded-for": "192.0.2.1" },
          }),
        ),
      );
      expect(burst.filter((r) => r.status === 201)).toHaveLength(5);
      expect(burst.filter((r) => r.status === 429)).toHaveLength(15);
    } finally {
      await a.stop();
      await b.service.stop();
    }
  }, 60_000);

  it("TRUST_PROXY counts hops from the right: forged X-Forwarded-For entries do not pass", async () => {
    const one = await startTestServer({ env: { SIGNUP_RATE_LIMIT: "2", TRUST_PROXY: "true" } });
    const two = await startTestServer({ env: { SIGNUP_RATE_LIMIT: "2", TRUST_PROXY: "2" } });
    try {
      const signup = (s: TestServer, xff: string) =>
        s.api("POST", "/keys/generate", {
          body: { name: "n" },
          headers: { "x-forwarded-for": xff },
        });
      // One proxy appends the real client (203.0.113.7); the client wrote the rest.
      const statuses = [];
      for (let i = 0; i < 5; i++)
        statuses.push((await signup(one, `10.0.${i}.1, 198.51.100.${i}, 203.0.113.7`)).status);
      expect(statuses).toEqual([201, 201, 429, 429, 429]);
      expect((await signup(one, "203.0.113.7, 203.0.113.8")).status).toBe(201);
      // Two proxies: the client is the second entry from the right.
      const second = [];
      for (let i = 0; i < 4; i++)
        second.push((await signup(two, `1.2.3.${i}, 203.0.113.9, 10.0.0.${i}`)).status);
      expect(second).toEqual([201, 201, 429, 429]);
    } finally {
      await one.stop();
      await two.stop();
    }
  }, 60_000);
});

describe("parser and URL errors answer with the JSON error body", () => {
  async function raw(
    method: string,
    path: string,
    headers: Record<string, string>,
    body?: string | Buffer,
  ): Promise<{ status: number; body: unknown; type: string | undefined }> {
    const url = new URL(server.url);
    return new Promise((resolve, reject) => {
      const req = http.request(
        { host: url.hostname, port: url.port, method, path, headers },
        (res) => {
          let text = "";
          res.setEncoding("utf8");
          res.on("data", (c: string) => (text += c));
          res.on("end", () =>
            resolve({
              status: res.statusCode!,
              type: res.headers["content-type"],
              body: text ? (JSON.parse(text) as unknown) : undefined,
            }),
          );
        },
      );
      req.on("error", reject);
      req.end(body);
    });
  }

  let key: string;
  beforeAll(async () => {
    ({ key } = await server.signup());
  });

  it.each([
    [
      "malformed JSON",
      "POST",
      "/workspaces",
      { "content-type": "application/json" },
      '{"a":',
      400,
      "invalid_json",
    ],
    [
      "a text/plain body",
      "POST",
      "/workspaces",
      { "content-type": "text/plain" },
      "hi",
      415,
      "unsupported_media_type",
    ],
    ["a body without content type", "POST", "/workspaces", {}, "{}", 415, "unsupported_media_type"],
    [
      "a gzip-encoded body",
      "POST",
      "/workspaces",
      { "content-type": "application/json", "content-encoding": "gzip" },
      "{}",
      415,
      "unsupported_media_type",
    ],
    [
      "an unknown charset",
      "POST",
      "/workspaces",
      { "content-type": "application/json; charset=klingon" },
      "{}",
      415,
      "unsupported_media_type",
    ],
    [
      "a body over 1 MiB",
      "POST",
      "/workspaces",
      { "content-type": "application/json" },
      `"${"x".repeat(1024 * 1024 + 10)}"`,
      413,
      "payload_too_large",
    ],
    [
      "a chunked body over 1 MiB",
      "POST",
      "/workspaces",
      { "content-type": "application/json", "transfer-encoding": "chunked" },
      `"${"x".repeat(1024 * 1024 + 10)}"`,
      413,
      "payload_too_large",
    ],
    [
      "a bad percent-encoding in a path value",
      "GET",
      "/tasks/%E0%A4%A",
      {},
      undefined,
      400,
      "validation_failed",
    ],
    ["a bad percent-encoding in a route", "GET", "/%zz", {}, undefined, 404, "not_found"],
    [
      "a bad percent-encoding in the query",
      "GET",
      "/tasks?limit=%zz",
      {},
      undefined,
      400,
      "validation_failed",
    ],
  ])("%s", async (_name, method, path, headers, body, status, code) => {
    const res = await raw(method, path, { "x-api-key": key, ...headers }, body);
    expect(res.status).toBe(status);
    expect(res.type).toMatch(/^application\/json/);
    expect(res.body).toEqual(errorShape(code));
  });
});
