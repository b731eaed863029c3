import nock from "nock";
import { randomUUID } from "node:crypto";
import { readFile } from "node:fs/promises";
import { parse as parseYaml } from "yaml";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { linkStateId } from "../../src/domain/workspaces/linking.js";
import { createGitRepo } from "../helpers/git-repo.js";
import { examplePayload, signedDelivery, testPrivateKey } from "../helpers/github.js";
import {
  expectValidGithubRequests,
  githubRequests,
  watchGithub,
} from "../helpers/github-openapi.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

/*
 * Installations and linking, end to end: signed deliveries to the real server, GitHub faked
 * by nock (every expected request made, every request checked against GitHub's REST
 * description, nothing else let out), results read through the API and the database.
 */

const SECRET = "webhook-secret-for-installations";
const CLIENT_ID = "Iv1.installations0test";
const CLIENT_SECRET = "client-secret-for-installation-tests";
const SLUG = "foreman-test";
const API = "https://api.github.com";
const WEB = "https://github.com";

let server: TestServer;
let alice: { id: string; key: string };
let bob: { id: string; key: string };
const logLines: string[] = [];
const unmatched: string[] = [];
/** Requests nock had no interceptor for, except the test's own calls to the server. */
const onNoMatch = (req: {
  method?: string;
  url?: string;
  href?: string;
  host?: string;
  hostname?: string;
  path?: string;
}) => {
  const url = req.href ?? req.url ?? `${req.hostname ?? req.host ?? ""}${req.path ?? ""}`;
  if (!/^(https?:\/\/)?(127\.0\.0\.1|localhost)([:/]|$)/.test(url))
    unmatched.push(`${req.method} ${url}`);
};

beforeAll(async () => {
  nock.disableNetConnect();
  nock.enableNetConnect("127.0.0.1");
  nock.emitter.on("no match", onNoMatch);
  server = await startTestServer({
    env: {
      APP_ID: "4711",
      PRIVATE_KEY: testPrivateKey(),
      WEBHOOK_SECRET: SECRET,
      APP_SLUG: SLUG,
      GITHUB_CLIENT_ID: CLIENT_ID,
      GITHUB_CLIENT_SECRET: CLIENT_SECRET,
    },
    logLines,
  });
  alice = await account("alice");
  bob = await account("bob");
});

afterEach(() => {
  const pending = nock.pendingMocks();
  const stray = [...unmatched];
  nock.cleanAll();
  unmatched.length = 0;
  // Every request went out as GitHub describes it, every one the test set up was made, and
  // no other left the process.
  expectValidGithubRequests();
  expect({ pending, stray }).toEqual({ pending: [], stray: [] });
});

afterAll(async () => {
  nock.emitter.removeListener("no match", onNoMatch);
  nock.enableNetConnect();
  await server?.stop();
});

const models = () => server.service.db.models;

/** Signs up through the API; `id` is the account's id (the key's is not needed here). */
async function account(name: string, on = server): Promise<{ id: string; key: string }> {
  const { id: keyId, key } = await on.signup(name);
  const keyDoc = await on.service.db.models.ApiKey.findOne({ key_id: keyId }).lean();
  return { id: keyDoc!.account_id, key };
}

/* GitHub's side: real payloads and objects from @octokit/webhooks-examples, adjusted. */

interface RepoSpec {
  id: number;
  name: string;
  private?: boolean;
}

function installationObject(id: number, login: string, type = "Organization") {
  const { installation } = examplePayload("installation", "created") as {
    installation: Record<string, unknown> & { account: Record<string, unknown> };
  };
  return {
    ...installation,
    id,
    account: { ...installation.account, login, type },
    target_type: type,
    target_id: id * 10,
    access_tokens_url: `${API}/app/installations/${id}/access_tokens`,
    html_url: `${WEB}/organizations/${login}/settings/installations/${id}`,
    suspended_at: null,
    suspended_by: null,
  };
}

function eventRepo(owner: string, repo: RepoSpec) {
  const [example] = (examplePayload("installation", "created") as { repositories: object[] })
    .repositories;
  return {
    ...example,
    id: repo.id,
    name: repo.name,
    full_name: `${owner}/${repo.name}`,
    private: repo.private ?? false,
  };
}

