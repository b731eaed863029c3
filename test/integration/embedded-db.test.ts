// test-matrix: runtime-sensitive: the database launcher and its keeper (child processes,
// signals, flock, sockets).
// test-matrix: solo: it kills and restarts database servers; beside another heavy file on 2
// cores it timed out (it passes alone, every time).
import { mkdtemp, readFile, readdir, readlink, rm, stat } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { MongoClient } from "mongodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { withDatabaseName } from "../../src/db/connection.js";
import {
  chooseEngine,
  socketPathOf,
  startEmbeddedDatabase,
  type EmbeddedDatabase,
} from "../../src/db/embedded.js";

/*
 * The embedded server on its own data folder (not the run's shared one): reachable only
 * through a Unix socket in a private folder, one server per data folder whatever starts or
 * dies, and restarted when it is killed.
 */

let dir: string;
const launched: EmbeddedDatabase[] = [];

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "foreman-embedded-"));
});

afterAll(async () => {
  for (const db of launched.reverse()) await db.stop();
  await rm(dir, { recursive: true, force: true });
});

async function launch(): Promise<EmbeddedDatabase> {
  const db = await startEmbeddedDatabase({ dataDir: dir });
  launched.push(db);
  return db;
}

/** The pids of every server process running on this data folder's files. */
async function serversOnFiles(): Promise<number[]> {
  const marker = `--sqlite-url=file:${path.join(dir, "ferretdb")}/`;
  const pids: number[] = [];
  for (const entry of await readdir("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const cmdline = await readFile(`/proc/${entry}/cmdline`, "utf8").catch(() => "");
    const args = cmdline.split("\0");
    // The server itself, not the shell that runs it (whose script names the same flags).
    if (args.some((a) => a.startsWith(marker)) && !args.includes("-c")) pids.push(Number(entry));
  }
  return pids;
}

/** Socket inodes of every TCP socket listening on this machine (IPv4 and IPv6). */
async function listeningTcpInodes(): Promise<Set<string>> {
  const inodes = new Set<string>();
  for (const file of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    const text = await readFile(file, "utf8").catch(() => "");
    for (const line of text.split("\n").slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols[3] === "0A") inodes.add(cols[9]!); // 0A: LISTEN
    }
  }
  return inodes;
}

async function socketInodesOf(pid: number): Promise<string[]> {
  const inodes: string[] = [];
  for (const fd of await readdir(`/proc/${pid}/fd`)) {
    const target = await readlink(`/proc/${pid}/fd/${fd}`).catch(() => "");
    const match = /^socket:\[(\d+)\]$/.exec(target);
    if (match) inodes.push(match[1]!);
  }
  return inodes;
}

async function until<T>(probe: () => Promise<T | undefined>, what: string): Promise<T> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe("the embedded database", () => {
  it("has one server for two launchers, on a socket in a private folder and no TCP port", async () => {
    expect(await chooseEngine(dir)).toBe("ferretdb");
    const [a, b] = await Promise.all([launch(), launch()]);
    expect([a.owner(), b.owner()].sort()).toEqual([false, true]);
    expect(a.uri).toBe(b.uri);
    const socket = socketPathOf(a.uri);
    expect(socket).toBeDefined();
    expect(a.uri).not.toMatch(/:\d+\//);
    expect((await stat(path.dirname(socket!))).mode & 0o777).toBe(0o700);

    const servers = await serversOnFiles();
    expect(servers).toHaveLength(1);
    const owner = a.owner() ? a : b;
    expect(servers).toEqual([owner.serverPid()]);
    const listening = await listeningTcpInodes();
    const own = await socketInodesOf(servers[0]!);
    expect(own.length).toBeGreaterThan(0);
    expect(own.filter((inode) => listening.has(inode))).toEqual([]);

    // The socket path is the only way in: a client naming the folder without the socket,
    // or a loopback port, finds nothing.
    const wrong = new MongoClient(`mongodb://${encodeURIComponent(path.dirname(socket!))}/x`, {
      serverSelectionTimeoutMS: 500,
    });
    await expect(wrong.db("x").command({ ping: 1 })).rejects.toThrow();
    await wrong.close();

    const client = new MongoClient(withDatabaseName(a.uri, "embedded"), {
      serverSelectionTimeoutMS: 5000,
    });
    await client.db().collection("notes").insertOne({ text: "kept" });

    // The owner's supervising shell dies (SIGKILL) but the server lives on holding the data
    // folder's lock: a third launcher attaches instead of starting a second server.
    const shell = Number((await readFile(`/proc/${servers[0]}/stat`, "utf8")).split(" ")[3]);
    process.kill(shell, "SIGKILL");
    const c = await launch();
    expect(c.owner()).toBe(false);
    expect(await serversOnFiles()).toEqual(servers);

    // The server itself killed: one of the launchers starts a new one within seconds, still
    // only one, and the client reconnects to it by itself.
    process.kill(servers[0]!, "SIGKILL");
    const restarted = await until(async () => {
      const now = await serversOnFiles();
      return now.length === 1 && now[0] !== servers[0] ? now : undefined;
    }, "a new server");
    expect(restarted).toHaveLength(1);
    // The launcher that started it owns it once its socket answers (a moment after the
    // process shows up).
    const owners = await until(async () => {
      const now = [a, b, c].filter((db) => db.owner());
      return now.length > 0 ? now : undefined;
    }, "the new server's owner");
    expect(owners).toHaveLength(1);
    expect(await client.db().collection("notes").findOne({})).toMatchObject({ text: "kept" });

    // Its owner stops: an attached launcher takes over the same socket.
    const first = [a, b, c].find((db) => db.owner())!;
    await first.stop();
    await until(
      async () => ([a, b, c].some((db) => db !== first && db.owner()) ? true : undefined),
      "a new owner",
    );
    expect(await client.db().collection("notes").countDocuments()).toBe(1);
    expect(await serversOnFiles()).toHaveLength(1);
    await client.close();
  }, 120_000);
});
