import { spawn, execFile, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import {
  cp,
  mkdir,
  mkdtemp,
  readFile,
  rename,
  rm,
  writeFile,
  chmod,
  readdir,
} from "node:fs/promises";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import type { Logger } from "../util/logger.js";

const execFileAsync = promisify(execFile);

export const FERRETDB_MODULE = "github.com/FerretDB/FerretDB";
export const FERRETDB_VERSION = "v1.24.2";
/** Bumped whenever the source patches below change, so cached binaries are rebuilt. */
export const FERRETDB_PATCH_LEVEL = "p3";

/*
 * FerretDB v1.24.2's SQLite backend creates its `_id` index on `_ferretdb_sjson->"_id"` but
 * filters by `_ferretdb_sjson->'$._id'`: same value, different expression, so SQLite never
 * uses the index and every `_id` lookup, update and delete scans the whole table (measured:
 * 1.3 ms at 100 documents, 38 ms at 10,000). The fix makes the filter the index's own
 * expression.
 *
 * The same backend uses the `_id` only when it is the filter's one field: `{_id, name}`
 * scans the whole table (Agenda saves and locks every job that way: 4.4 ms instead of
 * 1.3 ms at 300 jobs, measured). The handler filters every document it gets back by the
 * whole filter anyway (find, findAndModify, update and delete all do), so the second patch
 * narrows the query by `_id` whenever the filter has an `_id` equality, whatever else it has,
 * and the third does the same for `_id: {$in: [...]}` of up to 500 strings or ObjectIds
 * (the batched API-key lookups of db/lookup-batcher.ts; without it each batch would scan
 * the keys). (Explain is left as it is.) Each patch must apply exactly, or the build fails.
 */
const FERRETDB_PATCHES = [
  {
    file: "internal/backends/sqlite/metadata/metadata.go",
    from: `IDColumn = DefaultColumn + "->'$._id'"`,
    to: `IDColumn = DefaultColumn + \`->"_id"\``,
  },
  {
    file: "internal/backends/sqlite/collection.go",
    from: `if params.Filter.Len() == 1 {
		v, _ := params.Filter.Get("_id")
		switch v.(type) {
		case string, types.ObjectID:
			whereClause`,
    to: `if params.Filter.Len() >= 1 {
		v, _ := params.Filter.Get("_id")
		if w, a, ok := foremanIDIn(v); ok {
			whereClause, args = w, a
		}
		switch v.(type) {
		case string, types.ObjectID:
			whereClause`,
  },
  {
    // The helper of the patch above: `_id: {$in: [...]}` of strings and ObjectIds only.
    file: "internal/backends/sqlite/collection.go",
    from: `// Query implements backends.Collection interface.`,
    to: `// foremanIDIn narrows a query by the _id index for a filter {_id: {$in: [...]}} whose
// values are all strings or ObjectIds (added by foreman's build).
func foremanIDIn(v any) (string, []any, bool) {
	d, ok := v.(*types.Document)
	if !ok || d.Len() != 1 {
		return "", nil, false
	}
	in, err := d.Get("$in")
	if err != nil {
		return "", nil, false
	}
	arr, ok := in.(*types.Array)
	if !ok || arr.Len() == 0 || arr.Len() > 500 {
		return "", nil, false
	}
	placeholders := make([]string, arr.Len())
	args := make([]any, arr.Len())
	for i := 0; i < arr.Len(); i++ {
		e, _ := arr.Get(i)
		switch e.(type) {
		case string, types.ObjectID:
		default:
			return "", nil, false
		}
		placeholders[i] = "?"
		args[i] = string(must.NotFail(sjson.MarshalSingleValue(e)))
	}
	return fmt.Sprintf(\` WHERE %s IN (%s)\`, metadata.IDColumn, strings.Join(placeholders, ", ")), args, true
}

// Query implements backends.Collection interface.`,
  },
];

async function patchFerretdbSource(work: string): Promise<void> {
  for (const patch of FERRETDB_PATCHES) {
    const file = path.join(work, patch.file);
    const text = await readFile(file, "utf8");
    if (!text.includes(patch.from))
      throw new Error(`FerretDB source patch does not apply to ${patch.file}`);
    await writeFile(file, text.replace(patch.from, patch.to));
  }
}

export type EmbeddedEngine = "ferretdb" | "mongodb-memory-server";

export interface EmbeddedDatabase {
  engine: EmbeddedEngine;
  /** Connection string without a database name; callers append their own. */
  uri: string;
  stop(): Promise<void>;
}

export interface EmbeddedOptions {
  /** Where the database keeps its files; kept across restarts. */
  dataDir: string;
  engine?: "auto" | EmbeddedEngine;
  logger?: Logger | undefined;
}

/** Folder for built binaries shared by every checkout on this machine. */
export function toolCacheDir(): string {
  const base = process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), ".cache");
  return path.join(base, "foreman");
}

export function ferretdbBinaryPath(): string {
  return (
    process.env.FERRETDB_BIN ??
    path.join(toolCacheDir(), `ferretdb-${FERRETDB_VERSION}-${FERRETDB_PATCH_LEVEL}`, "ferretdb")
  );
}

