import { createHmac, randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  fireCiFailureAutomations,
  type CiFailure,
} from "../../src/domain/automations/automations.js";
import { findCronJobs } from "../../src/jobs/cron.js";
import { placeholderRepo } from "../helpers/git-repo.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

/*
 * Automations over HTTP: CRUD owned by the account, the incoming webhook (matching, any-of
 * arrays, nested and missing paths, signatures, disabled automations, interpolation), quota
 * refusals recorded on the automation, and the CI-failure entry point the GitHub App calls.
 * No workers run here, so the tasks created stay queued where the test can read them.
 */

let server: TestServer;

interface Account {
  key: string;
  accountId: string;
  workspaceId: string;
  repoId: string;
}

beforeAll(async () => {
  server = await startTestServer();
});

afterAll(async () => {
  await server?.stop();
});

async function account(repoName = "acme/app"): Promise<Account> {
  const { id, key } = await server.signup();
  const ws = await server.api("POST", "/workspaces", {
    key,
    body: { name: "w", repos: [{ name: repoName, clone_url: await placeholderRepo() }] },
  });
  expect(ws.status).toBe(201);
  const repos = await server.api("GET", `/workspaces/${ws.body.id}/repos`, { key });
  const apiKey = await server.service.db.models.ApiKey.findOne({ key_id: id }).lean();
  return {
    key,
    accountId: apiKey!.account_id,
    workspaceId: ws.body.id,
    repoId: repos.body[0].id,
  };
}

async function create(key: string, body: Record<string, unknown>) {
  return server.api("POST", "/automations", { key, body });
}

function deliver(payload: unknown, headers: Record<string, string> = {}) {
  return server.api("POST", "/automations/webhook", { body: payload, headers });
}

function sign(secret: string, raw: string): string {
  return `sha256=${createHmac("sha256", secret).update(raw).digest("hex")}`;
}

const db = () => server.service.db.connection.db!;

