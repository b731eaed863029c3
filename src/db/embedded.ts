import { spawn, execFile, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { createHash, randomBytes } from "node:crypto";
import {
  cp,
  lstat,
  mkdir,
  mkdtemp,
  readFile,
  rename,
  rm,
  stat,
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
  /**
   * Connection string without a database name; callers append their own. For FerretDB, the
   * server's Unix socket (`mongodb://%2F...%2Fdb.sock/`), the same for every process.
   */
  uri: string;
  /** True while this process runs the server; false while it uses another process's. */
  owner(): boolean;
  /** The server's pid while this process runs it. */
  serverPid(): number | undefined;
  /** Stops the server if this process runs it (an attached process just lets go). */
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
      await writeFile(path.join(lock, "owner"), `${os.hostname()}:${process.pid}\n`);
      break;
    } catch {
      if (existsSync(binary)) return binary;
      if (await isStaleBuildLock(lock)) {
        await rm(lock, { recursive: true, force: true });
        continue;
      }
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

/**
 * A build lock whose builder is gone: its owner process on this host no longer runs (killed
 * mid-build), or it names no owner a minute after it was made (killed between the two
 * writes). Without this, every later start waited the whole 15 minutes for it.
 */
async function isStaleBuildLock(lock: string): Promise<boolean> {
  const owner = await readFile(path.join(lock, "owner"), "utf8").catch(() => undefined);
  if (owner === undefined) {
    const made = await stat(lock).catch(() => undefined);
    return made !== undefined && Date.now() - made.mtimeMs > 60_000;
  }
  const [host, pid] = owner.trim().split(":");
  if (host !== os.hostname() || !pid) return false;
  try {
    process.kill(Number(pid), 0);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ESRCH";
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

/** True when something accepts connections at the URI's Unix socket or loopback port. */
export function serverAccepts(uri: string, timeoutMs = 1500): Promise<boolean> {
  const socketPath = socketPathOf(uri);
  let port = 27017;
  if (!socketPath) {
    try {
      port = Number(new URL(uri).port || 27017);
    } catch {
      return Promise.resolve(false);
    }
  }
  return new Promise((resolve) => {
    const socket = socketPath ? net.connect({ path: socketPath }) : net.connect(port, "127.0.0.1");
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once("connect", () => done(true));
    socket.once("error", () => done(false));
  });
}

const SOCKET_NAME = "db.sock";

/**
 * The private folder (0700, this user's) of the embedded server's Unix socket. The server
 * listens on no TCP port, so only a process that can open this folder reaches it: the
 * sandbox (src/sandbox/run.ts) mounts neither DATA_DIR nor the host's /tmp. A DATA_DIR too
 * long for a socket path (108 bytes on Linux) gets a folder named after it in the temp folder.
 */
export async function socketDir(dataDir: string): Promise<string> {
  const resolved = path.resolve(dataDir);
  const inData = path.join(resolved, "run");
  const dir =
    path.join(inData, SOCKET_NAME).length <= 100
      ? inData
      : path.join(
          os.tmpdir(),
          `foreman-${process.getuid?.() ?? "u"}-${createHash("sha256").update(resolved).digest("hex").slice(0, 16)}`,
        );
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const stat = await lstat(dir);
  if (!stat.isDirectory() || (process.getuid && stat.uid !== process.getuid()))
    throw new Error(`${dir} is not a folder of this user; the database socket cannot go there`);
  if ((stat.mode & 0o077) !== 0) await chmod(dir, 0o700);
  return dir;
}

/** The `mongodb://` URI of a Unix socket: the percent-encoded path in place of host:port. */
export function socketUri(socketPath: string): string {
  return `mongodb://${encodeURIComponent(socketPath)}/`;
}

/** The socket path of a `mongodb://<encoded path>` URI; undefined for a TCP one. */
export function socketPathOf(uri: string): string | undefined {
  const match = /^mongodb:\/\/(?:[^@/]*@)?(%2F[^/?,]*)/i.exec(uri);
  return match ? decodeURIComponent(match[1]!) : undefined;
}

/*
 * The server runs under this shell. It takes an flock on `server.lock` in the data folder
 * (fd 9, inherited by the server: the kernel releases the lock only when both the shell and
 * the server are gone, whatever killed them), so a second server never starts on the same
 * files; a launcher that cannot take the lock attaches to the running server instead. A
 * guard (which does not hold the lock) ends the server when the Node process that started
 * it disappears, even on SIGKILL. Exit 75: the lock is taken.
 */
const SUPERVISOR_SCRIPT = [
  "lock=$1; sock=$2; parent=$3; shift 3",
  'exec 9>>"$lock" || exit 74',
  "flock -n 9 || exit 75",
  "echo locked",
  // A server killed outright leaves its socket file, which would block the next bind.
  'rm -f "$sock"',
  '"$@" >&2 & child=$!',
  'echo "pid $child"',
  "trap 'kill $child 2>/dev/null; wait $child; exit 0' TERM INT",
  "( exec 9>&-; while kill -0 $parent 2>/dev/null && kill -0 $child 2>/dev/null; do sleep 1; done; kill $child 2>/dev/null ) </dev/null >/dev/null 2>&1 &",
  "wait $child",
].join("\n");

/** How often a process attached to another's server checks that it still answers. */
const ATTACHED_CHECK_MS = 1000;

/**
 * One embedded FerretDB on a data folder, shared by every process that uses it: the first
 * launcher runs the server (owner), the others attach to its socket. Any of them restarts
 * the server when it stops (killed, crashed, or its owner exited): the owner as soon as its
 * child exits, an attached one when the socket stops answering and the lock is free.
 */
class FerretdbKeeper {
  private child: ChildProcess | undefined;
  private pid: number | undefined;
  private stopping = false;
  private recovering: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private output = "";

  constructor(
    private readonly binary: string,
    private readonly dataDir: string,
    private readonly socketPath: string,
    private readonly logger: Logger | undefined,
  ) {}

  get uri(): string {
    return socketUri(this.socketPath);
  }

  get owner(): boolean {
    return this.child !== undefined;
  }

  get serverPid(): number | undefined {
    return this.pid;
  }

  async start(): Promise<void> {
    await this.ensure(60_000);
    this.timer = setInterval(() => {
      if (this.stopping || this.child || this.recovering) return;
      void serverAccepts(this.uri).then((ok) => {
        if (!ok) this.recover("the embedded database stopped answering");
      });
    }, ATTACHED_CHECK_MS);
    this.timer.unref();
  }

  private recover(reason: string): void {
    if (this.stopping || this.recovering) return;
    this.logger?.warn({ reason }, "embedded database down; restarting it");
    this.recovering = this.ensure(60_000)
      .then(
        () => this.logger?.info({ owner: this.owner }, "embedded database back"),
        (error: unknown) =>
          this.logger?.error({ err: error }, "embedded database could not be restarted"),
      )
      .finally(() => (this.recovering = undefined));
  }

  /** Runs the server, or attaches to the one another process runs, within `timeoutMs`. */
  private async ensure(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (this.stopping) return;
      if ((await this.tryOwn()) === "owned") return;
      // Another process holds the lock: its server is starting or running.
      if (await serverAccepts(this.uri)) return;
      if (Date.now() > deadline)
        throw new Error(
          `The embedded database in ${this.dataDir} is locked by another process but does not answer on ${this.socketPath}. ${this.output.slice(-2000)}`,
        );
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  private async tryOwn(): Promise<"owned" | "busy"> {
    const child = spawn(
      "/bin/sh",
      [
        "-c",
        SUPERVISOR_SCRIPT,
        "foreman-db",
        path.join(this.dataDir, "server.lock"),
        this.socketPath,
        String(process.pid),
        this.binary,
        ...ferretdbArgs(this.dataDir, this.socketPath),
      ],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    child.stderr.on("data", (chunk: Buffer) => {
      this.output = (this.output + chunk.toString()).slice(-8000);
    });
    let lines = "";
    const started = await new Promise<number | "busy">((resolve, reject) => {
      child.stdout.on("data", (chunk: Buffer) => {
        lines += chunk.toString();
        const pid = /^pid (\d+)$/m.exec(lines);
        if (pid) resolve(Number(pid[1]));
      });
      child.once("exit", (code) =>
        code === 75
          ? resolve("busy")
          : reject(
              new Error(
                `The embedded database exited with code ${code}: ${this.output.slice(-2000)}`,
              ),
            ),
      );
      child.once("error", reject);
    });
    if (started === "busy") return "busy";
    try {
      await this.waitForSocket(child);
    } catch (error) {
      child.kill("SIGTERM");
      throw error;
    }
    this.child = child;
    this.pid = started;
    child.once("exit", () => {
      if (this.child !== child) return;
      this.child = undefined;
      this.pid = undefined;
      this.recover(`the embedded database (pid ${started}) exited`);
    });
    // Lets the operator CLI (and people) find the server; attachers use the socket itself.
    await writeFile(
      path.join(this.dataDir, "running.json"),
      JSON.stringify({ uri: this.uri, pid: process.pid, server_pid: started }),
      { mode: 0o600 },
    );
    this.logger?.info(
      { engine: "ferretdb", socket: this.socketPath, pid: started },
      "embedded database started",
    );
    return "owned";
  }

  private async waitForSocket(child: ChildProcess, timeoutMs = 60_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (child.exitCode !== null)
        throw new Error(`FerretDB exited with code ${child.exitCode}: ${this.output.slice(-2000)}`);
      if (await serverAccepts(this.uri)) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`FerretDB did not listen on ${this.socketPath} within ${timeoutMs} ms`);
  }

  async stop(): Promise<void> {
    this.stopping = true;
    clearInterval(this.timer);
    await this.recovering;
    const child = this.child;
    this.child = undefined;
    if (!child || child.exitCode !== null) return;
    await rm(path.join(this.dataDir, "running.json"), { force: true });
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
    await exited;
    clearTimeout(timer);
  }
}

function ferretdbArgs(dataDir: string, socketPath: string): string[] {
  return [
    "--handler=sqlite",
    // WAL (FerretDB's default) with synchronous=NORMAL: commits survive a crash of either
    // process; only a power loss can take the last ones (as a standalone MongoDB's default
    // w:1 with its 100 ms journal flush). docs/operations.md, "Embedded database".
    `--sqlite-url=file:${path.join(dataDir, "ferretdb")}/?_pragma=synchronous(normal)`,
    // No TCP listener at all: the socket in a private folder is the only way in.
    "--listen-addr=",
    `--listen-unix=${socketPath}`,
    `--state-dir=${path.join(dataDir, "ferretdb-state")}`,
    "--debug-addr=-",
    "--telemetry=disable",
    "--log-level=warn",
    "--log-format=json",
  ];
}

async function startFerretdb(dataDir: string, logger?: Logger): Promise<EmbeddedDatabase> {
  const binary = await ensureFerretdb(logger);
  await mkdir(path.join(dataDir, "ferretdb"), { recursive: true });
  await mkdir(path.join(dataDir, "ferretdb-state"), { recursive: true });
  const keeper = new FerretdbKeeper(
    binary,
    dataDir,
    path.join(await socketDir(dataDir), SOCKET_NAME),
    logger,
  );
  await keeper.start();
  if (!keeper.owner) logger?.info({ socket: keeper.uri }, "attached to the embedded database");
  return {
    engine: "ferretdb",
    uri: keeper.uri,
    owner: () => keeper.owner,
    serverPid: () => keeper.serverPid,
    stop: () => keeper.stop(),
  };
}

/**
 * mongodb-memory-server's mongod listens on TCP, so it requires a password: a random one
 * made at the first start and kept in `auth.json` (0600) next to the data.
 */
async function startMongoMemoryServer(dataDir: string, logger?: Logger): Promise<EmbeddedDatabase> {
  const credentialsFile = path.join(dataDir, "auth.json");
  let credentials: { user: string; password: string };
  try {
    credentials = JSON.parse(await readFile(credentialsFile, "utf8")) as typeof credentials;
  } catch {
    credentials = { user: "foreman", password: randomBytes(24).toString("base64url") };
    await writeFile(credentialsFile, JSON.stringify(credentials), { mode: 0o600 });
  }
  const live = await runningServer(dataDir);
  if (live) {
    logger?.info({ engine: "mongodb-memory-server" }, "attached to the embedded database");
    return {
      engine: "mongodb-memory-server",
      uri: live.uri,
      owner: () => false,
      serverPid: () => undefined,
      async stop() {},
    };
  }
  const { MongoMemoryServer } = await import("mongodb-memory-server-core");
  const dbPath = path.join(dataDir, "mongodb");
  await mkdir(dbPath, { recursive: true });
  const server = await MongoMemoryServer.create({
    instance: { dbPath, storageEngine: "wiredTiger", ip: "127.0.0.1" },
    auth: {
      enable: true,
      customRootName: credentials.user,
      customRootPwd: credentials.password,
    },
  });
  const base = new URL(server.getUri());
  base.username = credentials.user;
  base.password = credentials.password;
  base.search = "?authSource=admin";
  const uri = base.toString();
  const running = path.join(dataDir, "running.json");
  await writeFile(running, JSON.stringify({ uri, pid: process.pid }), { mode: 0o600 });
  logger?.info({ engine: "mongodb-memory-server" }, "embedded database started");
  return {
    engine: "mongodb-memory-server",
    uri,
    owner: () => true,
    serverPid: () => server.instanceInfo?.instance.mongodProcess?.pid,
    async stop() {
      await rm(running, { force: true });
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
  return (await serverAccepts(info.uri)) ? { uri: info.uri, pid: info.pid } : undefined;
}

/**
 * Starts the embedded MongoDB-compatible server with its files under `dataDir`, or attaches
 * to the one another process of this data folder already runs (web and worker roles share
 * one server; see docs/operations.md).
 */
export async function startEmbeddedDatabase(options: EmbeddedOptions): Promise<EmbeddedDatabase> {
  await mkdir(options.dataDir, { recursive: true, mode: 0o700 });
  const engine = await chooseEngine(options.dataDir, options.engine);
  await writeFile(path.join(options.dataDir, "engine"), `${engine}\n`);
  return engine === "ferretdb"
    ? startFerretdb(options.dataDir, options.logger)
    : startMongoMemoryServer(options.dataDir, options.logger);
}