/** FerretDB v1.24 needs Go 1.24 or newer (its go.mod; the build uses GOTOOLCHAIN=local). */
export async function hasUsableGo(): Promise<boolean> {
  try {
    const { stdout } = await execFileAsync("go", ["version"], { timeout: 15_000 });
    const match = /go(\d+)\.(\d+)/.exec(stdout);
    return Boolean(match && (Number(match[1]) > 1 || Number(match[2]) >= 24));
  } catch {
    return false;
  }
}

async function hasCachedMongod(): Promise<boolean> {
  if (process.env.MONGOMS_SYSTEM_BINARY) return true;
  const dir =
    process.env.MONGOMS_DOWNLOAD_DIR ?? path.join(os.homedir(), ".cache", "mongodb-binaries");
  try {
    return (await readdir(dir)).some((f) => f.startsWith("mongod"));
  } catch {
    return false;
  }
}

/**
 * Picks the engine: one that is already installed wins (an existing data folder keeps its
 * engine); otherwise FerretDB when Go can build it, else mongodb-memory-server, which
 * downloads a MongoDB binary.
 */
export async function chooseEngine(
  dataDir: string,
  requested: EmbeddedOptions["engine"] = "auto",
): Promise<EmbeddedEngine> {
  if (requested && requested !== "auto") return requested;
  const marker = path.join(dataDir, "engine");
  if (existsSync(marker)) {
    const recorded = (await readFile(marker, "utf8")).trim();
    if (recorded === "ferretdb" || recorded === "mongodb-memory-server") return recorded;
  }
  if (existsSync(ferretdbBinaryPath())) return "ferretdb";
  if (await hasCachedMongod()) return "mongodb-memory-server";
  if (await hasUsableGo()) return "ferretdb";
  return "mongodb-memory-server";
}

/**
 * Builds FerretDB from the Go module proxy unless a build is cached. The module archive
 * ships without build/version/version.txt, which FerretDB requires at start, so the build
 * runs in a writable copy with that file filled in. Concurrent callers wait on a lock dir.
 */
export async function ensureFerretdb(logger?: Logger): Promise<string> {
  const binary = ferretdbBinaryPath();
  if (existsSync(binary)) return binary;
  if (process.env.FERRETDB_BIN)
    throw new Error(`FERRETDB_BIN points to ${binary}, which does not exist`);
  if (!(await hasUsableGo())) {
    throw new Error(
      "No MongoDB-compatible server is available: install Go 1.24 or newer (to build FerretDB), set DB_ENGINE=mongodb-memory-server, or set MONGODB_URI",
    );
  }
  const dir = path.dirname(binary);
  await mkdir(path.dirname(dir), { recursive: true });
  const lock = `${dir}.lock`;
  const deadline = Date.now() + 15 * 60_000;
  for (;;) {
    try {
      await mkdir(lock);
      break;
    } catch {
      if (existsSync(binary)) return binary;
      if (Date.now() > deadline)
        throw new Error(`timed out waiting for the FerretDB build lock ${lock}`);
      await new Promise((r) => setTimeout(r, 500));
    }
  }
  try {
    if (existsSync(binary)) return binary;
    logger?.info({ version: FERRETDB_VERSION }, "building FerretDB (first start only)");
    const env = { ...process.env, GOTOOLCHAIN: "local", GOFLAGS: "-mod=mod" };
    const { stdout } = await execFileAsync(
      "go",
      ["mod", "download", "-json", `${FERRETDB_MODULE}@${FERRETDB_VERSION}`],
      { env, maxBuffer: 16 * 1024 * 1024, timeout: 10 * 60_000 },
    );
    const source = (JSON.parse(stdout) as { Dir?: string }).Dir;
    if (!source) throw new Error("go mod download returned no module directory");
    const work = await mkdtemp(path.join(os.tmpdir(), "foreman-ferretdb-"));
    try {
      await cp(source, work, { recursive: true });
      await chmodTree(work);
      await writeFile(path.join(work, "build", "version", "version.txt"), `${FERRETDB_VERSION}\n`);
      await patchFerretdbSource(work);
      await mkdir(dir, { recursive: true });
      const tmpBinary = `${binary}.tmp-${process.pid}`;
      await execFileAsync("go", ["build", "-trimpath", "-o", tmpBinary, "./cmd/ferretdb"], {
        cwd: work,
        env,
        maxBuffer: 16 * 1024 * 1024,
        timeout: 20 * 60_000,
      });
      await rename(tmpBinary, binary);
    } finally {
      await rm(work, { recursive: true, force: true });
    }
    logger?.info({ binary }, "FerretDB built");
    return binary;
  } finally {
    await rm(lock, { recursive: true, force: true });
  }
}

async function chmodTree(dir: string): Promise<void> {
  await chmod(dir, 0o755);
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) await chmodTree(full);
    else await chmod(full, 0o644);
  }
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => {
        if (address && typeof address === "object") resolve(address.port);
        else reject(new Error("no port"));
      });
    });
  });
}

