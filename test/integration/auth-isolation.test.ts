import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { allRoutes } from "../../src/http/app.js";
import { placeholderRepo } from "../helpers/git-repo.js";
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
let automationId: string;
let reportId: string;
let integrationId: string;

interface Case {
  method: string;
  path: string;
  body?: unknown;
  /** What another account's key gets: 404 for another account's resource, or a check of its own view. */
  foreign: (res: { status: number; body: any }) => void; // eslint-disable-line @typescript-eslint/no-explicit-any
}

let cases: Record<string, Case>;

beforeAll(async () => {
  // Slack's OAuth settings: installing answers 503 without them, whoever asks.
  server = await startTestServer({
    env: {
      SLACK_CLIENT_ID: "1234.5678",
      SLACK_CLIENT_SECRET: "slack-client-secret-0123456789",
      PUBLIC_URL: "https://foreman.example.com",
    },
  });
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
  const mcp = await server.api("PATCH", "/settings/mcp-servers", {
    key: owner.key,
    body: {
      servers: {
        "owner-docs": { command: "node", args: ["docs.mjs"], env_secrets: ["OWNER_TOKEN"] },
      },
      secrets: { OWNER_TOKEN: "owner-secret-value-0123456789" },
    },
  });
  expect(mcp.status).toBe(200);
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
  for (const name of ["owner-skill", "owner-shared"]) {
    const skill = await server.api("POST", "/skills", {
      key: owner.key,
      body: { name, description: "Owner's.", system_prompt_addition: "Owner's instructions." },
    });
    expect(skill.status).toBe(201);
  }
  const shared = await server.api("POST", "/skills/owner-shared/publish", { key: owner.key });
  expect(shared.status).toBe(200);
  const listingId: string = shared.body.id;
  const auto = await server.api("POST", "/automations", {
    key: owner.key,
    body: {
      workspace_id: workspaceId,
      repo_id: "acme/app",
      trigger_type: "cron",
      trigger_config: { schedule: "0 3 * * *" },
      task_template: "owner's automation",
    },
  });
  expect(auto.status).toBe(201);
  automationId = auto.body.id;
  const slack = await server.api("POST", "/integrations", {
    key: owner.key,
    body: {
      type: "slack",
      name: "owner-slack",
      settings: { default_repo: { workspace_id: workspaceId, repo_id: "acme/app" } },
      secrets: { signing_secret: "owner-signing-secret-0123", bot_token: "xoxb-owner-0123456789" },
    },
  });
  expect(slack.status).toBe(201);
  integrationId = slack.body.id;
  const scan = await server.api("POST", "/health-reports/acme%2Fapp/scan", { key: owner.key });
  expect(scan.status).toBe(202);
  reportId = scan.body.id;
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
    listKeys: {
      method: "GET",
      path: "/keys",
      foreign: (res) => {
        expect(res.status).toBe(200);
        const ids = res.body.map((k: { id: string }) => k.id);
        expect(ids).not.toContain(owner.id);
        expect(ids).not.toContain(ownerSecondKeyId);
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
      body: { name: "x", repos: [{ name: "r", clone_url: await placeholderRepo() }] },
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
    deleteWorkspace: {
      method: "DELETE",
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
    getTaskTrajectory: { method: "GET", path: `/tasks/${taskId}/trajectory`, foreign: notFound },
    // The account's own MCP settings: nothing of the owner's servers or secrets.
    getMcpSettings: {
      method: "GET",
      path: "/settings/mcp-servers",
      foreign: (res) => {
        expect(res.status).toBe(200);
        expect(res.body.servers).toEqual({});
        expect(res.body.secrets).not.toContain("OWNER_TOKEN");
      },
    },
    updateMcpSettings: {
      method: "PATCH",
      path: "/settings/mcp-servers",
      body: { secrets: { OTHER_TOKEN: "other-secret-value-0123456789" } },
      foreign: (res) => {
        expect(res.status).toBe(200);
        expect(res.body.servers).toEqual({});
        expect(res.body.secrets).toEqual(["OTHER_TOKEN"]);
        expect(JSON.stringify(res.body)).not.toContain("owner");
      },
    },
    approvePlan: { method: "POST", path: `/tasks/${taskId}/approve`, foreign: notFound },
    rejectPlan: { method: "POST", path: `/tasks/${taskId}/reject`, foreign: notFound },
    approveDiff: { method: "POST", path: `/tasks/${taskId}/approve-diff`, foreign: notFound },
    rejectDiff: { method: "POST", path: `/tasks/${taskId}/reject-diff`, foreign: notFound },
    cancelTask: { method: "POST", path: `/tasks/${taskId}/cancel`, foreign: notFound },
    reviseTask: {
      method: "POST",
      path: `/tasks/${taskId}/revise`,
      body: { feedback: "Rename the helper." },
      foreign: notFound,
    },
    retryTask: { method: "POST", path: `/tasks/${taskId}/retry`, foreign: notFound },
    followUpTask: {
      method: "POST",
      path: `/tasks/${taskId}/follow-up`,
      body: { description: "Also add a test." },
      foreign: notFound,
    },
    reviewPullRequest: {
      method: "POST",
      path: "/tasks/review",
      body: { pr_url: "https://github.com/acme/app/pull/1" },
      foreign: notFound,
    },
    // Agents are the same for every account; running one needs a workspace of one's own.
    listAgents: {
      method: "GET",
      path: "/agents",
      foreign: (res) => expect(res.body).toHaveLength(20),
    },
    listAgentCategories: {
      method: "GET",
      path: "/agents/categories",
      foreign: (res) => expect(res.status).toBe(200),
    },
    getAgent: {
      method: "GET",
      path: "/agents/secret-scanner",
      foreign: (res) => expect(res.status).toBe(200),
    },
    runAgent: {
      method: "POST",
      path: "/agents/secret-scanner/run",
      body: { workspace_id: workspaceId, repo_id: "acme/app", auto_approve: false },
      foreign: notFound,
    },
    listSkills: {
      method: "GET",
      path: "/skills",
      foreign: (res) => {
        expect(res.status).toBe(200);
        expect(res.body.map((s: { name: string }) => s.name)).not.toContain("owner-skill");
      },
    },
    createSkill: {
      method: "POST",
      path: "/skills",
      body: { name: "others-skill", description: "d", system_prompt_addition: "p" },
      foreign: (res) => expect(res.status).toBe(201),
    },
    getSkill: { method: "GET", path: "/skills/owner-skill", foreign: notFound },
    deleteSkill: { method: "DELETE", path: "/skills/owner-skill", foreign: notFound },
    publishSkill: { method: "POST", path: "/skills/owner-skill/publish", foreign: notFound },
    unpublishSkill: { method: "POST", path: "/skills/owner-shared/unpublish", foreign: notFound },
    // Published skills are meant for every account, without saying whose they are.
    listMarketplaceSkills: {
      method: "GET",
      path: "/marketplace/skills",
      foreign: (res) => {
        expect(res.status).toBe(200);
        expect(res.body.map((l: { id: string }) => l.id)).toEqual([listingId]);
        expect(res.body[0].owned).toBe(false);
        expect(JSON.stringify(res.body)).not.toMatch(/acct_|key_/);
      },
    },
    getMarketplaceSkill: {
      method: "GET",
      path: `/marketplace/skills/${listingId}`,
      foreign: (res) => expect(res.body).toMatchObject({ id: listingId, owned: false }),
    },
    // No model on this server: the other account learns nothing but that.
    parseSpec: {
      method: "POST",
      path: "/prism/parse",
      body: { spec: "Build a blog." },
      foreign: (res) => expect(res.body.error.code).toBe("upstream_unavailable"),
    },
    queueTasks: {
      method: "POST",
      path: "/prism/queue",
      body: {
        workspace_id: workspaceId,
        repo_id: "acme/app",
        tasks: [{ id: 1, description: "x", skill: null, depends_on: [], priority: 1 }],
      },
      foreign: notFound,
    },
    createAutomation: {
      method: "POST",
      path: "/automations",
      body: {
        workspace_id: workspaceId,
        repo_id: "acme/app",
        trigger_type: "cron",
        trigger_config: { schedule: "0 3 * * *" },
        task_template: "sneaky",
      },
      foreign: notFound,
    },
    listAutomations: {
      method: "GET",
      path: "/automations",
      foreign: (res) => {
        expect(res.status).toBe(200);
        expect(res.body).toEqual([]);
      },
    },
    getAutomation: { method: "GET", path: `/automations/${automationId}`, foreign: notFound },
    updateAutomation: {
      method: "PATCH",
      path: `/automations/${automationId}`,
      body: { enabled: false },
      foreign: notFound,
    },
    deleteAutomation: {
      method: "DELETE",
      path: `/automations/${automationId}`,
      foreign: notFound,
    },
    createIntegration: {
      method: "POST",
      path: "/integrations",
      body: {
        type: "slack",
        name: "sneaky",
        settings: { default_repo: { workspace_id: workspaceId, repo_id: "acme/app" } },
        secrets: { signing_secret: "sneaky-signing-secret-01", bot_token: "xoxb-sneaky-0123456" },
      },
      foreign: notFound,
    },
    listIntegrations: {
      method: "GET",
      path: "/integrations",
      foreign: (res) => {
        expect(res.status).toBe(200);
        expect(res.body).toEqual([]);
      },
    },
    getIntegration: { method: "GET", path: `/integrations/${integrationId}`, foreign: notFound },
    updateIntegration: {
      method: "PATCH",
      path: `/integrations/${integrationId}`,
      body: { enabled: false },
      foreign: notFound,
    },
    startSlackInstall: {
      method: "POST",
      path: `/integrations/${integrationId}/slack/install`,
      foreign: notFound,
    },
    deleteIntegration: {
      method: "DELETE",
      path: `/integrations/${integrationId}`,
      foreign: notFound,
    },
    // The service's configuration, the same for every account: nothing of another's.
    getStatus: {
      method: "GET",
      path: "/status",
      foreign: (res) => {
        expect(res.status).toBe(200);
        expect(JSON.stringify(res.body)).not.toContain(workspaceId);
        expect(Object.keys(res.body).sort()).toEqual([
          "github_app",
          "missing",
          "model",
          "public_url",
          "sandbox",
          "signup",
          "viewer",
        ]);
      },
    },
    scanRepository: { method: "POST", path: "/health-reports/acme%2Fapp/scan", foreign: notFound },
    getLatestHealthReport: { method: "GET", path: "/health-reports/acme%2Fapp", foreign: notFound },
    listHealthReports: {
      method: "GET",
      path: "/health-reports/acme%2Fapp/history",
      foreign: notFound,
    },
    getHealthReport: {
      method: "GET",
      path: `/health-reports/acme%2Fapp/scans/${reportId}`,
      foreign: notFound,
    },
    // The other account's own figures: none of the owner's task counts.
    getVelocity: {
      method: "GET",
      path: "/analytics/velocity",
      foreign: (res) => {
        expect(res.status).toBe(200);
        expect(res.body.tasks.total).toBe(0);
      },
    },
    getVelocityTimeline: {
      method: "GET",
      path: "/analytics/velocity/timeline?period=7",
      foreign: (res) => {
        expect(res.status).toBe(200);
        expect(JSON.stringify(res.body)).not.toContain(taskId);
      },
    },
    // No GitHub App on this server: linking is unavailable to everyone alike.
    linkWorkspace: {
      method: "POST",
      path: "/workspaces/link",
      foreign: (res) => expect(res.status).toBe(503),
    },
    installMarketplaceSkill: {
      method: "POST",
      path: `/marketplace/skills/${listingId}/install`,
      body: {},
      foreign: (res) => {
        expect(res.status).toBe(201);
        expect(res.body).toMatchObject({ name: "owner-shared", installed_from: listingId });
        expect(res.body.id).not.toBe(listingId);
      },
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
      default_branch: null, // not given, and the remote does not answer (ls-remote)
    });
    const keys = await server.service.db.models.ApiKey.findOne({ key_id: ownerSecondKeyId }).lean();
    expect(keys?.revoked_at).toBeNull();
    const task = await server.api("GET", `/tasks/${taskId}`, { key: owner.key });
    expect(task.body).toMatchObject({ status: "queued", phase: "QUEUED", error: null });
    const skill = await server.api("GET", "/skills/owner-shared", { key: owner.key });
    expect(skill.body).toMatchObject({ published: true });
    expect((await server.api("GET", "/skills/owner-skill", { key: owner.key })).status).toBe(200);
  });
});
