import {
  execFile as nodeExecFile,
  spawn as nodeSpawn,
  type ChildProcess,
} from "node:child_process";
import { fileURLToPath } from "node:url";

/*
 * Child processes started by a small helper process, the launcher (util/launcher-process.ts),
 * rather than by the service itself.
 *
 * Node starts a child with fork() on Linux (libuv), on the event loop's thread, and fork
 * copies the page tables of the whole process, so its cost grows with the service's memory.
 * Measured on a 2-core machine, spawning `true`: 1.6 ms from a 57 MB process, 9 ms at
 * 157 MB, 22 ms at 408 MB. The service is at about 400 MB after a few tasks, and a task
 * starts some 30 processes (git, mount, du, the sandbox's commands): each one stalled every
 * request, WebSocket and stage of the process meanwhile. The launcher stays small, so its
 * forks stay cheap, and the service's thread only writes a message.
 *
 * Used for the service's short-lived commands (git, du, mount, cp, mkfifo) and for the
 * sandbox's commands (detached, stdio ignored: their output goes through a FIFO). Processes
 * the service talks to over stdin and stdout (MCP stdio servers, the setup proxy, the
 * embedded database) stay Node's own children.
 *
 * One launcher per process, started on first use and unreferenced while idle (it never holds
 * the process open). If it cannot start, commands are started by the service itself, as
 * before. If it dies, the commands in flight fail (a command is never started twice: it may
 * have had effects; a detached one is killed), and the next call starts a new launcher.
 */

/** What the service asks the launcher. */
export type LauncherRequest =
  | {
      op: "exec";
      id: number;
      file: string;
      args: string[];
      cwd?: string | undefined;
      env: NodeJS.ProcessEnv;
      timeout?: number | undefined;
      maxBuffer?: number | undefined;
    }
  | {
      op: "spawn";
      id: number;
      file: string;
      args: string[];
      cwd?: string | undefined;
      env: NodeJS.ProcessEnv;
    }
  | { op: "kill"; id: number; signal: NodeJS.Signals };

/** What the launcher answers (id 0: it is ready). */
export type LauncherReply =
  | { id: 0; type: "ready" }
  | {
      id: number;
      type: "done";
      stdout: string;
      stderr: string;
      error: {
        message: string;
        code: number | string | null;
        killed: boolean;
        signal: NodeJS.Signals | null;
      } | null;
    }
  | { id: number; type: "spawned"; pid: number }
  | { id: number; type: "failed"; message: string; code: string | null }
  | { id: number; type: "exit"; code: number | null; signal: NodeJS.Signals | null };

export interface ExecOptions {
  cwd?: string | undefined;
  /** The command's whole environment (default: the service's, as execFile's). */
  env?: NodeJS.ProcessEnv | undefined;
  timeout?: number | undefined;
  maxBuffer?: number | undefined;
  signal?: AbortSignal | undefined;
}

/** execFile's error: the exit `code` (or an errno name), `killed`, `signal` and the output. */
export type ExecError = Error & {
  code?: number | string | null;
  killed?: boolean;
  signal?: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
};

export interface ExecResult {
  stdout: string;
  stderr: string;
}

/** A detached command the launcher (or the service) started: its pid and how it ended. */
export interface Launched {
  readonly pid: number;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** How long a launcher that does not answer at start is waited for. */
const READY_TIMEOUT_MS = 10_000;
/** After a launcher could not start, the service starts commands itself this long. */
const RETRY_AFTER_MS = 60_000;
/** execFile's default maxBuffer. */
const DEFAULT_MAX_BUFFER = 1024 * 1024;

class Launcher {
  private nextId = 1;
  private readonly pending = new Map<number, (reply: LauncherReply) => void>();
  private gone = false;

  private constructor(private readonly child: ChildProcess) {
    child.on("message", (reply: LauncherReply) => this.pending.get(reply.id)?.(reply));
    child.on("exit", () => this.lost());
    child.on("error", () => this.lost());
    this.idle();
  }