describe("automations CRUD", () => {
  it("creates a cron automation with its job, resolving the repository by full name", async () => {
    const a = await account();
    const res = await create(a.key, {
      repo_id: "acme/app",
      trigger_type: "cron",
      trigger_config: { schedule: "0  9 * * 1-5", timezone: "Europe/Berlin" },
      task_template: "Weekly dependency check ({{date}})",
      enabled: true,
    });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^auto_/),
      repo_id: a.repoId,
      workspace_id: a.workspaceId,
      trigger_type: "cron",
      trigger_config: { schedule: "0 9 * * 1-5", timezone: "Europe/Berlin" },
      task_template: "Weekly dependency check ({{date}})",
      enabled: true,
      auto_approve: false,
      last_triggered_at: null,
      last_task_id: null,
      last_refusal: null,
      next_run_at: expect.any(String),
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    expect(new Date(res.body.next_run_at).getTime()).toBeGreaterThan(Date.now());
    const jobs = await findCronJobs(db(), res.body.id);
    expect(jobs).toHaveLength(1);
    expect(jobs[0]).toMatchObject({
      repeatInterval: "0 9 * * 1-5",
      repeatTimezone: "Europe/Berlin",
    });

    const one = await server.api("GET", `/automations/${res.body.id}/`, { key: a.key });
    expect(one.status).toBe(200);
    expect(one.body).toEqual(res.body);
  });

  it("lists the account's automations newest first, and no one else's", async () => {
    const a = await account();
    const b = await account();
    const body = {
      repo_id: a.repoId,
      trigger_type: "ci_failure",
      trigger_config: {},
      task_template: "Fix CI",
      enabled: true,
    };
    const first = await create(a.key, body);
    const second = await create(a.key, { ...body, task_template: "Fix CI again" });
    expect([first.status, second.status]).toEqual([201, 201]);
    const list = await server.api("GET", "/automations", { key: a.key });
    expect(list.status).toBe(200);
    expect(list.body.map((x: { id: string }) => x.id)).toEqual([second.body.id, first.body.id]);
    const theirs = await server.api("GET", "/automations", { key: b.key });
    expect(theirs.body).toEqual([]);
    for (const [method, body_] of [
      ["GET", undefined],
      ["PATCH", { enabled: false }],
      ["DELETE", undefined],
    ] as const) {
      const res = await server.api(method, `/automations/${first.body.id}`, {
        key: b.key,
        body: body_,
      });
      expect(res.status, method).toBe(404);
      expect(res.body.error.code).toBe("not_found");
    }
    // The other account's calls changed nothing.
    const still = await server.api("GET", `/automations/${first.body.id}`, { key: a.key });
    expect(still.body.enabled).toBe(true);
  });

  it("refuses repositories that are not the account's, and ambiguous names without workspace_id", async () => {
    const a = await account();
    const b = await account();
    const body = { trigger_type: "ci_failure", trigger_config: {}, task_template: "x" };
    const foreignWs = await create(a.key, {
      ...body,
      repo_id: b.repoId,
      workspace_id: b.workspaceId,
    });
    expect(foreignWs.status).toBe(404);
    const foreignRepo = await create(a.key, { ...body, repo_id: b.repoId });
    expect(foreignRepo.status).toBe(404);
    const unknown = await create(a.key, { ...body, repo_id: "acme/nope" });
    expect(unknown.status).toBe(404);

    const second = await server.api("POST", "/workspaces", {
      key: a.key,
      body: { name: "w2", repos: [{ name: "acme/app", clone_url: await placeholderRepo() }] },
    });
    const ambiguous = await create(a.key, { ...body, repo_id: "acme/app" });
    expect(ambiguous.status).toBe(400);
    expect(ambiguous.body.error.details[0].path).toBe("body.workspace_id");
    const chosen = await create(a.key, {
      ...body,
      repo_id: "acme/app",
      workspace_id: second.body.id,
    });
    expect(chosen.status).toBe(201);
    expect(chosen.body.workspace_id).toBe(second.body.id);
    expect((await server.api("GET", "/automations", { key: a.key })).body).toHaveLength(1);
  });

  it("validates bodies strictly (400 with the failing field)", async () => {
    const a = await account();
    const base = {
      repo_id: a.repoId,
      trigger_type: "cron",
      trigger_config: { schedule: "*/5 * * * *" },
      task_template: "t",
      enabled: true,
    };
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ ...base, trigger_config: { schedule: "61 * * * *" } }, "body.trigger_config.schedule"],
      [{ ...base, trigger_config: { schedule: "* * * * * *" } }, "body.trigger_config.schedule"],
      [{ ...base, trigger_config: { schedule: "@daily" } }, "body.trigger_config.schedule"],
      [
        { ...base, trigger_config: { schedule: "0 9 * * *", timezone: "Mars/Olympus" } },
        "body.trigger_config.timezone",
      ],
      [{ ...base, trigger_config: {} }, "body.trigger_config.schedule"],
      [{ ...base, trigger_type: "hourly" }, "body.trigger_type"],
      [{ ...base, task_template: "   " }, "body.task_template"],
      [{ ...base, task_template: "x".repeat(10_001) }, "body.task_template"],
      [{ ...base, surprise: 1 }, "body"],
      [
        { ...base, trigger_type: "webhook", trigger_config: { match: { "a..b": 1 } } },
        "body.trigger_config.match.a..b",
      ],
      [
        { ...base, trigger_type: "webhook", trigger_config: { secret: "********" } },
        "body.trigger_config.secret",
      ],
      [
        { ...base, trigger_type: "webhook", trigger_config: { schedule: "* * * * *" } },
        "body.trigger_config",
      ],
      [
        { ...base, trigger_type: "ci_failure", trigger_config: { workflow: "" } },
        "body.trigger_config.workflow",
      ],
    ];
    for (const [body, path] of cases) {
      const res = await create(a.key, body);
      expect(res.status, JSON.stringify(body).slice(0, 120)).toBe(400);
      expect(res.body.error.code).toBe("validation_failed");
      expect(
        res.body.error.details.map((d: { path: string }) => d.path),
        JSON.stringify(body).slice(0, 120),
      ).toContain(path);
    }
    expect((await server.api("GET", "/automations", { key: a.key })).body).toEqual([]);
  });

  it("PATCH changes only the given fields, validates the result as a whole and keeps the job in step", async () => {
    const a = await account();
    const created = await create(a.key, {
      repo_id: a.repoId,
      trigger_type: "cron",
      trigger_config: { schedule: "*/5 * * * *" },
      task_template: "Tidy up",
      enabled: true,
    });
    const id = created.body.id;
    const path = `/automations/${id}`;

    const disabled = await server.api("PATCH", path, { key: a.key, body: { enabled: false } });
    expect(disabled.status).toBe(200);
    expect(disabled.body).toMatchObject({
      enabled: false,
      task_template: "Tidy up",
      trigger_config: { schedule: "*/5 * * * *", timezone: "UTC" },
      next_run_at: null,
    });
    expect(await findCronJobs(db(), id)).toHaveLength(0);

    const enabled = await server.api("PATCH", path, { key: a.key, body: { enabled: true } });
    expect(enabled.body.enabled).toBe(true);
    expect(await findCronJobs(db(), id)).toHaveLength(1);

    const moved = await server.api("PATCH", path, {
      key: a.key,
      body: { trigger_config: { schedule: "30 6 * * *", timezone: "Asia/Tokyo" } },
    });
    expect(moved.status).toBe(200);
    expect(moved.body.trigger_config).toEqual({ schedule: "30 6 * * *", timezone: "Asia/Tokyo" });
    const jobs = await findCronJobs(db(), id);
    expect(jobs).toHaveLength(1);
    expect(jobs[0]).toMatchObject({ repeatInterval: "30 6 * * *", repeatTimezone: "Asia/Tokyo" });

    const template = await server.api("PATCH", path, {
      key: a.key,
      body: { task_template: "Tidy up {{date}}", auto_approve: true },
    });
    expect(template.body).toMatchObject({
      task_template: "Tidy up {{date}}",
      auto_approve: true,
      trigger_config: { schedule: "30 6 * * *", timezone: "Asia/Tokyo" },
    });

    // A new trigger type with the old (cron) configuration is not a valid automation.
    const half = await server.api("PATCH", path, { key: a.key, body: { trigger_type: "webhook" } });
    expect(half.status).toBe(400);
    const badSchedule = await server.api("PATCH", path, {
      key: a.key,
      body: { trigger_config: { schedule: "0 0 31 2 *" } },
    });
    expect(badSchedule.status).toBe(400);
    expect(badSchedule.body.error.details[0].path).toBe("body.trigger_config.schedule");
    const unknownField = await server.api("PATCH", path, { key: a.key, body: { name: "x" } });
    expect(unknownField.status).toBe(400);
    const foreignRepo = await server.api("PATCH", path, {
      key: a.key,
      body: { repo_id: "other/repo" },
    });
    expect(foreignRepo.status).toBe(404);
    // None of the refused PATCHes changed anything.
    const unchanged = await server.api("GET", path, { key: a.key });
    expect(unchanged.body).toMatchObject({
      trigger_type: "cron",
      trigger_config: { schedule: "30 6 * * *", timezone: "Asia/Tokyo" },
      repo_id: a.repoId,
    });

    const webhook = await server.api("PATCH", path, {
      key: a.key,
      body: { trigger_type: "webhook", trigger_config: { match: { never: id } } },
    });
    expect(webhook.status).toBe(200);
    expect(webhook.body.trigger_config).toEqual({ match: { never: id } });
    expect(await findCronJobs(db(), id)).toHaveLength(0);

    expect(
      (await server.api("PATCH", "/automations/auto_nope", { key: a.key, body: {} })).status,
    ).toBe(404);
  });

  it("DELETE answers 204, removes the automation and its job, then 404", async () => {
    const a = await account();
    const created = await create(a.key, {
      repo_id: a.repoId,
      trigger_type: "cron",
      trigger_config: { schedule: "* * * * *" },
      task_template: "x",
      enabled: true,
    });
    expect(await findCronJobs(db(), created.body.id)).toHaveLength(1);
    const del = await server.api("DELETE", `/automations/${created.body.id}`, { key: a.key });
    expect(del.status).toBe(204);
    expect(del.body).toBeUndefined();
    expect(await findCronJobs(db(), created.body.id)).toHaveLength(0);
    expect(
      (await server.api("GET", `/automations/${created.body.id}`, { key: a.key })).status,
    ).toBe(404);
    expect(
      (await server.api("DELETE", `/automations/${created.body.id}`, { key: a.key })).status,
    ).toBe(404);
  });

  it("needs a key everywhere but on the webhook", async () => {
    for (const [method, path] of [
      ["GET", "/automations"],
      ["POST", "/automations"],
      ["GET", "/automations/auto_x"],
      ["PATCH", "/automations/auto_x"],
      ["DELETE", "/automations/auto_x"],
    ] as const) {
      const res = await server.api(method, path, {
        body: method === "POST" || method === "PATCH" ? { enabled: true } : undefined,
      });
      expect(res.status, `${method} ${path}`).toBe(401);
    }
    expect((await deliver({ nothing: "here" })).status).toBe(200);
  });
});

