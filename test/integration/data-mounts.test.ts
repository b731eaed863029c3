import { execFile, spawn, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { MongoClient } from "mongodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabaseUri } from "../helpers/server.js";
import {
  configureWorkdirVolumes,
  markKept,
  prepareWorkdir,
  volumeSupport,
} from "../../src/workcopy/volume.js";
import { mountsUnder } from "../helpers/mounts.js";

/*
 * Issue 40 (9): after the service stopped, the working copies' loop mounts stayed (kept
 * copies, and tasks cut off by the stop): `rm -rf DATA_DIR` failed with EBUSY and loop
 * devices piled up. The real service process (src/main.ts, web and workers) on a DATA_DIR
 * with mounted working copies: SIGTERM leaves only the kept copy mounted; the next start takes
 * back the copy of a task still running and removes one of a task that is gone; the operator's
 * `data:release` leaves nothing mounted, no loop device, and `rm -rf` works. Loop mounts need
 * root (the suite runs as root; elsewhere volumes are unavailable and this says so).
 */

const execFileAsync = promisify(execFile);
const root = path.resolve(import.meta.dirname, "../..");
configureWorkdirVolumes("auto");
const support = await volumeSupport();

/** Loop devices whose image is under `dir`. */
async function loopDevicesUnder(dir: string): Promise<string[]> {
  const { stdout } = await execFileAsync("losetup", ["--json", "--list"]);
  const devices = (JSON.parse(stdout || "{}") as { loopdevices?: { "back-file"?: string }[] })
    .loopdevices;
  return (devices ?? [])
    .map((d) => (d["back-file"] ?? "").replace(/ \(deleted\)$/, ""))
    .filter((file) => file.startsWith(`${dir}/`));
}

let dataDir: string;
let uri: string;
const children: ChildProcess[] = [];

beforeAll(() => {
  uri = testDatabaseUri("mounts");
});

afterAll(async () => {
  for (const child of children) if (child.exitCode === null) child.kill("SIGKILL");
  if (dataDir) {
    await execFileAsync("npx", ["tsx", "src/cli/data-release.ts"], {
      cwd: root,
      env: { ...process.env, DATA_DIR: dataDir },
    }).catch(() => undefined);
    await rm(dataDir, { recursive: true, force: true });
  }
});

/** The service from its sources (web and workers), ready once it says it listens. */
async function startService(): Promise<ChildProcess> {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PORT: "0",
    HOST: "127.0.0.1",
    DATA_DIR: dataDir,
    MONGODB_URI: uri,
    LOG_LEVEL: "info",
    LOG_FORMAT: "json",
    TASK_DISK_VOLUMES: "auto",
    OPEN_SIGNUP: "false",
  };
  const child = spawn(process.execPath, ["--import", "tsx", "src/main.ts"], {
    cwd: root,
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  let output = "";
  child.stderr!.on("data", (c: Buffer) => (output += c.toString()));
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on("data", (c: Buffer) => {
      output += c.toString();
      if (/"msg":"listening on /.test(output)) resolve();
    });
    child.once("exit", (code) => reject(new Error(`service exited ${code}: ${output}`)));
  });
  return child;
}

async function stop(child: ChildProcess): Promise<number | null> {
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
  child.kill("SIGTERM");
  return exited;
}

describe.runIf(support.available)("DATA_DIR's mounts across a stop and a start", () => {
  it("a stop leaves only kept copies (and a sibling worker's) mounted; a start takes back or removes; data:release frees all", async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), "foreman-mounts-"));
    const work = path.join(dataDir, "work");
    const [running, gone, kept, sibling] = [
      "task_running",
      "task_gone",
      "task_kept",
      "task_sibling",
    ].map((n) => path.join(work, n));
    const service = await startService();
    // Working copies on volumes, as the clone stage makes them: one of a task still running,
    // one of a task that no longer exists, one kept for a follow-up, one a stage of another
    // live worker of this DATA_DIR is working in (its lease beats).
    for (const workdir of [running!, gone!, kept!, sibling!]) {
      expect(await prepareWorkdir(workdir, 24)).toBe("volume");
      await writeFile(path.join(workdir, "file.txt"), path.basename(workdir));
    }
    await markKept(kept!, Date.now() + 3_600_000);
    const client = await MongoClient.connect(uri);
    try {
      await client
        .db()
        .collection("tasks")
        .insertOne({ _id: "task_running" as never, status: "running", phase: "VERIFYING" });
      await client
        .db()
        .collection("once_markers")
        .insertOne({
          _id: "lease:task_sibling:verify:0" as never,
          scope: "lease",
          holder_id: "another-host:4242:0123456789ab",
          heartbeat_at: new Date(),
        });
      expect(mountsUnder(dataDir)).toHaveLength(8);

      expect(await stop(service)).toBe(0);
      // Only the kept copy (its bind and its volume's loop mount) and the sibling's.
      const stays = [kept!, `${kept}.vol/mnt`, sibling!, `${sibling}.vol/mnt`];
      expect(mountsUnder(dataDir).sort()).toEqual(stays.sort());
      expect(existsSync(path.join(running!, "file.txt"))).toBe(false);

      const again = await startService();
      // Taken back (a task still running), removed (no such task), kept (still valid).
      expect(mountsUnder(dataDir).sort()).toEqual(
        [...stays, running!, `${running}.vol/mnt`].sort(),
      );
      expect(readFileSync(path.join(running!, "file.txt"), "utf8")).toBe("task_running");
      expect(existsSync(`${gone}.vol`)).toBe(false);
      expect(await stop(again)).toBe(0);
    } finally {
      await client.close();
    }

    // The operator's release: nothing mounted, no loop device, and DATA_DIR goes.
    const { stdout } = await execFileAsync("npx", ["tsx", "src/cli/data-release.ts"], {
      cwd: root,
      env: { ...process.env, DATA_DIR: dataDir },
    });
    expect(stdout).toMatch(
      /4 mount\(s\) taken off \(2 of kept copies\); no loop device of its images is attached/,
    );
    expect(mountsUnder(dataDir)).toEqual([]);
    expect(await loopDevicesUnder(dataDir)).toEqual([]);
    await rm(dataDir, { recursive: true });
    expect(existsSync(dataDir)).toBe(false);
  }, 240_000);
});