  /** A launcher that has said it is ready. */
  static start(): Promise<Launcher> {
    return new Promise((resolve, reject) => {
      const child = nodeSpawn(process.execPath, entryArgs(), {
        stdio: ["ignore", "ignore", "inherit", "ipc"],
        // Its own environment needs nothing of the service's (each command's is sent along).
        env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: process.env.HOME ?? "/tmp" },
      });
      const timer = setTimeout(() => {
        child.kill("SIGKILL");
        reject(new Error("the launcher did not start"));
      }, READY_TIMEOUT_MS);
      child.once("error", (error) => {
        clearTimeout(timer);
        reject(error);
      });
      child.once("exit", () => {
        clearTimeout(timer);
        reject(new Error("the launcher exited at start"));
      });
      child.once("message", () => {
        clearTimeout(timer);
        child.removeAllListeners();
        resolve(new Launcher(child));
      });
    });
  }

  get alive(): boolean {
    return !this.gone;
  }

  /** Sends `request` (its id set here); `onReply` gets every reply to it until released. */
  send(request: DistributiveOmit<LauncherRequest, "id">, onReply: (reply: LauncherReply) => void) {
    const id = this.nextId++;
    if (this.pending.size === 0) this.busy();
    this.pending.set(id, onReply);
    this.child.send({ ...request, id } as LauncherRequest);
    return id;
  }

  /** Closes the channel: the launcher exits. */
  close(): void {
    if (!this.gone && this.child.connected) this.child.disconnect();
  }

  kill(id: number, signal: NodeJS.Signals): void {
    if (this.pending.has(id) && !this.gone) this.child.send({ op: "kill", id, signal });
  }

  /** No more replies to `id` are wanted. */
  release(id: number): void {
    if (this.pending.delete(id) && this.pending.size === 0) this.idle();
  }

  private busy(): void {
    this.child.ref();
    (this.child.channel as { ref?(): void } | undefined)?.ref?.();
  }

  private idle(): void {
    this.child.unref();
    (this.child.channel as { unref?(): void } | undefined)?.unref?.();
  }

  /** The launcher died: what waited for it fails. */
  private lost(): void {
    if (this.gone) return;
    this.gone = true;
    const waiting = [...this.pending];
    this.pending.clear();
    for (const [id, onReply] of waiting) onReply({ id, type: "failed", message: LOST, code: null });
  }
}

const LOST = "the launcher process exited while the command ran";

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/** node's arguments starting the launcher: compiled, or from TypeScript sources (tsx, vitest). */
function entryArgs(): string[] {
  if (import.meta.url.endsWith(".ts"))
    return [
      "--import",
      import.meta.resolve("tsx"),
      fileURLToPath(new URL("./launcher-process.ts", import.meta.url)),
    ];
  return [fileURLToPath(new URL("./launcher-process.js", import.meta.url))];
}

/*
 * The process's launcher: process-wide by nature (one helper per service process), as the
 * indexer's worker pool is. Undefined until first use; `retryAt` while it could not start.
 */
let current: { launcher?: Promise<Launcher | undefined>; retryAt: number } = { retryAt: 0 };

/** The running launcher, started if need be; undefined: start commands directly. */
async function launcher(): Promise<Launcher | undefined> {
  const pending = current.launcher;
  const found = await pending;
  // Another call started a new one meanwhile: that one.
  if (current.launcher !== pending) return launcher();
  if (found?.alive) return found;
  if (pending && !found && Date.now() < current.retryAt) return undefined;
  const starting = Launcher.start().catch(() => {
    current.retryAt = Date.now() + RETRY_AFTER_MS;
    return undefined;
  });
  current = { launcher: starting, retryAt: 0 };
  return starting;
}

function abortError(signal: AbortSignal): Error {
  return Object.assign(new Error("The operation was aborted", { cause: signal.reason }), {
    name: "AbortError",
    code: "ABORT_ERR",
  });
}

function execError(
  reply: Extract<LauncherReply, { type: "done" }> | Extract<LauncherReply, { type: "failed" }>,
): ExecError {
  if (reply.type === "failed")
    return Object.assign(new Error(reply.message), { code: reply.code, stdout: "", stderr: "" });
  const { message, ...fields } = reply.error!;
  return Object.assign(new Error(message), fields, { stdout: reply.stdout, stderr: reply.stderr });
}

/**
 * Runs `file` with `args` as child_process.execFile would (utf8 output, the same error), from
 * the launcher.
 */