describe("POST /automations/webhook", () => {
  let a: Account;
  const run = randomUUID();

  beforeAll(async () => {
    a = await account();
  });

  async function webhook(
    config: Record<string, unknown>,
    template: string,
    extra: Record<string, unknown> = {},
  ): Promise<string> {
    const res = await create(a.key, {
      repo_id: a.repoId,
      trigger_type: "webhook",
      trigger_config: config,
      task_template: template,
      enabled: true,
      ...extra,
    });
    expect(res.status).toBe(201);
    return res.body.id;
  }

  it("fires a matching automation with the payload interpolated as text, and nothing for a mismatch", async () => {
    const id = await webhook(
      { match: { run, kind: "pr", action: "opened", "pull_request.base.ref": "main" } },
      "Review PR #{{payload.number}} by {{ payload.pull_request.user.login }}: {{payload.pull_request.title}} [{{payload.pull_request.labels}}] ({{payload.nope.deeper}})",
    );
    const payload = {
      run,
      kind: "pr",
      action: "opened",
      number: 42,
      pull_request: {
        base: { ref: "main" },
        user: { login: "octocat" },
        title: "Use {{payload.run}} and ${process.env.HOME}",
        labels: ["bug", "ui"],
      },
    };
    const res = await deliver(payload);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ matched: 1, tasks_created: [expect.stringMatching(/^task_/)] });
    const taskId = res.body.tasks_created[0];
    const task = await server.api("GET", `/tasks/${taskId}`, { key: a.key });
    expect(task.status).toBe(200);
    expect(task.body.description).toBe(
      'Review PR #42 by octocat: Use {{payload.run}} and ${process.env.HOME} [["bug","ui"]] ()',
    );
    expect(task.body).toMatchObject({ repo_id: a.repoId, workspace_id: a.workspaceId });
    const stored = await server.service.db.models.Task.collection.findOne({ _id: taskId as never });
    expect(stored).toMatchObject({
      source: "automation",
      origin: { automation_id: id, trigger: "webhook" },
    });
    const automation = await server.api("GET", `/automations/${id}`, { key: a.key });
    expect(automation.body.last_task_id).toBe(taskId);
    expect(Date.now() - Date.parse(automation.body.last_triggered_at)).toBeLessThan(60_000);

    for (const miss of [
      { ...payload, action: "closed" },
      { ...payload, pull_request: { ...payload.pull_request, base: { ref: "dev" } } },
      { run, kind: "pr", action: "opened", number: 42 }, // the nested path is missing
      { ...payload, run: "another run" },
    ]) {
      expect((await deliver(miss)).body).toEqual({ matched: 0, tasks_created: [] });
    }
    const tasks = await server.api("GET", "/tasks", { key: a.key });
    expect(tasks.body.map((t: { id: string }) => t.id)).toEqual([taskId]);
  });

  it("takes an array in match as any of its values", async () => {
    await webhook(
      { match: { run, kind: "label", action: ["labeled", "unlabeled"] } },
      "Label {{payload.action}}",
    );
    expect((await deliver({ run, kind: "label", action: "labeled" })).body.matched).toBe(1);
    expect((await deliver({ run, kind: "label", action: "unlabeled" })).body.matched).toBe(1);
    expect((await deliver({ run, kind: "label", action: "edited" })).body).toEqual({
      matched: 0,
      tasks_created: [],
    });
  });

  it("matches a signed payload only with the right HMAC of the raw body", async () => {
    const secret = "s3cret-signing-key";
    const id = await webhook({ match: { run, kind: "deploy" }, secret }, "Deploy {{payload.env}}");
    const shown = await server.api("GET", `/automations/${id}`, { key: a.key });
    expect(shown.body.trigger_config).toEqual({
      match: { run, kind: "deploy" },
      secret: "********",
    });
    expect(JSON.stringify(shown.body)).not.toContain(secret);

    // Spacing the signature covers: the raw body is signed, not a re-serialisation.
    const raw = `{ "run": "${run}",  "kind": "deploy", "env": "prod" }`;
    const post = (headers: Record<string, string>, body = raw) =>
      server.api("POST", "/automations/webhook", {
        raw: body,
        headers: { "content-type": "application/json", ...headers },
      });
    const good = await post({ "x-hub-signature-256": sign(secret, raw) });
    expect(good.body).toEqual({ matched: 1, tasks_created: [expect.any(String)] });
    const task = await server.api("GET", `/tasks/${good.body.tasks_created[0]}`, { key: a.key });
    expect(task.body.description).toBe("Deploy prod");

    const badHeaders: Array<Record<string, string>> = [
      {},
      { "x-hub-signature-256": sign("wrong-secret-value", raw) },
      { "x-hub-signature-256": sign(secret, raw.replace("prod", "dev")) },
      { "x-hub-signature-256": sign(secret, raw).slice(0, 40) },
      { "x-hub-signature-256": "sha256=zz" },
    ];
    for (const headers of badHeaders) {
      expect((await post(headers)).body).toEqual({ matched: 0, tasks_created: [] });
    }
    // Sending the placeholder back keeps the secret.
    const patched = await server.api("PATCH", `/automations/${id}`, {
      key: a.key,
      body: { trigger_config: { match: { run, kind: "deploy" }, secret: "********" } },
    });
    expect(patched.status).toBe(200);
    expect((await post({})).body.matched).toBe(0);
    expect((await post({ "x-hub-signature-256": sign(secret, raw) })).body.matched).toBe(1);
  });

  it("does not fire a disabled automation, and fires it once enabled", async () => {
    const id = await webhook({ match: { run, kind: "toggle" } }, "Toggle", { enabled: false });
    expect((await deliver({ run, kind: "toggle" })).body).toEqual({
      matched: 0,
      tasks_created: [],
    });
    await server.api("PATCH", `/automations/${id}`, { key: a.key, body: { enabled: true } });
    expect((await deliver({ run, kind: "toggle" })).body.matched).toBe(1);
    await server.api("PATCH", `/automations/${id}`, { key: a.key, body: { enabled: false } });
    expect((await deliver({ run, kind: "toggle" })).body.matched).toBe(0);
  });

  it("fires the automations of every account that match, each on its owner's account", async () => {
    const b = await account();
    await webhook({ match: { run, kind: "shared" } }, "Ours {{payload.n}}");
    const theirs = await create(b.key, {
      repo_id: b.repoId,
      trigger_type: "webhook",
      trigger_config: { match: { kind: "shared", run } },
      task_template: "Theirs {{payload.n}}",
      enabled: true,
    });
    expect(theirs.status).toBe(201);
    const res = await deliver({ run, kind: "shared", n: 3 });
    expect(res.body.matched).toBe(2);
    expect(res.body.tasks_created).toHaveLength(2);
    const bTasks = await server.api("GET", "/tasks", { key: b.key });
    expect(bTasks.body.map((t: { description: string }) => t.description)).toEqual(["Theirs 3"]);
    expect(res.body.tasks_created).toContain(bTasks.body[0].id);
  });

  it("matches every payload with an empty match", async () => {
    const id = await webhook({}, "Anything: {{payload}}");
    try {
      const res = await deliver({ whatever: [1, 2] });
      expect(res.body.matched).toBe(1);
      const task = await server.api("GET", `/tasks/${res.body.tasks_created[0]}`, { key: a.key });
      expect(task.body.description).toBe('Anything: {"whatever":[1,2]}');
    } finally {
      await server.api("DELETE", `/automations/${id}`, { key: a.key });
    }
    expect((await deliver({ whatever: [1, 2] })).body.matched).toBe(0);
  });

  it("answers 400 to invalid JSON and 413 to a body over 1 MiB, and takes $ keys in payloads", async () => {
    const bad = await server.api("POST", "/automations/webhook", {
      raw: "{not json",
      headers: { "content-type": "application/json" },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe("invalid_json");
    const big = await deliver({ run, blob: "x".repeat(1024 * 1024) });
    expect(big.status).toBe(413);
    expect(big.body.error.code).toBe("payload_too_large");
    const dollar = await deliver({ run, kind: "none", $set: { a: 1 } });
    expect(dollar.status).toBe(200);
    expect(dollar.body).toEqual({ matched: 0, tasks_created: [] });
  });
});

