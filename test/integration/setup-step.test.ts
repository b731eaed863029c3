import { existsSync } from "node:fs";
import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentModel, type Script } from "../helpers/agent-model.js";
import {
  fakeModelEnv,
  startFakeModel,
  toolResults,
  type FakeModel,
} from "../helpers/fake-model.js";
import { createGitRepo, type GitFixture } from "../helpers/git-repo.js";
import { startTestServer, type ApiResponse, type TestServer } from "../helpers/server.js";
import { openTaskStream, type StreamEvent } from "../helpers/ws.js";

/*
 * The setup step for real (verify/setup.ts, sandbox/setup-proxy.ts): a repository that
 * declares one small dependency from the public npm registry installs it through the
 * allowlist's proxy (tinyproxy, from scripts/setup.sh) and verifies; the model's run_command
 * on the default SANDBOX_NETWORK=none reaches nothing; the second task on the repository
 * installs from its package cache without contacting the registry; a `setup:` asking for a
 * host off the list fails the task naming the host and SANDBOX_SETUP_ALLOW. Nothing here
 * skips: registry.npmjs.org is reachable from CI.
 */

const LOCK = {
  name: "uses-is-number",
  version: "1.0.0",
  lockfileVersion: 3,
  requires: true,
  packages: {
    "": { name: "uses-is-number", version: "1.0.0", dependencies: { "is-number": "7.0.0" } },
    "node_modules/is-number": {
      version: "7.0.0",
      resolved: "https://registry.npmjs.org/is-number/-/is-number-7.0.0.tgz",
      integrity:
        "sha512-41Cifkg6e8TylSpdtTpeLVMqvSBEVzTttHvERD741+pnZ8ANv0004MRL43QKPDlK9cGvNp6NZWZUBlbGXYxxng==",
      license: "MIT",
      engines: { node: ">=0.12.0" },
    },
  },
};

// Waits long enough for a heartbeat (SANDBOX_HEARTBEAT_S=1), then needs the dependency.
const TEST_JS = `const isSeven = require("./index.js");
setTimeout(() => {
  if (!isSeven(7) || isSeven("x")) process.exit(1);
  console.log("dependency ok");
}, 2500);
`;
const INDEX_JS = `const isNumber = require("is-number");
module.exports = function isSeven(value) {
  if (!isNumber(value)) return false;
  return Number(value) === 7;
};
`;

// What run_command tries: the registry, straight and through any proxy variable it is given.
const PROBE = `node -e "require('https').get('https://registry.npmjs.org/is-number', { timeout: 4000 }, () => console.log('PROBE REACHED')).on('error', (e) => console.log('PROBE ' + e.code)).on('timeout', function () { console.log('PROBE TIMEOUT'); this.destroy(); })"; echo "PROXY=[$HTTPS_PROXY$https_proxy$npm_config_https_proxy]"`;

let repo: GitFixture;
let offList: GitFixture;
let model: FakeModel;
let server: TestServer;
let key: string;
let workspaceId: string;
/**
 * This file's own DATA_DIR: the default one (foreman-test-<pid>) is shared by every file a
 * test worker runs (vitest's isolate: false), so its package cache held the entries of files
 * that ran before in the same worker (verify-by-test's vitest fixture, with a lockfile).
 */
let dataDir: string;
const probeResults: string[] = [];
/** When set, the implementation's command writes into node_modules instead of probing. */
let touchDeps = false;
const TOUCH_DEPS = "touch node_modules/is-number/index.js";
/** Each implementation writes different notes, so each follow-up has a change to push. */
let notes = 0;

const script: Script = {
  plan: () => [
    {
      name: "submit_plan",
      arguments: {
        summary: "Write notes.",
        steps: [{ title: "Notes", description: "Add notes.", files: ["NOTES.md"] }],
      },
    },
  ],
  implement: (request, turn) => {
    if (turn === 0)
      return [
        { name: "run_command", arguments: { command: touchDeps ? TOUCH_DEPS : PROBE } },
        { name: "write_file", arguments: { path: "NOTES.md", content: `# Notes ${++notes}\n` } },
      ];
    probeResults.push(
      toolResults(request)
        .map((r) => r.content)
        .join("\n"),
    );
    return [{ name: "finish", arguments: { summary: "Wrote notes." } }];
  },
  review: () => [
    { name: "submit_review", arguments: { verdict: "approve", summary: "Fine.", comments: [] } },
  ],
};

