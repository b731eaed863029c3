import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { cp, mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it, inject } from "vitest";
import { runGit } from "../../src/util/git.js";
import { agentModel, type Script } from "../helpers/agent-model.js";
import { fakeModelEnv, startFakeModel, type FakeModel } from "../helpers/fake-model.js";
import { createGitRepo, type GitFixture } from "../helpers/git-repo.js";
import { testPrivateKey } from "../helpers/github.js";
import {
  hostileRepoFiles,
  PLANTED_HOOKS,
  type Attempt,
  type HostileTargets,
} from "../helpers/hostile-repo.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { openTaskStream } from "../helpers/ws.js";

/*
 * Issue 14's escapes, tried by a repository's own test on the real service: through a real
 * task (its verification runs the test) and a real health scan (its coverage run does). The
 * script records each attempt; every one must fail, and the host is checked from outside
 * too: no canary secret anywhere the script could write, no marker outside the working copy,
 * no connection on the test's listener, no process left behind, and no planted hook, filter
 * or fsmonitor run by the service's own git afterwards. The sandbox is bubblewrap, for real,
 * with SANDBOX_NETWORK=public: the mode with a network is the one where keeping the host's
 * loopback, its addresses and the private ranges out takes rules (sandbox/network.ts);
 * the default `none` has no interface but loopback (test/unit/sandbox-network.test.ts).
 */

const SERVICE_ROOT = path.resolve(fileURLToPath(new URL("../..", import.meta.url)));
const CANARY = `sk-canary-${randomBytes(12).toString("hex")}`;
const WEBHOOK_CANARY = `whsec-canary-${randomBytes(12).toString("hex")}`;
const PLANTED = `planted-${randomBytes(4).toString("hex")}.txt`;
const TOKEN = `hostile-leftover-${randomBytes(6).toString("hex")}`;

let dataDir: string;
let hookMarkerDir: string;
let targets: HostileTargets;
let repo: GitFixture;
let model: FakeModel;
let server: TestServer;
let key: string;
let workspaceId: string;
let repoId: string;
let decoy: ChildProcess;
let listener: net.Server;
let listenerConnections = 0;

const script: Script = {
  plan: () => [
    {
      name: "submit_plan",
      arguments: {
        summary: "Add notes.",
        steps: [{ title: "Notes", description: "Add notes.", files: ["NOTES.md"] }],
      },
    },
  ],
  implement: (_request, n) =>
    n > 0
      ? [{ name: "finish", arguments: { summary: "Wrote the notes." } }]
      : [{ name: "write_file", arguments: { path: "NOTES.md", content: "# Notes\n" } }],
  fix: () => [{ name: "finish", arguments: { summary: "Nothing to fix." } }],
  review: () => [
    {
      name: "submit_review",
      arguments: { verdict: "approve", summary: "Fine.", comments: [] },
    },
  ],
};

/** What the attack recorded in one checkout: its attempts and what it took. */
interface Recorded {
  dir: string;
  attempts: Attempt[];
  loot: string;
}

async function readRecorded(dir: string): Promise<Recorded> {
  const attempts = JSON.parse(await readFile(path.join(dir, "attempts.json"), "utf8")) as Attempt[];
  return { dir, attempts, loot: await readFile(path.join(dir, "loot.txt"), "utf8") };
}

/**
 * Waits for the attack's record in the working copy under `root`. The base commit's checks
 * run the same attack beside planning, in a checkout inside the working copy's `.git`: each
 * such record is kept in `bases` and released at once (its run would hold the task's
 * verification until it ends), the working copy's is returned unreleased.
 */
