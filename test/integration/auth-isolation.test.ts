import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { allRoutes } from "../../src/http/app.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

/**
 * Every route that takes a key, called with no key, an unknown key, a revoked key and a key
 * of another account. The route list comes from the same registry the router uses, so a new
 * route without a case here fails this file.
 */
let server: TestServer;
let owner: { id: string; key: string };
let other: { id: string; key: string };
let revoked: { id: string; key: string };
let workspaceId: string;
let ownerSecondKeyId: string;
let taskId: string;

interface Case {
  method: string;
  path: string;
  body?: unknown;
  /** What another account's key gets: 404 for another account's resource, or a check of its own view. */
  foreign: (res: { status: number; body: any }) => void; // eslint-disable-line @typescript-eslint/no-explicit-any
}

let cases: Record<string, Case>;

beforeAll(async () => {
  server = await startTestServer();
  owner = await server.signup("owner");
  other = await server.signup("other");
  revoked = await server.signup("revoked");
  expect((await server.api("DELETE", `/keys/${revoked.id}`, { key: revoked.key })).status).toBe(
    204,
  );
  const second = await server.api("POST", "/keys/generate", {
    key: owner.key,
    body: { name: "second" },
  });
  ownerSecondKeyId = second.body.id;
  const ws = await server.api("POST", "/workspaces", {
    key: owner.key,
    body: {
      name: "owner-ws",
      repos: [{ name: "acme/app", clone_url: "https://git.example.com/acme/app.git" }],
    },
  });
  expect(ws.status).toBe(201);
  workspaceId = ws.body.id;
  const task = await server.api("POST", "/tasks", {
    key: owner.key,
    body: { workspace_id: workspaceId, repo_id: "acme/app", description: "owner's task" },
  });
  expect(task.status).toBe(201);
  taskId = task.body.id;
  const notFound = (res: { status: number }) => expect(res.status).toBe(404);

  cases = {
    getKeyUsage: {
      method: "GET",
      path: "/keys/me",
      foreign: (res) => {
        expect(res.status).toBe(200);
        expect(res.body.id).not.toBe(owner.id);
      },
    },
    revokeKey: {
      method: "DELETE",
      path: `/keys/${ownerSecondKeyId}`,
      foreign: (res) => expect(res.status).toBe(404),
    },
    createWorkspace: {
      method: "POST",
      path: "/workspaces",
      body: { name: "x", repos: [{ name: "r", clone_url: "/tmp/r" }] },
      foreign: (res) => expect(res.status).toBe(201),
    },
    listWorkspaces: {
      method: "GET",
      path: "/workspaces",
      foreign: (res) => {
        expect(res.status).toBe(200);
        expect(res.body.map((w: { id: string }) => w.id)).not.toContain(workspaceId);
      },
    },
    getWorkspace: {
      method: "GET",
      path: `/workspaces/${workspaceId}`,
      foreign: (res) => expect(res.status).toBe(404),
    },
    listWorkspaceRepos: {
      method: "GET",
      path: `/workspaces/${workspaceId}/repos`,
      foreign: (res) => expect(res.status).toBe(404),
    },
    createTask: {
      method: "POST",
      path: "/tasks",
      body: { workspace_id: workspaceId, repo_id: "acme/app", description: "sneaky" },
      foreign: notFound,
    },
    listTasks: {
      method: "GET",
      path: "/tasks",
      foreign: (res) => {
        expect(res.status).toBe(200);
        expect(res.body).toEqual([]);
      },
    },
    getTask: { method: "GET", path: `/tasks/${taskId}`, foreign: notFound },
    approvePlan: { method: "POST", path: `/tasks/${taskId}/approve`, foreign: notFound },
    rejectPlan: { method: "POST", path: `/tasks/${taskId}/reject`, foreign: notFound },
    approveDiff: { method: "POST", path: `/tasks/${taskId}/approve-diff`, foreign: notFound },
    rejectDiff: { method: "POST", path: `/tasks/${taskId}/reject-diff`, foreign: notFound },
    cancelTask: { method: "POST", path: `/tasks/${taskId}/cancel`, foreign: notFound },
    reviewPullRequest: {
      method: "POST",
      path: "/tasks/review",
      body: { pr_url: "https://github.com/acme/app/pull/1" },
      foreign: notFound,
    },
  };
});

afterAll(async () => {
  await server.stop();
});

describe("protected routes", () => {
  it("have a case in this file for every route that takes a key", () => {
    const protectedRoutes = allRoutes()
      .filter((r) => r.auth === "key")
      .map((r) => r.operationId);
    expect(protectedRoutes.length).toBeGreaterThan(0);
    expect(Object.keys(cases).sort()).toEqual([...protectedRoutes].sort());
  });

  it("answer 401 with the error body without a key, with an unknown key and with a revoked key", async () => {
    const unknownKey = `fmn_${"A".repeat(43)}`;
    for (const [name, c] of Object.entries(cases)) {
      for (const key of [undefined, unknownKey, "not-a-key", revoked.key]) {
        const res = await server.api(c.method, c.path, { key, body: c.body });
        expect(res.status, `${name} with key ${String(key).slice(0, 8)}`).toBe(401);
        expect(res.body).toEqual({ error: { code: "unauthorized", message: expect.any(String) } });
        // Nothing of the owner's resources leaks into the refusal.
        expect(JSON.stringify(res.body)).not.toContain(workspaceId);
      }
    }
  });

  it("never show one account's resources to another account's key", async () => {
    for (const [name, c] of Object.entries(cases)) {
      const res = await server.api(c.method, c.path, { key: other.key, body: c.body });
      try {
        c.foreign(res);
      } catch (error) {
        throw new Error(`${name}: ${(error as Error).message}`);
      }
      if (res.status === 404) expect(res.body.error.code).toBe("not_found");
      expect(JSON.stringify(res.body)).not.toContain("owner-ws");
    }
    // The owner still sees everything, and the foreign revoke attempt changed nothing.
    const mine = await server.api("GET", `/workspaces/${workspaceId}/repos`, { key: owner.key });
    expect(mine.status).toBe(200);
    expect(mine.body[0]).toMatchObject({
      full_name: "acme/app",
      name: "app",
      default_branch: "main",
    });
    const keys = await server.service.db.models.ApiKey.findOne({ key_id: ownerSecondKeyId }).lean();
    expect(keys?.revoked_at).toBeNull();
    const task = await server.api("GET", `/tasks/${taskId}`, { key: owner.key });
    expect(task.body).toMatchObject({ status: "queued", phase: "QUEUED", error: null });
  });
});
