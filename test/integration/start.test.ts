// test-matrix: runtime-sensitive: the built service (dist/) started, restarted and stopped by
// this Node: its module loading, signals and exit codes.
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort, serverAccepts } from "../../src/db/embedded.js";

const root = path.resolve(import.meta.dirname, "../..");
const main = path.join(root, "dist", "main.js");
let dataDir: string;
const children: ChildProcess[] = [];

beforeAll(async () => {
  if (!existsSync(main))
    await promisify(execFile)("npx", ["tsc", "-p", "tsconfig.build.json"], { cwd: root });
  dataDir = await mkdtemp(path.join(os.tmpdir(), "foreman-start-"));
});

afterAll(async () => {
  for (const child of children) if (child.exitCode === null) child.kill("SIGKILL");
  await rm(dataDir, { recursive: true, force: true });
});

async function startBuilt(port: number): Promise<ChildProcess> {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PORT: String(port),
    HOST: "127.0.0.1",
    DATA_DIR: dataDir,
    LOG_LEVEL: "warn",
  };
  delete env.MONGODB_URI;
  const child = spawn(process.execPath, [main], { env, stdio: ["ignore", "pipe", "pipe"] });
  children.push(child);
  let output = "";
  child.stdout!.on("data", (c: Buffer) => (output += c.toString()));
  child.stderr!.on("data", (c: Buffer) => (output += c.toString()));
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`service exited ${child.exitCode}: ${output}`);
    try {
      const res = await fetch(`http://127.0.0.1:${port}/readyz`);
      if (res.status === 200) return child;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`service did not become ready: ${output}`);
}

function exited(child: ChildProcess): Promise<number | null> {
  return child.exitCode !== null
    ? Promise.resolve(child.exitCode)
    : new Promise((r) => child.once("exit", (code) => r(code)));
}

/** The embedded server's URI (its Unix socket) from the launcher's running.json. */
async function databaseUri(): Promise<string> {
  const running = JSON.parse(await readFile(path.join(dataDir, "db", "running.json"), "utf8")) as {
    uri: string;
  };
  return running.uri;
}

describe("the built service", () => {
  it("starts on its embedded database, keeps an account across a restart and stops cleanly", async () => {
    const port = await freePort();
    let child = await startBuilt(port);
    const ready = await (await fetch(`http://127.0.0.1:${port}/readyz`)).json();
    expect(ready).toEqual({ status: "ready", database: "ok" });
    expect((await readFile(path.join(dataDir, "db", "engine"), "utf8")).trim()).toMatch(
      /^(ferretdb|mongodb-memory-server)$/,
    );

    const created = await fetch(`http://127.0.0.1:${port}/keys/generate`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ name: "survivor" }),
    });
    expect(created.status).toBe(201);
    const { key, id } = (await created.json()) as { key: string; id: string };

    const dbUri = await databaseUri();
    child.kill("SIGTERM");
    expect(await exited(child)).toBe(0);
    expect(await serverAccepts(dbUri)).toBe(false);

    child = await startBuilt(port);
    const me = await fetch(`http://127.0.0.1:${port}/keys/me`, { headers: { "x-api-key": key } });
    expect(me.status).toBe(200);
    expect(await me.json()).toMatchObject({ id, name: "survivor", tier: "free" });

    // Killed outright, the service still takes its database server with it.
    const secondDbUri = await databaseUri();
    child.kill("SIGKILL");
    await exited(child);
    const deadline = Date.now() + 10_000;
    while ((await serverAccepts(secondDbUri)) && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 200));
    expect(await serverAccepts(secondDbUri)).toBe(false);
  });

  it("refuses a bad configuration with every problem listed", async () => {
    const env = {
      ...process.env,
      PORT: "not-a-port",
      RUN_WORKERS: "maybe",
      LLM_PROVIDER: "openai-compatible",
      DATA_DIR: dataDir,
    };
    const result = await new Promise<{ code: number | null; output: string }>((resolve) => {
      const child = spawn(process.execPath, [main], { env, stdio: ["ignore", "pipe", "pipe"] });
      let output = "";
      child.stdout.on("data", (c: Buffer) => (output += c.toString()));
      child.stderr.on("data", (c: Buffer) => (output += c.toString()));
      child.once("exit", (code) => resolve({ code, output }));
    });
    expect(result.code).toBe(2);
    expect(result.output).toContain("PORT");
    expect(result.output).toContain("RUN_WORKERS");
    expect(result.output).toContain("LLM_BASE_URL");
  });
});