function apiRepo(owner: string, repo: RepoSpec, defaultBranch: string) {
  const example = (examplePayload("issues", "labeled") as { repository: Record<string, unknown> })
    .repository;
  return {
    ...example,
    id: repo.id,
    name: repo.name,
    full_name: `${owner}/${repo.name}`,
    private: repo.private ?? false,
    owner: { ...(example.owner as object), login: owner },
    html_url: `${WEB}/${owner}/${repo.name}`,
    clone_url: `${WEB}/${owner}/${repo.name}.git`,
    default_branch: defaultBranch,
  };
}

async function deliver(event: string, payload: unknown): Promise<void> {
  const { headers, raw } = await signedDelivery(SECRET, event, payload, randomUUID());
  const res = await server.api("POST", "/github/webhooks", { raw, headers });
  expect(res.status, JSON.stringify(res.body)).toBe(202);
  expect(res.body).toEqual({ ok: true, duplicate: false });
}

async function deliverCreated(id: number, login: string, repos: RepoSpec[]): Promise<void> {
  await deliver("installation", {
    ...examplePayload("installation", "created"),
    installation: installationObject(id, login),
    repositories: repos.map((r) => eventRepo(login, r)),
  });
}

/** GitHub's answers for one setup redirect; each scope checks its requests. */
function mockSetup(options: {
  code: string;
  token: string;
  /** Pages of `GET /user/installations`; the user's installations. */
  pages: object[][];
  /** The installation whose repositories GitHub lists (with an installation token). */
  repos?: { installationId: number; list: object[] };
  web?: string;
  api?: string;
}): void {
  const web = options.web ?? WEB;
  const api = options.api ?? API;
  const apiPath = new URL(api).pathname.replace(/\/$/, "");
  watchGithub(
    nock(web)
      .post("/login/oauth/access_token", {
        client_id: CLIENT_ID,
        client_secret: CLIENT_SECRET,
        code: options.code,
      })
      .matchHeader("accept", "application/json")
      .reply(200, { access_token: options.token, token_type: "bearer", scope: "" }),
  );
  options.pages.forEach((installations, i) => {
    const scope = nock(new URL(api).origin)
      .get(`${apiPath}/user/installations`)
      .query(i === 0 ? { per_page: "100" } : { per_page: "100", page: String(i + 1) })
      .matchHeader("authorization", `Bearer ${options.token}`);
    const next: Record<string, string> =
      i < options.pages.length - 1
        ? { link: `<${api}/user/installations?per_page=100&page=${i + 2}>; rel="next"` }
        : {};
    watchGithub(
      scope.reply(200, { total_count: options.pages.flat().length, installations }, next),
    );
  });
  if (options.repos) {
    const { installationId, list } = options.repos;
    watchGithub(
      nock(new URL(api).origin)
        .post(`${apiPath}/app/installations/${installationId}/access_tokens`)
        .reply(201, {
          token: `ghs_${"i".repeat(30)}${installationId}`,
          expires_at: new Date(Date.now() + 3600_000).toISOString(),
        }),
    );
    watchGithub(
      nock(new URL(api).origin)
        .get(`${apiPath}/installation/repositories`)
        .query({ per_page: "100" })
        .reply(200, {
          total_count: list.length,
          repository_selection: "selected",
          repositories: list,
        }),
    );
  }
}

async function startLinking(key: string, on = server): Promise<string> {
  const res = await on.api("POST", "/workspaces/link", { key });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.state as string;
}

function setup(query: Record<string, string>, headers?: Record<string, string>, on = server) {
  return on.api("GET", `/github/setup?${new URLSearchParams(query)}`, headers ? { headers } : {});
}

/** Links an installation to an account through the whole flow; GitHub lists `repos`. */
async function link(
  account: { key: string },
  installationId: number,
  login: string,
  repos: object[],
): Promise<void> {
  const state = await startLinking(account.key);
  const code = `code-${installationId}`;
  mockSetup({
    code,
    token: `ghu_${"u".repeat(30)}${installationId}`,
    pages: [[installationObject(installationId, login)]],
    repos: { installationId, list: repos },
  });
  const res = await setup({
    installation_id: String(installationId),
    setup_action: "install",
    code,
    state,
  });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  expect(res.body.linked).toBe(true);
}

async function workspaceIds(key: string): Promise<string[]> {
  const res = await server.api("GET", "/workspaces", { key });
  expect(res.status).toBe(200);
  return res.body.map((w: { id: string }) => w.id);
}

async function repos(key: string, workspaceId: string) {
  const res = await server.api("GET", `/workspaces/${workspaceId}/repos`, { key });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body as Array<{ id: string; full_name: string; default_branch: string | null }>;
}