/** True when something accepts TCP connections on the loopback port. */
function portAccepts(port: number, timeoutMs = 1500): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, "127.0.0.1");
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once("connect", () => done(true));
    socket.once("error", () => done(false));
  });
}

async function waitForPort(
  port: number,
  child: ChildProcess,
  output: () => string,
  timeoutMs = 60_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) {
      throw new Error(`FerretDB exited with code ${child.exitCode}: ${output().slice(-2000)}`);
    }
    if (await portAccepts(port)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`FerretDB did not listen on port ${port} within ${timeoutMs} ms`);
}

/**
 * Runs `binary args` under a small shell watchdog that ends the server when this Node
 * process disappears, even on SIGKILL, so no database outlives the service or a test run.
 */
function spawnWithWatchdog(binary: string, args: string[]): ChildProcess {
  const script =
    "\"$@\" & child=$!; trap 'kill $child 2>/dev/null; wait $child; exit 0' TERM INT; " +
    `while kill -0 ${process.pid} 2>/dev/null && kill -0 $child 2>/dev/null; do sleep 1; done; ` +
    "kill $child 2>/dev/null; wait $child";
  return spawn("/bin/sh", ["-c", script, "watchdog", binary, ...args], {
    stdio: ["ignore", "pipe", "pipe"],
  });
}

async function startFerretdb(dataDir: string, logger?: Logger): Promise<EmbeddedDatabase> {
  const binary = await ensureFerretdb(logger);
  const dbDir = path.join(dataDir, "ferretdb");
  const stateDir = path.join(dataDir, "ferretdb-state");
  await mkdir(dbDir, { recursive: true });
  await mkdir(stateDir, { recursive: true });
  const port = await freePort();
  const child = spawnWithWatchdog(binary, [
    "--handler=sqlite",
    `--sqlite-url=file:${dbDir}/`,
    `--listen-addr=127.0.0.1:${port}`,
    `--state-dir=${stateDir}`,
    "--debug-addr=-",
    "--telemetry=disable",
    "--log-level=warn",
    "--log-format=json",
  ]);
  let output = "";
  const collect = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-8000);
  };
  child.stdout?.on("data", collect);
  child.stderr?.on("data", collect);
  await waitForPort(port, child, () => output);
  logger?.info({ engine: "ferretdb", port }, "embedded database started");
  return {
    engine: "ferretdb",
    uri: `mongodb://127.0.0.1:${port}/`,
    async stop() {
      if (child.exitCode !== null) return;
      const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

async function startMongoMemoryServer(dataDir: string, logger?: Logger): Promise<EmbeddedDatabase> {
  const { MongoMemoryServer } = await import("mongodb-memory-server-core");
  const dbPath = path.join(dataDir, "mongodb");
  await mkdir(dbPath, { recursive: true });
  const server = await MongoMemoryServer.create({
    instance: { dbPath, storageEngine: "wiredTiger", ip: "127.0.0.1" },
  });
  logger?.info({ engine: "mongodb-memory-server" }, "embedded database started");
  return {
    engine: "mongodb-memory-server",
    uri: server.getUri(),
    async stop() {
      await server.stop({ doCleanup: false });
    },
  };
}

/** The server another live process runs on these files, from its `running.json`. */
export async function runningServer(
  dataDir: string,
): Promise<{ uri: string; pid: number } | undefined> {
  let info: { uri?: unknown; pid?: unknown };
  try {
    info = JSON.parse(await readFile(path.join(dataDir, "running.json"), "utf8")) as typeof info;
  } catch {
    return undefined;
  }
  if (typeof info.uri !== "string" || typeof info.pid !== "number") {
    return undefined;
  }
  try {
    process.kill(info.pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EPERM") return undefined;
  }
  const port = Number(new URL(info.uri).port || 27017);
  return (await portAccepts(port)) ? { uri: info.uri, pid: info.pid } : undefined;
}

/** Starts the embedded MongoDB-compatible server with its files under `dataDir`. */
export async function startEmbeddedDatabase(options: EmbeddedOptions): Promise<EmbeddedDatabase> {
  await mkdir(options.dataDir, { recursive: true });
  const live = await runningServer(options.dataDir);
  if (live) {
    throw new Error(
      `Another process (pid ${live.pid}) already serves the embedded database in ${options.dataDir}; ` +
        `two servers on the same files would corrupt them. Set MONGODB_URI=${live.uri}foreman to share it, or use another DATA_DIR.`,
    );
  }
  const engine = await chooseEngine(options.dataDir, options.engine);
  const db =
    engine === "ferretdb"
      ? await startFerretdb(options.dataDir, options.logger)
      : await startMongoMemoryServer(options.dataDir, options.logger);
  await writeFile(path.join(options.dataDir, "engine"), `${engine}\n`);
  // Lets the operator CLI attach to this server instead of opening the same files twice.
  const running = path.join(options.dataDir, "running.json");
  await writeFile(running, JSON.stringify({ uri: db.uri, pid: process.pid }));
  return {
    ...db,
    async stop() {
      await rm(running, { force: true });
      await db.stop();
    },
  };
}