describe("quota refusals", () => {
  it("records the refusal on the automation and creates no task", async () => {
    const q = await account();
    for (let i = 0; i < 10; i += 1) {
      const t = await server.api("POST", "/tasks", {
        key: q.key,
        body: { workspace_id: q.workspaceId, repo_id: q.repoId, description: `task ${i}` },
      });
      expect(t.status).toBe(201);
    }
    const run = randomUUID();
    const created = await create(q.key, {
      repo_id: q.repoId,
      trigger_type: "webhook",
      trigger_config: { match: { run } },
      task_template: "Over the limit",
      enabled: true,
    });
    const res = await deliver({ run });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ matched: 1, tasks_created: [] });
    const automation = await server.api("GET", `/automations/${created.body.id}`, { key: q.key });
    expect(automation.body).toMatchObject({
      last_task_id: null,
      last_triggered_at: null,
      last_refusal: {
        at: expect.any(String),
        code: "monthly_limit_reached",
        reason: expect.stringContaining("10 tasks"),
      },
    });
    const tasks = await server.api("GET", "/tasks?limit=200", { key: q.key });
    expect(tasks.body).toHaveLength(10);
    expect(
      tasks.body.some((t: { description: string }) => t.description === "Over the limit"),
    ).toBe(false);
    const me = await server.api("GET", "/keys/me", { key: q.key });
    expect(me.body.tasks_this_month).toBe(10);
  });
});