/** Polls a condition that depends on another process's cache (ACCOUNT_VIEW_POLL_MS). */
async function eventually<T>(read: () => Promise<T>, ok: (value: T) => boolean): Promise<T> {
  const deadline = Date.now() + 10_000;
  let value = await read();
  while (!ok(value) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
    value = await read();
  }
  return value;
}

function createTask(key: string, workspaceId: string, repoId: string) {
  return server.api("POST", "/tasks", {
    key,
    body: { workspace_id: workspaceId, repo_id: repoId, description: "Fix the README typo" },
  });
}

describe("installation events", () => {
  it("installation.created records an unlinked workspace nobody sees; linking makes it the account's", async () => {
    await deliverCreated(1001, "acme", [
      { id: 501, name: "app" },
      { id: 502, name: "site", private: true },
    ]);
    const row = await models().Workspace.findById("gh-1001").lean();
    expect(row).toMatchObject({
      kind: "github",
      account_id: null,
      name: "acme",
      github: {
        installation_id: 1001,
        account_login: "acme",
        account_type: "Organization",
        suspended_at: null,
        deleted_at: null,
      },
    });
    expect(row!.repos).toEqual([
      {
        repo_id: "501",
        name: "app",
        full_name: "acme/app",
        clone_url: "https://github.com/acme/app.git",
        default_branch: null,
        private: false,
      },
      {
        repo_id: "502",
        name: "site",
        full_name: "acme/site",
        clone_url: "https://github.com/acme/site.git",
        default_branch: null,
        private: true,
      },
    ]);
    // Unlinked: no account sees it or can use it, and no GitHub request was needed.
    expect(await workspaceIds(alice.key)).not.toContain("gh-1001");
    expect((await server.api("GET", "/workspaces/gh-1001", { key: alice.key })).status).toBe(404);
    expect((await createTask(alice.key, "gh-1001", "501")).status).toBe(404);

    // The whole linking flow, with the user's installations on two pages.
    const start = await server.api("POST", "/workspaces/link", { key: alice.key });
    expect(start.status).toBe(201);
    const { state, install_url, expires_at } = start.body;
    expect(state).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(install_url).toBe(`${WEB}/apps/${SLUG}/installations/new?state=${state}`);
    const ttl = Date.parse(expires_at) - Date.now();
    expect(ttl).toBeGreaterThan(14 * 60_000);
    expect(ttl).toBeLessThanOrEqual(15 * 60_000);
    const token = `ghu_${"t".repeat(36)}`;
    mockSetup({
      code: "code-1001",
      token,
      pages: [[installationObject(77, "someone-else")], [installationObject(1001, "acme")]],
      repos: {
        installationId: 1001,
        list: [
          apiRepo("acme", { id: 501, name: "app" }, "trunk"),
          apiRepo("acme", { id: 502, name: "site", private: true }, "main"),
        ],
      },
    });
    const res = await setup({
      installation_id: "1001",
      setup_action: "install",
      code: "code-1001",
      state,
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.headers.get("content-type")).toContain("application/json");
    expect(res.body).toEqual({
      linked: true,
      message: "Installation 1001 (acme) is linked to your account.",
      workspace_id: "gh-1001",
      installation_id: 1001,
      account_login: "acme",
      repo_count: 2,
      suspended: false,
    });

    const list = await server.api("GET", "/workspaces", { key: alice.key });
    expect(list.body).toContainEqual(
      expect.objectContaining({
        id: "gh-1001",
        kind: "github",
        name: "acme",
        repo_count: 2,
        github: { installation_id: 1001, account_login: "acme", suspended: false },
      }),
    );
    expect(await repos(alice.key, "gh-1001")).toEqual([
      {
        id: "501",
        name: "app",
        full_name: "acme/app",
        clone_url: "https://github.com/acme/app.git",
        default_branch: "trunk",
        private: false,
      },
      {
        id: "502",
        name: "site",
        full_name: "acme/site",
        clone_url: "https://github.com/acme/site.git",
        default_branch: "main",
        private: true,
      },
    ]);
    expect((await models().Workspace.findById("gh-1001").lean())!.account_id).toBe(alice.id);
    // Tasks can be created there now, by id or by full name.
    const task = await createTask(alice.key, "gh-1001", "acme/app");
    expect(task.status, JSON.stringify(task.body)).toBe(201);
    expect(task.body).toMatchObject({ workspace_id: "gh-1001", repo_id: "501" });

    // Another account sees nothing of it.
    expect(await workspaceIds(bob.key)).not.toContain("gh-1001");
    expect((await server.api("GET", "/workspaces/gh-1001", { key: bob.key })).status).toBe(404);
    expect((await server.api("GET", "/workspaces/gh-1001/repos", { key: bob.key })).status).toBe(
      404,
    );
    expect((await createTask(bob.key, "gh-1001", "501")).status).toBe(404);

    // The state is stored hashed and is now used; the user token is nowhere.
    expect(await models().Once.exists({ _id: linkStateId(state) })).toBeTruthy();
    expect(await models().Once.exists({ _id: `${linkStateId(state)}:used` })).toBeTruthy();
    const stored = JSON.stringify(await models().Once.find({}).lean());
    expect(stored).not.toContain(state);
    expect(stored).not.toContain(token);
    expect(JSON.stringify(await models().Workspace.find({}).lean())).not.toContain(token);
    expect(logLines.join("\n")).not.toContain(token);
    expect(logLines.join("\n")).not.toContain(CLIENT_SECRET);
    expect(logLines.some((l) => l.includes("installation linked"))).toBe(true);

    // The same state cannot be used again, and nothing is asked of GitHub for it.
    const again = await setup({
      installation_id: "1001",
      setup_action: "install",
      code: "code-1001",
      state,
    });
    expect(again.status).toBe(400);
    expect(again.body.error).toMatchObject({
      code: "validation_failed",
      details: [{ path: "state", message: "The link state has been used already." }],
    });
  });

  it("the setup redirect before installation.created creates the workspace from GitHub", async () => {
    await link(alice, 1002, "early", [apiRepo("early", { id: 601, name: "tool" }, "develop")]);
    const row = await models().Workspace.findById("gh-1002").lean();
    expect(row).toMatchObject({
      kind: "github",
      account_id: alice.id,
      name: "early",
      github: { installation_id: 1002, account_login: "early", deleted_at: null },
    });
    // The event arriving afterwards keeps the link and what GitHub's listing told.
    await deliverCreated(1002, "early", [{ id: 601, name: "tool" }]);
    const after = await models().Workspace.findById("gh-1002").lean();
    expect(after!.account_id).toBe(alice.id);
    expect(await repos(alice.key, "gh-1002")).toEqual([
      expect.objectContaining({ id: "601", full_name: "early/tool", default_branch: "develop" }),
    ]);
  });

  it("installation_repositories added and removed keep the repositories in step", async () => {
    await deliverCreated(1003, "Codertocat", [{ id: 186853002, name: "Hello-World" }]);
    await link(alice, 1003, "Codertocat", [
      apiRepo("Codertocat", { id: 186853002, name: "Hello-World" }, "master"),
    ]);
    const added = examplePayload("installation_repositories", "added") as Record<string, unknown>;
    await deliver("installation_repositories", {
      ...added,
      installation: installationObject(1003, "Codertocat"),
    });
    expect(await repos(alice.key, "gh-1003")).toEqual([
      expect.objectContaining({ id: "186853002", full_name: "Codertocat/Hello-World" }),
      {
        id: "186853007",
        name: "Space",
        full_name: "Codertocat/Space",
        clone_url: "https://github.com/Codertocat/Space.git",
        default_branch: null,
        private: false,
      },
    ]);
    const removed = examplePayload("installation_repositories", "removed") as {
      repositories_removed: Array<Record<string, unknown>>;
    };
    await deliver("installation_repositories", {
      ...removed,
      installation: installationObject(1003, "Codertocat"),
      repositories_removed: [{ ...removed.repositories_removed[0], id: 186853002 }],
    });
    expect((await repos(alice.key, "gh-1003")).map((r) => r.id)).toEqual(["186853007"]);
    const row = await models().Workspace.findById("gh-1003").lean();
    expect(row!.repos.map((r) => r.repo_id)).toEqual(["186853007"]);
    expect(row!.account_id).toBe(alice.id);
    const gone = await createTask(alice.key, "gh-1003", "186853002");
    expect(gone.status).toBe(404);

    // new_permissions_accepted carries the current list and keeps the link.
    await deliver("installation", {
      ...examplePayload("installation", "new_permissions_accepted"),
      installation: installationObject(1003, "Codertocat"),
      repositories: [eventRepo("Codertocat", { id: 186853007, name: "Space" })],
    });
    const refreshed = await models().Workspace.findById("gh-1003").lean();
    expect(refreshed!.account_id).toBe(alice.id);
    expect(refreshed!.repos.map((r) => r.repo_id)).toEqual(["186853007"]);
  });

  it("a suspended installation is listed as suspended and takes no tasks until unsuspended", async () => {
    await deliverCreated(1004, "paused", [{ id: 701, name: "svc" }]);
    await link(alice, 1004, "paused", [apiRepo("paused", { id: 701, name: "svc" }, "main")]);
    expect((await createTask(alice.key, "gh-1004", "701")).status).toBe(201);

    const suspend = examplePayload("installation", "suspend") as Record<string, unknown>;
    await deliver("installation", {
      ...suspend,
      installation: { ...installationObject(1004, "paused"), suspended_at: "2026-01-02T03:04:05Z" },
    });
    const row = await models().Workspace.findById("gh-1004").lean();
    expect(row!.github!.suspended_at!.toISOString()).toBe("2026-01-02T03:04:05.000Z");
    const shown = await server.api("GET", "/workspaces/gh-1004", { key: alice.key });
    expect(shown.body.github).toEqual({
      installation_id: 1004,
      account_login: "paused",
      suspended: true,
    });
    const refused = await eventually(
      () => createTask(alice.key, "gh-1004", "701"),
      (res) => res.status !== 201,
    );
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe("invalid_state");
    expect(refused.body.error.message).toContain("suspended on GitHub");

    await deliver("installation", {
      ...examplePayload("installation", "unsuspend"),
      installation: installationObject(1004, "paused"),
    });
    expect((await models().Workspace.findById("gh-1004").lean())!.github!.suspended_at).toBeNull();
    const accepted = await eventually(
      () => createTask(alice.key, "gh-1004", "701"),
      (res) => res.status === 201,
    );
    expect(accepted.status).toBe(201);
  });

  it("a deleted installation disappears from the account's workspaces", async () => {
    await deliverCreated(1005, "leaving", [{ id: 801, name: "old" }]);
    await link(alice, 1005, "leaving", [apiRepo("leaving", { id: 801, name: "old" }, "main")]);
    expect(await workspaceIds(alice.key)).toContain("gh-1005");
    await deliver("installation", {
      ...examplePayload("installation", "deleted"),
      installation: installationObject(1005, "leaving"),
    });
    const row = await models().Workspace.findById("gh-1005").lean();
    expect(row!.github!.deleted_at).toBeInstanceOf(Date);
    expect(await workspaceIds(alice.key)).not.toContain("gh-1005");
    expect((await server.api("GET", "/workspaces/gh-1005", { key: alice.key })).status).toBe(404);
    const refused = await eventually(
      () => createTask(alice.key, "gh-1005", "801"),
      (res) => res.status !== 201,
    );
    expect(refused.status).toBe(404);
  });

  it("concurrent repository events of one installation all take effect", async () => {
    await deliverCreated(1007, "busy", [{ id: 1000, name: "base" }]);
    const added = examplePayload("installation_repositories", "added") as {
      repositories_added: Array<Record<string, unknown>>;
    };
    await Promise.all(
      [1, 2, 3, 4, 5, 6].map((n) =>
        deliver("installation_repositories", {
          ...added,
          installation: installationObject(1007, "busy"),
          repositories_added: [
            {
              ...added.repositories_added[0],
              id: 1000 + n,
              name: `r${n}`,
              full_name: `busy/r${n}`,
            },
          ],
        }),
      ),
    );
    const row = await models().Workspace.findById("gh-1007").lean();
    expect(row!.repos.map((r) => r.repo_id).sort()).toEqual(
      ["1000", "1001", "1002", "1003", "1004", "1005", "1006"].sort(),
    );
    // No lock is left behind.
    expect(await models().Once.exists({ _id: "workspace-lock:gh-1007" })).toBeNull();
  });

  it("a repeated installation.created is harmless", async () => {
    await deliverCreated(1006, "twice", [{ id: 901, name: "a" }]);
    await deliverCreated(1006, "twice", [{ id: 901, name: "a" }]);
    expect(await models().Workspace.countDocuments({ "github.installation_id": 1006 })).toBe(1);
    expect((await models().Workspace.findById("gh-1006").lean())!.repos).toHaveLength(1);
  });
});

describe("linking refusals", () => {
  it("refuses an expired, unknown or missing state and a missing code without asking GitHub", async () => {
    const state = "expired-state-for-the-test-0123456789abcdefghijk";
    const old = new Date(Date.now() - 16 * 60_000);
    await models().Once.collection.insertOne({
      _id: linkStateId(state) as never,
      scope: "github-link-state",
      account_id: alice.id,
      expires_at: new Date(old.getTime() + 15 * 60_000),
      created_at: old,
      updated_at: old,
    });
    const expired = await setup({
      installation_id: "1001",
      setup_action: "install",
      code: "c",
      state,
    });
    expect(expired.status).toBe(400);
    expect(expired.body.error.details).toEqual([
      { path: "state", message: "The link state has expired (states are valid for 15 minutes)." },
    ]);
    expect(expired.body.error.message).toContain("POST /workspaces/link");

    const unknown = await setup({
      installation_id: "1001",
      setup_action: "install",
      code: "c",
      state: "never-issued",
    });
    expect(unknown.status).toBe(400);
    expect(unknown.body.error.details).toEqual([
      { path: "state", message: "The link state is not known." },
    ]);

    const fresh = await startLinking(alice.key);
    const noCode = await setup({ installation_id: "1001", setup_action: "install", state: fresh });
    expect(noCode.status).toBe(400);
    expect(noCode.body.error.code).toBe("validation_failed");
    expect(noCode.body.error.details).toEqual([expect.objectContaining({ path: "query.code" })]);
    const noState = await setup({ installation_id: "1001", setup_action: "install", code: "c" });
    expect(noState.status).toBe(400);
    expect(noState.body.error.details).toEqual([expect.objectContaining({ path: "query.state" })]);
    // The refused requests did not use up the fresh state.
    expect(await models().Once.exists({ _id: `${linkStateId(fresh)}:used` })).toBeNull();
  });

  it("refuses an installation that is not among the user's, and links nothing", async () => {
    await deliverCreated(1101, "victim", [{ id: 1201, name: "secret" }]);
    const state = await startLinking(bob.key);
    mockSetup({
      code: "code-1101",
      token: `ghu_${"b".repeat(36)}`,
      pages: [[installationObject(1199, "bobs-own")]],
    });
    const res = await setup({
      installation_id: "1101",
      setup_action: "install",
      code: "code-1101",
      state,
    });
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe("forbidden");
    expect((await models().Workspace.findById("gh-1101").lean())!.account_id).toBeNull();
    expect(await workspaceIds(bob.key)).not.toContain("gh-1101");
    expect(await models().Once.exists({ _id: "github-link:1101" })).toBeNull();
  });

  it("uses a state once even when two redirects race", async () => {
    const state = await startLinking(alice.key);
    mockSetup({
      code: "code-1301",
      token: `ghu_${"r".repeat(36)}`,
      pages: [[installationObject(1301, "racer")]],
      repos: { installationId: 1301, list: [apiRepo("racer", { id: 1311, name: "r" }, "main")] },
    });
    const query = { installation_id: "1301", setup_action: "install", code: "code-1301", state };
    const results = await Promise.all([setup(query), setup(query)]);
    expect(results.map((r) => r.status).sort()).toEqual([200, 400]);
    expect(await workspaceIds(alice.key)).toContain("gh-1301");
  });

  it("refuses to move an installation linked to another account", async () => {
    await link(alice, 1401, "taken", [apiRepo("taken", { id: 1411, name: "t" }, "main")]);
    const state = await startLinking(bob.key);
    mockSetup({
      code: "code-1401-bob",
      token: `ghu_${"m".repeat(36)}`,
      pages: [[installationObject(1401, "taken")]],
    });
    const res = await setup({
      installation_id: "1401",
      setup_action: "install",
      code: "code-1401-bob",
      state,
    });
    expect(res.status).toBe(409);
    expect(res.body.error.code).toBe("conflict");
    expect((await models().Workspace.findById("gh-1401").lean())!.account_id).toBe(alice.id);
    expect(await workspaceIds(bob.key)).not.toContain("gh-1401");
  });

  it("answers 400 for a code GitHub does not accept and 502 when GitHub fails", async () => {
    const state = await startLinking(alice.key);
    watchGithub(
      nock(WEB)
        .post("/login/oauth/access_token")
        .reply(200, { error: "bad_verification_code", error_description: "The code is wrong." }),
    );
    const bad = await setup({ installation_id: "1501", setup_action: "install", code: "x", state });
    expect(bad.status).toBe(400);
    expect(bad.body.error.details).toEqual([expect.objectContaining({ path: "code" })]);

    const second = await startLinking(alice.key);
    watchGithub(
      nock(WEB)
        .post("/login/oauth/access_token")
        .reply(200, { access_token: `ghu_${"f".repeat(36)}`, token_type: "bearer", scope: "" }),
    );
    watchGithub(
      nock(API).get("/user/installations").query(true).reply(503, { message: "Unavailable" }),
    );
    const down = await setup({
      installation_id: "1501",
      setup_action: "install",
      code: "y",
      state: second,
    });
    expect(down.status).toBe(502);
    expect(down.body.error.code).toBe("upstream_unavailable");
    expect(down.body.error.message).toContain("HTTP 503");
  });

  it("answers a browser with an HTML page", async () => {
    const state = await startLinking(alice.key);
    mockSetup({
      code: "code-1601",
      token: `ghu_${"h".repeat(36)}`,
      pages: [[installationObject(1601, "<b>html</b>")]],
      repos: { installationId: 1601, list: [] },
    });
    const res = await setup(
      { installation_id: "1601", setup_action: "install", code: "code-1601", state },
      { accept: "text/html,application/xhtml+xml,*/*;q=0.8" },
    );
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/html");
    expect(res.body).toContain("<h1>Installation linked</h1>");
    expect(res.body).toContain("gh-1601");
    expect(res.body).toContain("&lt;b&gt;html&lt;/b&gt;");
    expect(res.body).not.toContain("<b>html</b>");
  });

  it("answers an installation request awaiting an owner without linking", async () => {
    const res = await setup({ setup_action: "request" });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ linked: false, workspace_id: null });
    expect(res.body.message).toContain("owner");
    // "Redirect on update" without a linking in progress: nothing to link, nothing asked.
    const update = await setup({ installation_id: "1001", setup_action: "update" });
    expect(update.status).toBe(200);
    expect(update.body).toMatchObject({ linked: false, installation_id: 1001 });
    // An install redirect without a state is refused: linking starts with POST /workspaces/link.
    const install = await setup({ installation_id: "1001", setup_action: "install" });
    expect(install.status).toBe(400);
  });
});

