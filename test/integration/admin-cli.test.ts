// test-matrix: runtime-sensitive: the admin CLI run by this Node as a child process.
import { spawn } from "node:child_process";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findRunningDatabase, runAdmin, type AdminIo } from "../../src/cli/admin.js";
import { freePort } from "../../src/db/embedded.js";
import { startTestServer, testDatabaseUri, type TestServer } from "../helpers/server.js";

const ROOT = path.resolve(import.meta.dirname, "../..");

let server: TestServer;
let uri: string;
beforeAll(async () => {
  uri = testDatabaseUri("admincli");
  server = await startTestServer({ env: { MONGODB_URI: uri } });
});
afterAll(async () => {
  await server?.stop();
});

interface Run {
  code: number;
  stdout: string[];
  stderr: string[];
}

/** Runs the CLI in this process against the test database (or the given environment). */
async function admin(argv: string[], env: NodeJS.ProcessEnv = { MONGODB_URI: uri }): Promise<Run> {
  const stdout: string[] = [];
  const stderr: string[] = [];
  const io: AdminIo = { out: (l) => stdout.push(l), err: (l) => stderr.push(l), env };
  const code = await runAdmin(argv, io);
  return { code, stdout, stderr };
}

/** Runs the real entry point as a child process, the way an operator does in development. */
function adminProcess(
  argv: string[],
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      path.join(ROOT, "node_modules", ".bin", "tsx"),
      ["src/cli/admin.ts", ...argv],
      {
        cwd: ROOT,
        env: { ...process.env, MONGODB_URI: uri, LOG_LEVEL: "warn" },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
    child.once("error", reject);
    child.once("close", (code) => resolve({ code, stdout, stderr }));
  });
}

async function me(key: string) {
  return server.api("GET", "/keys/me", { key });
}

/** The account id behind a key, read from the database. */
async function accountOfKey(keyId: string): Promise<string> {
  const doc = await server.service.db.models.ApiKey.findOne({ key_id: keyId }).lean();
  if (!doc) throw new Error(`no key ${keyId}`);
  return doc.account_id;
}