describe("CI failures (fireCiFailureAutomations)", () => {
  function failure(a: Account, check: Partial<CiFailure["check"]> = {}): CiFailure {
    return {
      account_id: a.accountId,
      workspace_id: a.workspaceId,
      repo_id: a.repoId,
      check: {
        name: "build",
        conclusion: "failure",
        head_branch: "main",
        head_sha: "0123456789abcdef0123456789abcdef01234567",
        details_url: "https://github.com/acme/app/actions/runs/1",
        summary: "2 tests failed",
        workflow: "CI / test",
        ...check,
      },
    };
  }

  it("fires the enabled automations whose workflow and branch globs match", async () => {
    const a = await account();
    const body = { repo_id: a.repoId, trigger_type: "ci_failure", enabled: true };
    const onMain = await create(a.key, {
      ...body,
      trigger_config: { workflow: "CI*", branch: "main" },
      task_template:
        "Fix {{check.name}} ({{check.conclusion}}) on {{check.head_branch}} at {{check.head_sha}}: {{check.summary}} — {{check.details_url}}",
      auto_approve: true,
    });
    const onRelease = await create(a.key, {
      ...body,
      trigger_config: { branch: "release/*" },
      task_template: "Release fix for {{check.name}}",
    });
    await create(a.key, {
      ...body,
      enabled: false,
      trigger_config: {},
      task_template: "Disabled",
    });
    const deps = server.service.pipeline.taskDeps;

    const main = await fireCiFailureAutomations(deps, failure(a), { base_branch: "main" });
    expect(main.matched).toBe(1);
    expect(main.tasks_created).toHaveLength(1);
    const task = await server.api("GET", `/tasks/${main.tasks_created[0]}`, { key: a.key });
    expect(task.body).toMatchObject({
      description:
        "Fix build (failure) on main at 0123456789abcdef0123456789abcdef01234567: 2 tests failed — https://github.com/acme/app/actions/runs/1",
      auto_approve: true,
    });
    const stored = await server.service.db.models.Task.collection.findOne({
      _id: main.tasks_created[0] as never,
    });
    expect(stored).toMatchObject({
      source: "automation",
      base_branch: "main",
      origin: { automation_id: onMain.body.id, trigger: "ci_failure" },
    });

    const release = await fireCiFailureAutomations(
      deps,
      failure(a, { head_branch: "release/1.4", workflow: null, name: "lint" }),
    );
    expect(release.matched).toBe(1);
    const releaseTask = await server.api("GET", `/tasks/${release.tasks_created[0]}`, {
      key: a.key,
    });
    expect(releaseTask.body.description).toBe("Release fix for lint");
    expect(
      (await server.api("GET", `/automations/${onRelease.body.id}`, { key: a.key })).body
        .last_task_id,
    ).toBe(release.tasks_created[0]);

    // Neither glob pair matches: a feature branch of another workflow.
    const none = await fireCiFailureAutomations(
      deps,
      failure(a, { head_branch: "feature/x", workflow: "Lint" }),
    );
    expect(none).toEqual({ matched: 0, tasks_created: [] });
    // Another account naming this repository fires nothing of this account's.
    const other = await account();
    const foreign = await fireCiFailureAutomations(deps, {
      ...failure(a),
      account_id: other.accountId,
    });
    expect(foreign).toEqual({ matched: 0, tasks_created: [] });
    expect((await server.api("GET", "/tasks", { key: a.key })).body).toHaveLength(2);
  });
});

describe("webhook rate limit", () => {
  it("answers 429 rate_limited with Retry-After past the limit per address", async () => {
    const limited = await startTestServer({
      env: { AUTOMATION_WEBHOOK_RATE_LIMIT: "2", AUTOMATION_WEBHOOK_RATE_WINDOW_S: "60" },
    });
    try {
      const post = () => limited.api("POST", "/automations/webhook", { body: { x: 1 } });
      expect((await post()).status).toBe(200);
      expect((await post()).status).toBe(200);
      const third = await post();
      expect(third.status).toBe(429);
      expect(third.body.error.code).toBe("rate_limited");
      expect(Number(third.headers.get("retry-after"))).toBeGreaterThan(0);
    } finally {
      await limited.stop();
    }
  });
});