describe("configuration", () => {
  it("POST /workspaces/link answers 503 naming what to set when the App cannot link", async () => {
    const partial = await startTestServer({
      env: {
        MONGODB_URI: server.service.config.mongodbUri,
        APP_ID: "4711",
        PRIVATE_KEY: testPrivateKey(),
        WEBHOOK_SECRET: SECRET,
      },
    });
    const plain = await startTestServer({ env: { MONGODB_URI: server.service.config.mongodbUri } });
    try {
      const user = await partial.signup("partial");
      const res = await partial.api("POST", "/workspaces/link", { key: user.key });
      expect(res.status).toBe(503);
      expect(res.body.error.code).toBe("upstream_unavailable");
      expect(res.body.error.message).toContain("APP_SLUG, GITHUB_CLIENT_ID, GITHUB_CLIENT_SECRET");
      const off = await plain.api("POST", "/workspaces/link", { key: user.key });
      expect(off.status).toBe(503);
      expect(off.body.error.message).toContain("APP_ID");
      const setupOff = await plain.api(
        "GET",
        "/github/setup?installation_id=1&setup_action=install&code=c&state=s",
      );
      expect(setupOff.status).toBe(503);
    } finally {
      await partial.service.stop();
      await plain.service.stop();
    }
  });

  it("links through GitHub Enterprise Server when GHE_HOST is set", async () => {
    const ghe = await startTestServer({
      env: {
        APP_ID: "4711",
        PRIVATE_KEY: testPrivateKey(),
        WEBHOOK_SECRET: SECRET,
        APP_SLUG: SLUG,
        GITHUB_CLIENT_ID: CLIENT_ID,
        GITHUB_CLIENT_SECRET: CLIENT_SECRET,
        GHE_HOST: "ghe.example.com",
      },
    });
    try {
      const user = await ghe.signup("enterprise");
      const state = await startLinking(user.key, ghe);
      const start = await ghe.api("POST", "/workspaces/link", { key: user.key });
      expect(start.body.install_url).toMatch(
        /^https:\/\/ghe\.example\.com\/apps\/foreman-test\/installations\/new\?state=/,
      );
      mockSetup({
        code: "code-ghe",
        token: `ghu_${"e".repeat(36)}`,
        pages: [[installationObject(1701, "corp")]],
        repos: {
          installationId: 1701,
          list: [
            {
              ...apiRepo("corp", { id: 1711, name: "mono" }, "main"),
              clone_url: "https://ghe.example.com/corp/mono.git",
            },
          ],
        },
        web: "https://ghe.example.com",
        api: "https://ghe.example.com/api/v3",
      });
      const res = await setup(
        { installation_id: "1701", setup_action: "install", code: "code-ghe", state },
        undefined,
        ghe,
      );
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      const list = await ghe.api("GET", "/workspaces/gh-1701/repos", { key: user.key });
      expect(list.body).toEqual([
        expect.objectContaining({
          full_name: "corp/mono",
          clone_url: "https://ghe.example.com/corp/mono.git",
          default_branch: "main",
        }),
      ]);
      // Every request went to the Enterprise host, under /api/v3 for the REST API.
      const urls = githubRequests().map((r) => r.url);
      expect(urls).toHaveLength(4);
      for (const url of urls) expect(url.startsWith("https://ghe.example.com/")).toBe(true);
      expect(urls.filter((u) => u.includes("/api/v3/"))).toHaveLength(3);
    } finally {
      await ghe.stop();
    }
  });
});

