/*
 * `npm run bench -- start`: how long a restart takes, from `npm start` to a 200 on /readyz,
 * on the embedded database (issue 31: under 10 s on a second start).
 *
 * One data folder; the first `npm start` creates the database (and builds dist/ when it is
 * out of date), then BENCH_ROUNDS alternating rounds time a second `npm start` (prestart's
 * freshness check, npm itself, the service and the embedded FerretDB) and the baseline,
 * `node dist/main.js` started directly on the same data: the ratio is what npm and the
 * build check add. The figure reported is the median round. With a container image built
 * by scripts/container-check.sh (FOREMAN_IMAGE, default localhost/foreman:local), its size
 * is reported too.
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { BenchError, type Benchmark, type BenchReport, type Check } from "./lib/harness.js";
import { groupExists } from "../src/sandbox/index.js";

const TARGET_MS = 10_000;
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const run = promisify(execFile);

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

function environment(dataDir: string, port: number): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of ["MONGODB_URI", "TEST_MONGODB_URI", "ENV_FILE"]) delete env[name];
  return {
    ...env,
    PORT: String(port),
    HOST: "127.0.0.1",
    DATA_DIR: dataDir,
    LOG_LEVEL: "warn",
    // No .env of the checkout: the bench measures the defaults.
    ENV_FILE: path.join(dataDir, "no.env"),
  };
}

/** Starts `command` in a process group of its own and times it until /readyz answers 200. */
async function timeToReady(
  command: string[],
  env: NodeJS.ProcessEnv,
  port: number,
  timeoutMs: number,
): Promise<{ ms: number; child: ChildProcess }> {
  const started = performance.now();
  const child = spawn(command[0]!, command.slice(1), {
    cwd: root,
    env,
    detached: true,
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
  let exited = false;
  child.once("exit", () => (exited = true));
  while (performance.now() - started < timeoutMs) {
    if (exited) throw new BenchError(`${command.join(" ")} exited before ready:\n${stderr}`);
    try {
      const res = await fetch(`http://127.0.0.1:${port}/readyz`, {
        signal: AbortSignal.timeout(1000),
      });
      if (res.status === 200) return { ms: performance.now() - started, child };
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  await stop(child);
  throw new BenchError(`${command.join(" ")} not ready within ${timeoutMs} ms:\n${stderr}`);
}

/** SIGTERM to the whole group (npm, the service, the embedded database), then waits. */
async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  try {
    process.kill(-child.pid!, "SIGTERM");
  } catch {
    return;
  }
  const timer = setTimeout(() => {
    try {
      process.kill(-child.pid!, "SIGKILL");
    } catch {
      // gone
    }
  }, 30_000);
  await exited;
  // npm leaves before the service it started has stopped (its shutdown takes seconds): the
  // whole group must be gone before the next round starts or the data folder is removed. A
  // service left running here outlived a whole `npm run bench` once (its folder removed
  // under it), so the group is killed when it is not gone by the deadline.
  const deadline = Date.now() + 30_000;
  while (groupExists(child.pid!) && Date.now() < deadline)
    await new Promise((r) => setTimeout(r, 100));
  clearTimeout(timer);
  if (groupExists(child.pid!)) process.kill(-child.pid!, "SIGKILL");
  // The embedded database's keeper leaves with its parent; give it a moment to free the lock.
  await new Promise((r) => setTimeout(r, 500));
}

async function imageSize(): Promise<{ image: string; bytes: number } | undefined> {
  const image = process.env.FOREMAN_IMAGE ?? "localhost/foreman:local";
  for (const tool of ["podman", "docker"]) {
    try {
      const { stdout } = await run(tool, ["image", "inspect", "--format", "{{.Size}}", image]);
      return { image, bytes: Number(stdout.trim()) };
    } catch {
      // no such tool or image
    }
  }
  return undefined;
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
};

export const startBench: Benchmark = {
  name: "start",
  description: "second `npm start` to /readyz on the embedded database, vs node dist/main.js",
  async run(settings): Promise<BenchReport> {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), "foreman-bench-start-"));
    try {
      const port = await freePort();
      const env = environment(dataDir, port);
      const npm = ["npm", "start", "--silent"];
      // First start: creates the database (and builds dist/ if it is out of date).
      const first = await timeToReady(npm, env, port, 15 * 60_000);
      await stop(first.child);
      const npmMs: number[] = [];
      const nodeMs: number[] = [];
      for (let round = 0; round < settings.rounds; round++) {
        const again = await timeToReady(npm, env, port, 60_000);
        await stop(again.child);
        npmMs.push(again.ms);
        const direct = await timeToReady(["node", "dist/main.js"], env, port, 60_000);
        await stop(direct.child);
        nodeMs.push(direct.ms);
      }
      const second = median(npmMs);
      const baseline = median(nodeMs);
      const checks: Check[] = [
        {
          name: "second npm start to /readyz",
          value: Math.round(second),
          target: TARGET_MS,
          atMost: true,
          pass: second < TARGET_MS,
          detail: `${(second / 1000).toFixed(2)} s (median of ${settings.rounds}); node dist/main.js ${(baseline / 1000).toFixed(2)} s: ratio ${(second / baseline).toFixed(2)}`,
        },
      ];
      const image = await imageSize();
      if (image)
        checks.push({
          name: `image size (${image.image})`,
          value: Math.round(image.bytes / 1e6),
          target: Math.round(image.bytes / 1e6),
          atMost: true,
          pass: true,
          detail: `${(image.bytes / 1e6).toFixed(0)} MB (informative)`,
        });
      return {
        subjects: [],
        checks,
        info: {
          first_start_ms: Math.round(first.ms),
          second_npm_start_ms: npmMs.map(Math.round),
          node_direct_ms: nodeMs.map(Math.round),
          ratio_to_node_direct: second / baseline,
          image: image ?? "not built (scripts/container-check.sh builds it)",
        },
      };
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  },
};