export async function execFileAsync(
  file: string,
  args: readonly string[],
  options: ExecOptions = {},
): Promise<ExecResult> {
  const { signal } = options;
  if (signal?.aborted) throw abortError(signal);
  const found = await launcher();
  if (!found) return direct(file, args, options);
  return new Promise((resolve, reject) => {
    let settled = false;
    const onAbort = () => {
      if (settled) return;
      settled = true;
      found.kill(id, "SIGTERM");
      // The kill's outcome is not waited for, as execFile does on an abort.
      setTimeout(() => found.release(id), 5_000).unref();
      reject(abortError(signal!));
    };
    const id = found.send(
      {
        op: "exec",
        file,
        args: [...args],
        cwd: options.cwd,
        env: options.env ?? process.env,
        timeout: options.timeout,
        maxBuffer: options.maxBuffer ?? DEFAULT_MAX_BUFFER,
      },
      (reply) => {
        if (reply.type !== "done" && reply.type !== "failed") return;
        found.release(id);
        signal?.removeEventListener("abort", onAbort);
        if (settled) return;
        settled = true;
        if (reply.type === "done" && !reply.error)
          resolve({ stdout: reply.stdout, stderr: reply.stderr });
        else reject(execError(reply));
      },
    );
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** execFileAsync with execFile's callback. */
export function execFile(
  file: string,
  args: readonly string[],
  options: ExecOptions,
  callback: (error: ExecError | null, stdout: string, stderr: string) => void,
): void {
  execFileAsync(file, args, options).then(
    ({ stdout, stderr }) => callback(null, stdout, stderr),
    (error: ExecError) => callback(error, error.stdout ?? "", error.stderr ?? ""),
  );
}

/** Node's own execFile, when there is no launcher. */
function direct(file: string, args: readonly string[], options: ExecOptions): Promise<ExecResult> {
  return new Promise((resolve, reject) => {
    nodeExecFile(
      file,
      args,
      { ...options, encoding: "utf8", maxBuffer: options.maxBuffer ?? DEFAULT_MAX_BUFFER },
      (error, stdout, stderr) => {
        if (error) reject(Object.assign(error, { stdout, stderr }));
        else resolve({ stdout, stderr });
      },
    );
  });
}

/**
 * Starts `file` detached (a process group of its own) with stdio ignored, from the launcher;
 * resolves once it runs, with its pid (the caller signals its group by pid) and its end.
 */
export async function launchDetached(
  file: string,
  args: readonly string[],
  options: { cwd?: string | undefined; env: NodeJS.ProcessEnv },
): Promise<Launched> {
  const found = await launcher();
  if (!found) return spawnDirect(file, args, options);
  return new Promise((resolve, reject) => {
    let pid: number | undefined;
    let ended: (end: { code: number | null; signal: NodeJS.Signals | null }) => void;
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>(
      (done) => (ended = done),
    );
    const id = found.send(
      { op: "spawn", file, args: [...args], cwd: options.cwd, env: options.env },
      (reply) => {
        if (reply.type === "spawned") {
          pid = reply.pid;
          resolve({ pid, exited });
        } else if (reply.type === "exit") {
          found.release(id);
          ended({ code: reply.code, signal: reply.signal });
        } else if (reply.type === "failed") {
          found.release(id);
          if (pid === undefined) return reject(execError(reply));
          // The launcher died: the command cannot be followed any more, so it goes too.
          killGroup(pid, "SIGKILL");
          ended({ code: null, signal: "SIGKILL" });
        }
      },
    );
  });
}

/**
 * Signals the process group led by `pid` (a detached command's). Never throws: it runs in
 * timers, and a group already gone (ESRCH) is the outcome wanted anyway.
 */
export function killGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // gone already, or (EPERM) no longer ours
  }
}

function spawnDirect(
  file: string,
  args: readonly string[],
  options: { cwd?: string | undefined; env: NodeJS.ProcessEnv },
): Promise<Launched> {
  return new Promise((resolve, reject) => {
    const child = nodeSpawn(file, args, { ...options, detached: true, stdio: "ignore" });
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) =>
      child.once("exit", (code, signal) => done({ code, signal })),
    );
    child.once("spawn", () => resolve({ pid: child.pid!, exited }));
    child.once("error", (error) => {
      if (child.pid === undefined) reject(error);
    });
  });
}

/** Stops the launcher (tests; the service's exit ends it by closing the channel). */
export async function stopLauncher(): Promise<void> {
  const found = await current.launcher;
  current = { retryAt: 0 };
  found?.close();
}