describe("default branches", () => {
  it("a repository whose default branch is not known yet is cloned at the remote's HEAD, which is recorded", async () => {
    // Installation events carry no default branch. The clone stage is the same for every
    // kind of workspace; a plain-git row stands in here because a GitHub clone URL needs a
    // real GitHub behind it.
    const fixture = await createGitRepo({ "README.md": "# lib\n" }, "trunk");
    const workers = await startTestServer({ workers: true });
    try {
      const user = await account("branches", workers);
      const now = new Date();
      await workers.service.db.models.Workspace.collection.insertOne({
        _id: "ws-unknown-branch" as never,
        kind: "git",
        account_id: user.id,
        name: "unknown branch",
        repos: [
          {
            repo_id: "repo-lib",
            name: "lib",
            full_name: "acme/lib",
            clone_url: fixture.dir,
            default_branch: null,
            private: false,
          },
        ],
        github: { suspended_at: null, deleted_at: null },
        created_at: now,
        updated_at: now,
      });
      const before = await workers.api("GET", "/workspaces/ws-unknown-branch/repos", {
        key: user.key,
      });
      expect(before.body[0].default_branch).toBeNull();
      const created = await workers.api("POST", "/tasks", {
        key: user.key,
        body: { workspace_id: "ws-unknown-branch", repo_id: "repo-lib", description: "Tidy up" },
      });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      // No model is configured: the task clones and indexes, then fails at PLANNING.
      const task = await eventually(
        async () => (await workers.api("GET", `/tasks/${created.body.id}`, { key: user.key })).body,
        (t) => t.phase === "FAILED",
      );
      expect(task.phase).toBe("FAILED");
      const events = await workers.service.db.models.TaskEvent.find({ task_id: task.id }).lean();
      const logs = events.filter((e) => e.type === "log").map((e) => e.payload.message as string);
      expect(logs).toContain("Cloning acme/lib (its default branch, shallow).");
      expect(logs).toContain("The default branch of acme/lib is trunk.");
      const stored = await workers.service.db.models.Task.findById(task.id).lean();
      expect(stored!.repo!.default_branch).toBe("trunk");
      const after = await workers.api("GET", "/workspaces/ws-unknown-branch/repos", {
        key: user.key,
      });
      expect(after.body[0].default_branch).toBe("trunk");
    } finally {
      await workers.stop();
      await fixture.remove();
    }
  });
});

describe("app.yml", () => {
  it("subscribes to the events the App handles (docs/api.md) and asks for exactly the permissions used", async () => {
    const manifest = parseYaml(
      await readFile(new URL("../../app.yml", import.meta.url), "utf8"),
    ) as Record<string, unknown>;
    // installation and installation_repositories reach every App without a subscription.
    expect(manifest.default_events).toEqual([
      "issue_comment",
      "issues",
      "pull_request",
      "pull_request_review",
      "pull_request_review_comment",
      "check_run",
      "check_suite",
      "workflow_run",
    ]);
    expect(manifest.default_permissions).toEqual({
      contents: "write",
      pull_requests: "write",
      issues: "write",
      checks: "write",
      actions: "read",
      metadata: "read",
    });
    expect(manifest).toMatchObject({
      public: false,
      request_oauth_on_install: true,
      callback_urls: ["https://foreman.example.com/github/setup"],
      setup_url: "https://foreman.example.com/github/setup",
      hook_attributes: { url: "https://foreman.example.com/github/webhooks", active: true },
    });
  });
});