beforeAll(async () => {
  repo = await createGitRepo({
    "package.json": `${JSON.stringify(
      {
        name: "uses-is-number",
        version: "1.0.0",
        private: true,
        dependencies: { "is-number": "7.0.0" },
        scripts: { test: "node test.js" },
      },
      null,
      2,
    )}\n`,
    "package-lock.json": `${JSON.stringify(LOCK, null, 2)}\n`,
    "index.js": INDEX_JS,
    "test.js": TEST_JS,
  });
  offList = await createGitRepo({
    "README.md": "# off the list\n",
    ".github/foreman.yml": `setup:
  - name: private tool
    run: npm view left-pad version --registry=https://registry.example.org/ --fetch-retries=0
verify:
  - node -e "process.exit(0)"
`,
  });
  model = await startFakeModel(agentModel(script));
  dataDir = await mkdtemp(path.join(os.tmpdir(), "foreman-setup-step-"));
  server = await startTestServer({
    workers: true,
    env: {
      DATA_DIR: dataDir,
      ...fakeModelEnv(model, "sk-setup-step-model-key-0123456789"),
      EVENT_POLL_MS: "50",
      SANDBOX_HEARTBEAT_S: "1",
    },
  });
  ({ key } = await server.signup());
  const ws = await server.api("POST", "/workspaces", {
    key,
    body: {
      name: "setup",
      repos: [
        { name: "acme/uses-is-number", clone_url: repo.dir },
        { name: "acme/off-list", clone_url: offList.dir },
      ],
    },
  });
  expect(ws.status).toBe(201);
  workspaceId = ws.body.id;
}, 60_000);

afterAll(async () => {
  await server?.stop();
  await model?.close();
  await repo?.remove();
  await offList?.remove();
  if (dataDir) await rm(dataDir, { recursive: true, force: true }).catch(() => undefined);
});

/** The cache entry a task's setup named (12 hex digits). */
function entryKey(logs: string[]): string {
  const line = logs.find((l) => /\(entry [0-9a-f]{12}\)/.test(l));
  return /\(entry ([0-9a-f]{12})\)/.exec(line ?? "")?.[1] ?? "none";
}

async function runTask(
  repoId: string,
  parentId?: string,
): Promise<{ task: ApiResponse["body"]; logs: string[]; events: StreamEvent[] }> {
  const created = parentId
    ? await server.api("POST", `/tasks/${parentId}/follow-up`, {
        key,
        body: { description: "Add more notes", auto_approve: true },
      })
    : await server.api("POST", "/tasks", {
        key,
        body: {
          workspace_id: workspaceId,
          repo_id: repoId,
          description: "Add notes",
          auto_approve: true,
        },
      });
  expect(created.status).toBe(201);
  const stream = await openTaskStream(server.url, created.body.id, key);
  expect(await stream.closed).toBe(1000);
  const task = (await server.api("GET", `/tasks/${created.body.id}`, { key })).body;
  const logs = stream.events.filter((e) => e.event_type === "log").map((e) => String(e.message));
  return { task, logs, events: stream.events };
}