async function waitForRecord(root: string, bases: Recorded[], ms = 90_000): Promise<Recorded> {
  const deadline = Date.now() + ms;
  for (;;) {
    const entries = await readdir(root, { recursive: true }).catch(() => [] as string[]);
    for (const entry of entries.filter((e) => path.basename(e) === "attempts.json")) {
      const dir = path.dirname(path.join(root, entry));
      if (!entry.split(path.sep).includes(".git")) return readRecorded(dir);
      if (bases.some((b) => b.dir === dir)) continue;
      bases.push(await readRecorded(dir));
      await writeFile(path.join(dir, "release"), "go");
    }
    if (Date.now() > deadline) throw new Error(`no attempts.json under ${root} within ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * Reads what the hostile test recorded in its working copy and copies that working copy as
 * the attack left it (the service deletes its own afterwards), then lets the test finish.
 */
async function collect(
  area: string,
): Promise<{ attempts: Attempt[]; loot: string; snapshot: string; bases: Recorded[] }> {
  const bases: Recorded[] = [];
  const { dir, attempts, loot } = await waitForRecord(path.join(dataDir, area), bases);
  const snapshot = path.join(hookMarkerDir, "..", `${path.basename(hookMarkerDir)}-snapshot`);
  // Without the base commit's checkout in .git (and its worktree record): the base's run
  // removes it when it ends, which may be while this copies it (ENOENT mid-copy, seen once
  // in a full CI run). The attack's working copy is what the test looks at.
  const baseCheckout = /[\\/]\.git[\\/](foreman-base-|worktrees[\\/]foreman-base-)/;
  await cp(dir, snapshot, {
    recursive: true,
    filter: (source) => !baseCheckout.test(source),
  });
  // Content in the file the script made (helpers/hostile-repo.ts says why not a new file).
  await writeFile(path.join(dir, "release"), "go");
  return { attempts, loot, snapshot, bases };
}

async function hostProcesses(token: string): Promise<number[]> {
  const found: number[] = [];
  for (const entry of await readdir("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const cmdline = await readFile(`/proc/${entry}/cmdline`, "utf8").catch(() => "");
    const status = await readFile(`/proc/${entry}/status`, "utf8").catch(() => "");
    if (cmdline.includes(token) && !/^State:\s+Z/m.test(status)) found.push(Number(entry));
  }
  return found;
}

async function exists(file: string): Promise<boolean> {
  return stat(file).then(
    () => true,
    () => false,
  );
}

/** The checks common to both runs. */
async function expectContained(attempts: Attempt[], loot: string): Promise<void> {
  const names = attempts.map((a) => a.name);
  // Every kind of attempt was made (a script that broke early would prove nothing).
  for (const expected of [
    "read /proc/*/environ",
    "list DATA_DIR",
    "read a file in DATA_DIR",
    "read the service checkout",
    "connect service on 127.0.0.1",
    "connect database", // on 127.0.0.1 for a TCP server, by its socket path for the embedded one
    "connect listener on 127.0.0.1",
    "leave processes behind",
    "plant hook pre-commit",
    "append fsmonitor/filter/hooksPath to .git/config",
    "git config core.fsmonitor",
    "write .git/info/attributes",
    "replace .git",
  ])
    expect(names.some((n) => n.startsWith(expected))).toBe(true);
  expect(names).not.toContain("script");

  // Writes "outside" may land in the sandbox's own private /tmp (DATA_DIR is in the host's
  // temp folder here): what counts is that nothing appeared on the host.
  for (const marker of targets.outsideMarkers) expect(await exists(marker)).toBe(false);
  const escaped = attempts.filter((a) => a.escaped && !a.name.startsWith("write /"));
  expect(escaped).toEqual([]);

  for (const a of attempts.filter((a) => a.name.startsWith("connect ")))
    // ENOENT: the database's socket folder does not exist inside the sandbox.
    expect(a.detail).toMatch(/^(ECONNREFUSED|EACCES|ENETUNREACH|EHOSTUNREACH|ENOENT|timeout)$/);
  // The host's own addresses, its gateway and the metadata address are refused by the public
  // network's rules at once (the sandbox has a route to them, so nothing else would stop them).
  const viaRules = attempts.filter(
    (a) => a.name.startsWith("connect service on ") && !a.name.includes(" on 127.0.0.1:"),
  );
  expect(viaRules.map((a) => a.name)).toContain("connect service on 169.254.169.254");
  for (const a of viaRules) expect(a.detail, a.name).toBe("EACCES");
  expect(listenerConnections).toBe(0);

  expect(loot).not.toContain(CANARY);
  expect(loot).not.toContain(WEBHOOK_CANARY);
  expect(loot).not.toContain("FOREMAN_CANARY");

  // The processes it left behind died with the command (a bound, not a wait: on a loaded
  // 2-core machine the kill and the reaping can outlast the 5 s allowed before).
  const deadline = Date.now() + 30_000;
  while ((await hostProcesses(TOKEN)).length > 0 && Date.now() < deadline)
    await new Promise((resolve) => setTimeout(resolve, 100));
  expect(await hostProcesses(TOKEN)).toEqual([]);

  expect(await readdir(hookMarkerDir)).toEqual([]);
}

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(os.tmpdir(), "foreman-hostile-data-"));
  hookMarkerDir = await mkdtemp(path.join(os.tmpdir(), "foreman-hostile-hooks-"));
  await writeFile(path.join(dataDir, PLANTED), `another account's secret ${CANARY}\n`);
  await mkdir(path.join(dataDir, "work", "acct_other", "ws_other"), { recursive: true });
  await writeFile(path.join(dataDir, "work", "acct_other", "ws_other", PLANTED), CANARY);

  // A process holding the canary in its environment, as the service holds its keys.
  decoy = spawn("sleep", ["600"], {
    env: { PATH: process.env.PATH, FOREMAN_CANARY: CANARY, LLM_API_KEY: CANARY },
    stdio: "ignore",
  });
  process.env.FOREMAN_CANARY = CANARY;

  listener = net.createServer((socket) => {
    listenerConnections++;
    socket.end(`${CANARY}\n`);
  });
  await new Promise<void>((resolve) => listener.listen(0, "127.0.0.1", resolve));

  model = await startFakeModel(agentModel(script));
  server = await startTestServer({
    workers: true,
    env: {
      ...fakeModelEnv(model, CANARY),
      DATA_DIR: dataDir,
      EVENT_POLL_MS: "50",
      COMMAND_TIMEOUT_S: "120",
      MAX_FIX_ATTEMPTS: "1",
      APP_ID: "4242",
      PRIVATE_KEY: testPrivateKey(),
      WEBHOOK_SECRET: WEBHOOK_CANARY,
      SANDBOX_NETWORK: "public",
      // Nothing of the scan may leave the machine; registries answer "refused".
      NPM_REGISTRY_URL: "http://127.0.0.1:9",
      PYPI_URL: "http://127.0.0.1:9",
      GOPROXY_URL: "http://127.0.0.1:9",
      OSV_URL: "http://127.0.0.1:9",
    },
  });
  // The embedded database listens on a Unix socket only (db/embedded.ts); a TCP server
  // named by TEST_MONGODB_URI has a port instead. Both are tried.
  const dbUri = inject("mongoUri");
  const dbHost = decodeURIComponent(/^mongodb:\/\/(?:[^@/]*@)?([^/?]+)/.exec(dbUri)?.[1] ?? "");
  const dbSocket = dbHost.startsWith("/") ? dbHost : null;
  const dbPort = dbSocket ? null : Number(dbHost.split(":").pop());
  const hostAddresses = Object.values(os.networkInterfaces())
    .flat()
    .filter((a) => a && !a.internal && a.family === "IPv4")
    .map((a) => a!.address);
  // The host through slirp4netns's gateway, and the cloud metadata address.
  hostAddresses.push("10.0.2.2", "169.254.169.254");
  const unique = randomBytes(4).toString("hex");
  targets = {
    ports: {
      service: Number(new URL(server.url).port),
      ...(dbPort ? { database: dbPort } : {}),
      listener: (listener.address() as net.AddressInfo).port,
    },
    sockets: dbSocket ? [dbSocket] : [],
    hostAddresses,
    dataDir,
    plantedName: PLANTED,
    serviceRoot: SERVICE_ROOT,
    outsideMarkers: [
      path.join(dataDir, `escaped-${unique}`),
      path.join(SERVICE_ROOT, `escaped-${unique}`),
      path.join(os.homedir(), `foreman-escaped-${unique}`),
      path.join(hookMarkerDir, "written-directly"),
    ],
    hookMarkerDir,
    token: TOKEN,
  };
  repo = await createGitRepo(hostileRepoFiles(targets));
  ({ key } = await server.signup());
  const ws = await server.api("POST", "/workspaces", {
    key,
    body: { name: "hostile", repos: [{ name: "acme/hostile", clone_url: repo.dir }] },
  });
  expect(ws.status).toBe(201);
  workspaceId = ws.body.id;
  repoId = ws.body.repos[0].id;
}, 60_000);

afterAll(async () => {
  delete process.env.FOREMAN_CANARY;
  decoy?.kill("SIGKILL");
  await server?.stop();
  await model?.close();
  await repo?.remove();
  await new Promise((resolve) => listener?.close(resolve));
  await rm(dataDir, { recursive: true, force: true });
  await rm(hookMarkerDir, { recursive: true, force: true });
});

describe("a hostile repository", () => {
  it("escapes nothing through a task's verification, and its plants never run", async () => {
    const created = await server.api("POST", "/tasks", {
      key,
      body: {
        workspace_id: workspaceId,
        repo_id: "acme/hostile",
        description: "Add notes",
        auto_approve: true,
      },
    });
    expect(created.status).toBe(201);
    const stream = await openTaskStream(server.url, created.body.id, key);
    const { attempts, loot, snapshot, bases } = await collect("work");
    expect(await stream.closed).toBe(1000);
    const task = (await server.api("GET", `/tasks/${created.body.id}`, { key })).body;
    // Verification passed (the attack "test" passes), so the service went on to its own
    // git add, commit and push in the working copy the script tried to poison.
    expect(task, String(task.error)).toMatchObject({ status: "completed", phase: "DONE" });
    expect(task.branch).toBeTruthy();
    await expectContained(attempts, loot);
    // The base commit's run of the same checks (beside planning) was held to the same walls.
    expect(bases.length).toBeGreaterThan(0);
    for (const base of bases) await expectContained(base.attempts, base.loot);

    // The service's git once more, in the working copy as the attack left it: still nothing
    // planted runs, and nothing was planted.
    await writeFile(path.join(snapshot, "more.txt"), "x\n");
    await runGit(["status"], { cwd: snapshot });
    await runGit(["add", "-A"], { cwd: snapshot });
    await runGit(["-c", "user.email=t@e", "-c", "user.name=t", "commit", "-qm", "more"], {
      cwd: snapshot,
    });
    await runGit(["diff", "HEAD~1"], { cwd: snapshot });
    await runGit(["checkout", "-q", "-b", "again"], { cwd: snapshot });
    expect(await readdir(hookMarkerDir)).toEqual([]);
    const config = await readFile(path.join(snapshot, ".git", "config"), "utf8");
    expect(config).not.toMatch(/fsmonitor|filter|hooksPath/);
    // The service's git removes .git/hooks altogether (util/git.ts sanitizeGitDir).
    const hooks = await readdir(path.join(snapshot, ".git", "hooks")).catch(() => [] as string[]);
    for (const hook of PLANTED_HOOKS) expect(hooks).not.toContain(hook);
    await expect(stat(path.join(snapshot, ".git", "info", "attributes"))).rejects.toThrow(/ENOENT/);
    await rm(snapshot, { recursive: true, force: true });

    // The canary is nowhere the script could have put it: the pushed branch, the diff, the
    // task's events, the model's prompts.
    const pushed = await repo.git("log", "-p", "--all");
    const events = JSON.stringify(
      await server.service.db.models.TaskEvent.collection.find({}).toArray(),
    );
    const prompts = JSON.stringify(model.requests.map((r) => r.body));
    for (const text of [pushed, JSON.stringify(task), events, prompts]) {
      expect(text).not.toContain(CANARY);
      expect(text).not.toContain(WEBHOOK_CANARY);
    }
  }, 180_000);

  it("escapes nothing through a health scan's test run", async () => {
    const res = await server.api("POST", `/health-reports/${repoId}/scan`, { key });
    expect(res.status).toBe(202);
    const { attempts, loot, snapshot } = await collect("health");
    await rm(snapshot, { recursive: true, force: true });
    let report;
    const deadline = Date.now() + 120_000;
    for (;;) {
      report = (await server.api("GET", `/health-reports/${repoId}/scans/${res.body.id}`, { key }))
        .body;
      if (report.status === "completed" || report.status === "failed") break;
      if (Date.now() > deadline) throw new Error(`scan still ${report.status}`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect(report.status).toBe("completed");
    // The attack really ran as the scan's test run: the coverage wrapper ran its npm test.
    const coverage = report.metrics.test_coverage.details.languages[0];
    expect(coverage.command).toContain("npm test");
    expect(coverage.reason ?? "").not.toMatch(/failed|timed out/);
    await expectContained(attempts, loot);
    expect(JSON.stringify(report)).not.toContain(CANARY);
  }, 180_000);
});