describe("operator CLI", () => {
  it("lists accounts with their tier, usage and active key count", async () => {
    const first = await server.signup("cli-first");
    const second = await server.api("POST", "/keys/generate", {
      key: first.key,
      body: { name: "cli-second" },
    });
    expect(second.status).toBe(201);
    const accountId = await accountOfKey(first.id);

    const listed = await admin(["accounts", "list", "--json"]);
    expect(listed.code).toBe(0);
    expect(listed.stderr).toEqual([]);
    const rows = listed.stdout.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(rows).toContainEqual({
      id: accountId,
      tier: "free",
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      tasks_this_month: 0,
      monthly_limit: 10,
      active_keys: 2,
    });

    const table = await admin(["accounts", "list"]);
    expect(table.code).toBe(0);
    expect(table.stdout[0]).toMatch(
      /^ID\s+TIER\s+CREATED_AT\s+TASKS_THIS_MONTH\s+MONTHLY_LIMIT\s+ACTIVE_KEYS$/,
    );
    expect(table.stdout.find((l) => l.startsWith(accountId))).toMatch(
      new RegExp(`^${accountId}\\s+free\\s+\\S+\\s+0\\s+10\\s+2$`),
    );

    const shown = await admin(["accounts", "show", accountId, "--json"]);
    expect(shown.code).toBe(0);
    const detail = JSON.parse(shown.stdout[0]!);
    expect(detail).toMatchObject({
      id: accountId,
      tier: "free",
      active_keys: 2,
      monthly_limit: 10,
    });
    expect(detail.keys.map((k: { id: string }) => k.id).sort()).toEqual(
      [first.id, second.body.id].sort(),
    );

    const text = await admin(["accounts", "show", accountId]);
    expect(text.code).toBe(0);
    expect(text.stdout.join("\n")).toContain("Tier:             free");
    expect(text.stdout.join("\n")).toMatch(
      new RegExp(`${second.body.id}\\s+cli-second\\s+fmn_\\S+\\s+\\S+\\s+active`),
    );
  });

  it("sets the tier through a real child process and back in process", async () => {
    const { key, id } = await server.signup("cli-tier");
    const accountId = await accountOfKey(id);

    const run = await adminProcess(["accounts", "set-tier", accountId, "pro", "--json"]);
    expect(run.stderr.replace(/^npm warn.*\n/gm, "")).toBe("");
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout)).toEqual({
      id: accountId,
      previous_tier: "free",
      tier: "pro",
      monthly_limit: null,
    });
    expect((await me(key)).body).toMatchObject({ tier: "pro", monthly_limit: null });

    const back = await admin(["accounts", "set-tier", accountId, "free"]);
    expect(back.code).toBe(0);
    expect(back.stdout).toEqual([`Account ${accountId}: tier pro -> free (monthly limit: 10).`]);
    expect((await me(key)).body).toMatchObject({ tier: "free", monthly_limit: 10 });

    const again = await admin(["accounts", "set-tier", accountId, "free", "--json"]);
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout[0]!)).toMatchObject({ previous_tier: "free", tier: "free" });
  });

  it("revokes any key by id; the key answers 401 at once", async () => {
    const owner = await server.signup("cli-owner");
    const other = await server.api("POST", "/keys/generate", {
      key: owner.key,
      body: { name: "cli-victim" },
    });
    const accountId = await accountOfKey(owner.id);
    expect((await me(other.body.key)).status).toBe(200);

    const revoked = await admin(["keys", "revoke", other.body.id]);
    expect(revoked.code).toBe(0);
    expect(revoked.stdout).toEqual([
      `Revoked key ${other.body.id} ("cli-victim") of account ${accountId}.`,
    ]);
    const after = await me(other.body.key);
    expect(after.status).toBe(401);
    expect((await me(owner.key)).status).toBe(200);

    const twice = await admin(["keys", "revoke", other.body.id, "--json"]);
    expect(twice.code).toBe(0);
    expect(JSON.parse(twice.stdout[0]!)).toMatchObject({
      id: other.body.id,
      account_id: accountId,
      already_revoked: true,
    });

    const keys = await admin(["keys", "list", accountId, "--json"]);
    expect(keys.code).toBe(0);
    const listed = keys.stdout.map(
      (l) => JSON.parse(l) as { id: string; revoked_at: string | null },
    );
    expect(listed.find((k) => k.id === other.body.id)?.revoked_at).toMatch(/^\d{4}-/);
    expect(listed.find((k) => k.id === owner.id)?.revoked_at).toBeNull();

    const list = await admin(["accounts", "list", "--json"]);
    const row = list.stdout
      .map((l) => JSON.parse(l))
      .find((a: { id: string }) => a.id === accountId);
    expect(row.active_keys).toBe(1);
  });

  it("fails with exit 1 and a clear message for unknown accounts and keys", async () => {
    for (const argv of [
      ["accounts", "show", "acct_missing"],
      ["accounts", "set-tier", "acct_missing", "pro"],
      ["keys", "list", "acct_missing"],
    ]) {
      const run = await admin(argv);
      expect(run.code, argv.join(" ")).toBe(1);
      expect(run.stdout).toEqual([]);
      expect(run.stderr).toEqual(['foreman-admin: no account with id "acct_missing"']);
    }
    const key = await admin(["keys", "revoke", "key_missing"]);
    expect(key.code).toBe(1);
    expect(key.stderr).toEqual(['foreman-admin: no key with id "key_missing"']);
  });

  it("answers usage errors with exit 2 before touching the database", async () => {
    // An unreachable database proves these never connect.
    const env = { MONGODB_URI: "mongodb://127.0.0.1:1/none" };
    for (const argv of [
      ["accounts", "set-tier", "acct_x", "gold"],
      ["accounts", "set-tier", "acct_x"],
      ["accounts", "show"],
      ["accounts", "list", "extra"],
      ["accounts", "delete", "acct_x"],
      ["keys"],
      ["nonsense"],
      [],
      ["accounts", "list", "--yaml"],
    ]) {
      const run = await admin(argv, env);
      expect(run.code, argv.join(" ")).toBe(2);
      expect(run.stderr.length, argv.join(" ")).toBeGreaterThan(0);
    }
    const badTier = await admin(["accounts", "set-tier", "acct_x", "gold"], env);
    expect(badTier.stderr[0]).toBe('foreman-admin: invalid tier "gold"; use free or pro');

    const help = await admin(["--help"], env);
    expect(help.code).toBe(0);
    expect(help.stdout.join("\n")).toContain("accounts set-tier <account_id> <tier>");
  });

  it("attaches to the server named in DATA_DIR/db/running.json when it is alive", async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), "foreman-admin-cli-"));
    try {
      const runningFile = path.join(dataDir, "db", "running.json");
      await mkdir(path.dirname(runningFile), { recursive: true });
      expect(await findRunningDatabase(dataDir)).toBeUndefined();

      // Stale: the process is gone, or the port does not answer.
      await writeFile(runningFile, JSON.stringify({ uri, pid: 2 ** 22 + 1 }));
      expect(await findRunningDatabase(dataDir)).toBeUndefined();
      const closed = `mongodb://127.0.0.1:${await freePort()}/`;
      await writeFile(runningFile, JSON.stringify({ uri: closed, pid: process.pid }));
      expect(await findRunningDatabase(dataDir)).toBeUndefined();
      await writeFile(runningFile, "not json");
      expect(await findRunningDatabase(dataDir)).toBeUndefined();

      // Alive: the CLI uses it instead of starting a second server on the same files.
      await writeFile(runningFile, JSON.stringify({ uri, pid: process.pid }));
      expect(await findRunningDatabase(dataDir)).toBe(uri);
      const { id } = await server.signup("cli-running");
      const accountId = await accountOfKey(id);
      const run = await admin(["accounts", "show", accountId, "--json"], { DATA_DIR: dataDir });
      expect(run.stderr).toEqual([]);
      expect(run.code).toBe(0);
      expect(JSON.parse(run.stdout[0]!)).toMatchObject({ id: accountId, active_keys: 1 });
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