describe("the setup step", () => {
  it("installs a real dependency through the allowlist, keeps run_command offline, and reuses the cache", async () => {
    const first = await runTask("acme/uses-is-number");
    expect(first.task.error).toBeNull();
    expect(first.task).toMatchObject({ status: "completed", phase: "DONE" });
    // Installed during CLONING, before indexing and before any check.
    const setupAt = first.logs.findIndex((l) => l.startsWith("Setup: running install"));
    const indexedAt = first.logs.findIndex((l) => l.startsWith("Indexed "));
    expect(setupAt).toBeGreaterThan(-1);
    expect(setupAt).toBeLessThan(indexedAt);
    expect(first.logs).toContain("Setup: downloaded from registry.npmjs.org.");
    expect(first.logs).toContain(
      "Setup: saved the package cache for later tasks of this repository.",
    );
    // The check needs the dependency and ran offline with it.
    expect(first.logs.some((l) => /^test: `npm run test` succeeded/.test(l))).toBe(true);
    // What setup installed is never part of the change: the pushed branch has only the notes.
    expect(first.logs).toContain("Diff: 1 file changed, +1 −0.");
    const pushed = await repo.git("ls-tree", "-r", "--name-only", String(first.task.branch));
    expect(pushed.trim().split("\n").sort()).toEqual([
      "NOTES.md",
      "index.js",
      "package-lock.json",
      "package.json",
      "test.js",
    ]);
    // A heartbeat while the check ran: an ordinary log event.
    expect(first.logs.some((l) => /^still running `npm run test` \(\d+ s\)$/.test(l))).toBe(true);

    // The model's command on the default network: no route anywhere, and no proxy named.
    expect(probeResults).toHaveLength(1);
    expect(probeResults[0]).toMatch(/PROBE (EAI_AGAIN|ENOTFOUND|ENETUNREACH|EACCES|ECONNREFUSED)/);
    expect(probeResults[0]).not.toContain("PROBE REACHED");
    expect(probeResults[0]).toContain("PROXY=[]");

    const second = await runTask("acme/uses-is-number");
    expect(second.task).toMatchObject({ status: "completed", phase: "DONE" });
    // The install's node_modules came from the entry: nothing ran, no registry was asked.
    expect(second.logs).toContain(
      "Setup: no registry was contacted: node_modules restored from the package cache " +
        `(entry ${entryKey(first.logs)}) in place of \`npm ci --no-audit --no-fund\`.`,
    );
    expect(second.logs.some((l) => l.startsWith("Setup: running install"))).toBe(false);
    expect(second.logs.some((l) => /^test: `npm run test` succeeded/.test(l))).toBe(true);

    // One entry, for the lockfile's key, in the account's own folder. (A full CI run once
    // found a second one: another file's, in the DATA_DIR the worker's files shared.)
    const root = path.join(server.service.config.dataDir, "sandbox-cache");
    const accounts = await readdir(root);
    const entries: string[] = [];
    for (const account of accounts)
      for (const repoDir of await readdir(path.join(root, account)))
        for (const name of await readdir(path.join(root, account, repoDir)))
          if (/^k-[0-9a-f]{32}$/.test(name)) entries.push(`${account}/${repoDir}/${name}`);
    expect(entries, entries.join(", ")).toHaveLength(1);
    expect(entries[0]).toContain(`/k-${entryKey(first.logs)}`);
  }, 240_000);

  it("lets a follow-up take over the working copy, node_modules kept until the lockfile changes or a command writes there", async () => {
    const parent = await runTask("acme/uses-is-number");
    expect(parent.task).toMatchObject({ status: "completed", phase: "DONE" });
    const work = path.join(server.service.config.dataDir, "work");
    const parentId = String(parent.task.id);
    expect(parent.logs.some((l) => l.startsWith("Working copy kept until "))).toBe(true);
    expect(existsSync(path.join(work, `${parentId}.kept`))).toBe(true);

    const follow = await runTask("acme/uses-is-number", parentId);
    expect(follow.task.error ?? null, follow.logs.join("\n")).toBeNull();
    expect(follow.task).toMatchObject({ status: "completed", parent_task_id: parentId });
    expect(
      follow.logs.some((l) => l.startsWith(`Took over the working copy task ${parentId}`)),
    ).toBe(true);
    expect(follow.logs.some((l) => l.startsWith("Cloning "))).toBe(false);
    // The same lockfile: the installed node_modules stayed, nothing installed or copied.
    expect(follow.logs, follow.logs.join("\n")).toContain(
      "Setup: node_modules kept from the working copy taken over, set up from the same lockfiles " +
        `(entry ${entryKey(parent.logs)}); nothing installed.`,
    );
    expect(follow.logs.some((l) => /^Setup: (running install|no registry)/.test(l))).toBe(false);
    // The check needs the dependency: it is there.
    expect(follow.logs.some((l) => /^test: `npm run test` succeeded/.test(l))).toBe(true);
    expect(existsSync(path.join(work, parentId))).toBe(false);
    expect(existsSync(path.join(work, `${String(follow.task.id)}.kept`))).toBe(true);

    // Someone changes the lockfile on the branch: the next follow-up installs again.
    const branch = String(follow.task.branch);
    await repo.git("checkout", "-q", branch);
    const bumped = { ...LOCK, version: "1.0.1" };
    bumped.packages = { ...LOCK.packages, "": { ...LOCK.packages[""], version: "1.0.1" } };
    await writeFile(
      path.join(repo.dir, "package-lock.json"),
      `${JSON.stringify(bumped, null, 2)}\n`,
    );
    await repo.git("commit", "-q", "-am", "bump the version");
    await repo.git("checkout", "-q", "main");
    const again = await runTask("acme/uses-is-number", String(follow.task.id));
    expect(again.task.error ?? null, again.logs.join("\n")).toBeNull();
    expect(
      again.logs.some((l) =>
        l.startsWith(`Took over the working copy task ${String(follow.task.id)}`),
      ),
    ).toBe(true);
    expect(again.logs.some((l) => l.startsWith("Setup: node_modules kept"))).toBe(false);
    expect(again.logs.some((l) => l.startsWith("Setup: running install"))).toBe(true);
    expect(again.logs.some((l) => /^test: `npm run test` succeeded/.test(l))).toBe(true);

    // A command writes into node_modules: the next follow-up does not keep it, it restores the
    // folder a fresh copy would get.
    touchDeps = true;
    let touched: Awaited<ReturnType<typeof runTask>>;
    try {
      touched = await runTask("acme/uses-is-number", String(again.task.id));
    } finally {
      touchDeps = false;
    }
    expect(touched.task.error ?? null, touched.logs.join("\n")).toBeNull();
    expect(touched.logs.some((l) => l.includes("`touch node_modules/is-number/index.js`"))).toBe(
      true,
    );
    const after = await runTask("acme/uses-is-number", String(touched.task.id));
    expect(after.task.error ?? null, after.logs.join("\n")).toBeNull();
    expect(after.logs).toContain(
      "Setup: node_modules of the working copy taken over changed after its setup (a command wrote there), so it is set up again.",
    );
    expect(
      after.logs.some((l) =>
        l.startsWith("Setup: no registry was contacted: node_modules restored"),
      ),
    ).toBe(true);
  }, 300_000);

  it("gives health scans the same setup: coverage is measured with the dependency installed", async () => {
    const listed = await server.api("GET", `/workspaces/${workspaceId}/repos`, { key });
    const id = (listed.body as Array<{ id: string; full_name: string }>).find(
      (r) => r.full_name === "acme/uses-is-number",
    )!.id;
    const started = await server.api("POST", `/health-reports/${id}/scan`, { key });
    expect(started.status).toBe(202);
    const deadline = Date.now() + 150_000;
    let report: ApiResponse["body"];
    for (;;) {
      report = (await server.api("GET", `/health-reports/${id}/scans/${started.body.id}`, { key }))
        .body;
      if (report.status === "completed" || report.status === "failed") break;
      if (Date.now() > deadline) throw new Error(`scan still ${report.status}`);
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    expect(report.status).toBe("completed");
    const coverage = report.metrics.test_coverage;
    expect(coverage.measured).toBe(true);
    expect(coverage.details.languages[0]).toMatchObject({
      language: "javascript",
      method: "c8 around npm test",
      tests_passed: true,
    });
    // index.js: every line but the early return ran.
    expect(coverage.score).toBeGreaterThan(50);
  }, 180_000);

  it("fails a setup that asks for a host off the list, naming the host and the setting", async () => {
    const calls = model.requests.length;
    const { task, events } = await runTask("acme/off-list");
    expect(task).toMatchObject({ status: "failed", phase: "FAILED" });
    expect(task.error).toContain("`registry.example.org`");
    expect(task.error).toContain("not on SANDBOX_SETUP_ALLOW");
    expect(task.error).toContain("add it to SANDBOX_SETUP_ALLOW");
    // Before any model call: the task never got past CLONING.
    const phases = events.filter((e) => e.event_type === "phase").map((e) => e.phase);
    expect(phases).toEqual(["QUEUED", "CLONING", "FAILED"]);
    expect(model.requests.length).toBe(calls);
  }, 120_000);
});
