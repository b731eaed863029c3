/*
 * The one way the service runs a repository's own commands (verification checks, install
 * steps, the model's `run_command` tool). The repository is untrusted code, so the child
 * gets an environment built from scratch (never the service's secrets), its own process
 * group (so a timeout or cancel kills everything it started), a bounded and redacted
 * output, and a fresh HOME. This is containment of accidents and leaks, not a security
 * boundary against hostile code: the child still runs as the service's user.
 */
import { execFile, spawn } from "node:child_process";
import { closeSync, constants as fsConstants, openSync } from "node:fs";
import { Socket } from "node:net";
import { promisify } from "node:util";
import { mkdir, mkdtemp, rm, stat } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { redactText } from "./redact.js";

export type SandboxOptions = {
  cwd: string;
  timeoutMs: number;
  signal?: AbortSignal;
  /** Bytes of output kept (head and tail); 64 KiB by default. */
  maxOutputBytes?: number;
  /** Extra variables (e.g. CI=true); secret-looking names are dropped. */
  env?: Record<string, string>;
};

export type SandboxResult = {
  /** The command as run, redacted (it ends up in logs and task events). */
  command: string;
  exitCode: number | null;
  signal: string | null;
  timedOut: boolean;
  aborted: boolean;
  durationMs: number;
  /** stdout and stderr interleaved in write order, trimmed and redacted. */
  output: string;
  ok: boolean;
};

const DEFAULT_MAX_OUTPUT = 64 * 1024;
const execFileAsync = promisify(execFile);
/** Between SIGTERM to the group and SIGKILL. */
const KILL_GRACE_MS = 2_000;
/** After the shell exits, how long leftover holders of the pipes may delay the result. */
const PIPE_GRACE_MS = KILL_GRACE_MS + 500;
/**
 * Context kept beyond each cut of the output so a secret crossing a cut is still seen whole
 * by the redactor (PEM private keys are the longest, about 3.3 KiB for RSA-4096).
 */
const REDACT_MARGIN = 8 * 1024;

/*
 * Names never passed to the child, even from `options.env`: the service's own configuration
 * (model keys, GitHub App credentials, database URI, webhook secret) and anything named like
 * a credential. Matched case-insensitively; over-blocking a harmless `MONKEY` is the price.
 */
const BLOCKED_ENV =
  /^(LLM_|ANTHROPIC_|OPENAI_|GITHUB|APP_ID$|PRIVATE_KEY$|WEBHOOK_SECRET$|MONGODB_URI$)|TOKEN|SECRET|KEY|PASSWORD/i;

/** True when a variable of this name may never reach a sandboxed command. */
function isBlockedEnvName(name: string): boolean {
  return BLOCKED_ENV.test(name);
}

let cacheRoot: Promise<string> | undefined;

/*
 * Package caches shared by every run, so a second install of the same dependencies is
 * served from disk (and works offline). Under XDG_CACHE_HOME when the service has one
 * (survives reboots), else the OS temp dir. Shared caches are a channel between tasks;
 * npm and Go verify cached content by checksum, which is why sharing them is acceptable.
 */
function sharedCacheRoot(): Promise<string> {
  cacheRoot ??= (async () => {
    const root = path.join(process.env.XDG_CACHE_HOME || os.tmpdir(), "foreman-sandbox-cache");
    await mkdir(root, { recursive: true });
    return root;
  })();
  return cacheRoot;
}

function buildEnv(
  home: string,
  cache: string,
  extra: Record<string, string> = {},
): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin",
    HOME: home,
    LANG: "C.UTF-8",
    TERM: "dumb",
    CI: "true",
    NO_COLOR: "1",
    npm_config_update_notifier: "false",
    npm_config_cache: path.join(cache, "npm"),
    GOCACHE: path.join(cache, "go-build"),
    GOPATH: path.join(cache, "go"),
    XDG_CACHE_HOME: path.join(cache, "xdg"), // pip, yarn and most others follow XDG
  };
  // Callers may override the defaults above (a different PATH, CI=false) but never pass a
  // secret-looking name: those are dropped silently, because the service's own credentials
  // must not cross into repository code whatever a caller or configuration asks.
  for (const [name, value] of Object.entries(extra)) {
    if (!isBlockedEnvName(name)) env[name] = value;
  }
  return env;
}

async function assertDirectory(cwd: string): Promise<void> {
  let info;
  try {
    info = await stat(cwd);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? "error";
    throw new Error(`sandbox: working directory ${cwd} is not accessible (${code})`);
  }
  if (!info.isDirectory()) throw new Error(`sandbox: working directory ${cwd} is not a directory`);
}

/** Signals a whole process group. Never throws: it runs in timers, and a group that is
 * already gone (ESRCH) is the outcome wanted anyway. */
function killGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // gone already, or (EPERM) no longer ours
  }
}

function groupExists(pid: number): boolean {
  try {
    process.kill(-pid, 0);
    return true;
  } catch {
    return false;
  }
}

type OutputCollector = {
  push(chunk: Buffer): void;
  text(): string;
};

/*
 * Keeps the first headCap and the last tailCap bytes (plus REDACT_MARGIN each) of a stream,
 * in constant memory, and renders them redacted with an omission marker between.
 */
function createCollector(maxBytes: number): OutputCollector {
  const headCap = Math.floor(maxBytes / 4);
  const tailCap = maxBytes - headCap;
  const head: Buffer[] = [];
  let headBytes = 0;
  const tail: Buffer[] = [];
  let tailBytes = 0;
  let total = 0;

  function push(chunk: Buffer): void {
    total += chunk.length;
    const room = headCap + REDACT_MARGIN - headBytes;
    if (room > 0) {
      const part = chunk.subarray(0, room);
      head.push(part);
      headBytes += part.length;
    }
    // The tail window sees every byte, including those also in the head, so that the kept
    // tail can start inside the head window when the output is only slightly too long.
    tail.push(chunk);
    tailBytes += chunk.length;
    const limit = tailCap + REDACT_MARGIN;
    while (tailBytes > limit) {
      const first = tail[0];
      if (!first) break;
      const excess = tailBytes - limit;
      if (first.length <= excess) {
        tail.shift();
        tailBytes -= first.length;
      } else {
        tail[0] = first.subarray(excess);
        tailBytes -= excess;
      }
    }
  }

  function text(): string {
    const headBuf = Buffer.concat(head);
    const tailBuf = Buffer.concat(tail);
    if (total <= maxBytes) {
      const rest = tailBuf.subarray(tailBuf.length - (total - headBuf.length));
      return redactText(Buffer.concat([headBuf, rest]).toString("utf8"));
    }
    // Cut on UTF-8 character boundaries so no replacement characters appear at the seams.
    let headCut = Math.min(headCap, headBuf.length);
    while (headCut > 0 && isContinuation(headBuf[headCut])) headCut--;
    let tailCut = Math.max(0, tailBuf.length - tailCap);
    while (tailCut < tailBuf.length && isContinuation(tailBuf[tailCut])) tailCut++;

    // Redact each kept part both alone and with the margin beyond its cut, and keep only
    // where the two agree: a secret crossing the cut is whole (so redacted) in the wider
    // version and partial in the narrow one, so the part ends just before it.
    const headNarrow = redactText(headBuf.subarray(0, headCut).toString("utf8"));
    const headWide = redactText(headBuf.toString("utf8"));
    const headText = headNarrow.slice(0, commonPrefixLength(headNarrow, headWide));
    const tailNarrow = redactText(tailBuf.subarray(tailCut).toString("utf8"));
    const tailWide = redactText(tailBuf.toString("utf8"));
    const tailText = tailNarrow.slice(tailNarrow.length - commonSuffixLength(tailNarrow, tailWide));

    const omitted = total - headCut - (tailBuf.length - tailCut);
    return `${headText}\n[… ${omitted} bytes omitted …]\n${tailText}`;
  }

  return { push, text };
}

function isContinuation(byte: number | undefined): boolean {
  return byte !== undefined && (byte & 0xc0) === 0x80;
}

function commonPrefixLength(a: string, b: string): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}

function commonSuffixLength(a: string, b: string): number {
  let i = 0;
  while (i < a.length && i < b.length && a[a.length - 1 - i] === b[b.length - 1 - i]) i++;
  return i;
}

/**
 * Runs `command` with /bin/sh in `cwd` under a scrubbed environment and a time limit; the
 * whole process group is killed on timeout, abort, or once the shell itself has exited.
 */
export async function runSandboxed(
  command: string,
  options: SandboxOptions,
): Promise<SandboxResult> {
  await assertDirectory(options.cwd);
  const shown = redactText(command);
  const started = performance.now();
  if (options.signal?.aborted) {
    return {
      command: shown,
      exitCode: null,
      signal: null,
      timedOut: false,
      aborted: true,
      durationMs: 0,
      output: "",
      ok: false,
    };
  }

  // A fresh HOME per run rather than the cwd's parent: that parent is the workspace area
  // other checkouts live in, and tools write dotfiles (~/.npmrc, ~/.gitconfig, shell
  // history, config dirs) that would leak between runs and tasks. What is worth keeping
  // across runs, the package caches, is pointed at shared directories explicitly.
  const home = await mkdtemp(path.join(os.tmpdir(), "foreman-home-"));
  let output: OutputFifo | undefined;
  try {
    const env = buildEnv(home, await sharedCacheRoot(), options.env);
    const fifo = (output = await openOutputFifo(path.join(home, ".output")));
    return await new Promise<SandboxResult>((resolve, reject) => {
      const collector = createCollector(options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT);
      let outputClosed = false;
      let exited = false;
      // The command writes to a FIFO, stderr joined to stdout (one stream keeps the true
      // order of writes to both). Not Node's "pipe" stdio: that is a socket, and a Node
      // program that prints a lot and then calls process.exit() (tsc, many test runners)
      // loses whatever is still queued for a socket, while pipe writes are synchronous. The
      // shell execs the real one: same pid, so the same process group.
      const child = spawn(
        "/bin/sh",
        ["-c", 'exec >"$2" 2>&1; exec /bin/sh -c "$1"', "sh", command, fifo.path],
        {
          cwd: options.cwd,
          env,
          detached: true,
          stdio: "ignore",
        },
      );
      const pid = child.pid;

      let timedOut = false;
      let aborted = false;
      let exitCode: number | null = null;
      let exitSignal: string | null = null;
      let settled = false;
      let terminating = false;
      let pipeTimer: NodeJS.Timeout | undefined;

      // SIGTERM first so tools can clean up, SIGKILL for whatever ignores it. The SIGKILL
      // timer is not cleared when the result is ready: stragglers that let go of the pipes
      // but ignore SIGTERM are still killed.
      function terminate(): void {
        if (pid === undefined || terminating) return;
        terminating = true;
        if (!groupExists(pid)) return;
        killGroup(pid, "SIGTERM");
        setTimeout(() => {
          if (groupExists(pid)) killGroup(pid, "SIGKILL");
        }, KILL_GRACE_MS).unref();
      }

      function onAbort(): void {
        aborted = true;
        terminate();
      }

      const deadline = setTimeout(() => {
        timedOut = true;
        terminate();
      }, options.timeoutMs);
      options.signal?.addEventListener("abort", onAbort, { once: true });

      function cleanup(): void {
        clearTimeout(deadline);
        clearTimeout(pipeTimer);
        options.signal?.removeEventListener("abort", onAbort);
      }

      function finish(): void {
        if (settled) return;
        settled = true;
        cleanup();
        resolve({
          command: shown,
          exitCode,
          signal: exitSignal,
          timedOut,
          aborted,
          durationMs: Math.round(performance.now() - started),
          output: collector.text(),
          ok: exitCode === 0 && !timedOut && !aborted,
        });
      }

      fifo.reader.on("data", (chunk: Buffer) => collector.push(chunk));
      fifo.reader.on("error", () => undefined);
      fifo.reader.on("close", () => {
        outputClosed = true;
        if (exited) finish();
      });
      child.on("error", (error) => {
        if (settled) return;
        settled = true;
        cleanup();
        if (pid !== undefined) killGroup(pid, "SIGKILL");
        reject(new Error(`sandbox: could not run command: ${redactText(error.message)}`));
      });
      child.on("exit", (code, signal) => {
        exitCode = code;
        exitSignal = signal;
        exited = true;
        // Our own writer kept the FIFO from reporting end-of-file before the command opened
        // it; from now on only the command's leftovers can hold it open.
        fifo.closeWriter();
        // Finished in time: a deadline or cancel while the pipes drain changes nothing.
        clearTimeout(deadline);
        options.signal?.removeEventListener("abort", onAbort);
        // The command is over when its shell is: background processes it left behind would
        // hold the pipes open (and run on unsupervised), so the group goes too, and the pipes
        // get a bounded time to drain.
        terminate();
        pipeTimer = setTimeout(() => {
          fifo.reader.destroy();
          finish();
        }, PIPE_GRACE_MS);
        if (outputClosed) finish();
      });
    });
  } finally {
    output?.close();
    await rm(home, { recursive: true, force: true }).catch(() => undefined);
  }
}

interface OutputFifo {
  path: string;
  reader: Socket;
  closeWriter(): void;
  close(): void;
}

/**
 * A FIFO for the command's output, opened for reading (non-blocking, as a stream) and for
 * writing: without a writer of ours, reading would see end-of-file before the command has
 * opened its end.
 */
async function openOutputFifo(fifoPath: string): Promise<OutputFifo> {
  await execFileAsync("mkfifo", ["-m", "600", fifoPath]);
  const readFd = openSync(fifoPath, fsConstants.O_RDONLY | fsConstants.O_NONBLOCK);
  let writeFd: number | undefined = openSync(
    fifoPath,
    fsConstants.O_WRONLY | fsConstants.O_NONBLOCK,
  );
  const reader = new Socket({ fd: readFd, readable: true, writable: false });
  const closeWriter = () => {
    if (writeFd === undefined) return;
    closeSync(writeFd);
    writeFd = undefined;
  };
  return {
    path: fifoPath,
    reader,
    closeWriter,
    close() {
      closeWriter();
      reader.destroy();
    },
  };
}

function formatDuration(ms: number): string {
  if (ms < 1000) return `${ms} ms`;
  if (ms < 10_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.round(ms / 1000)} s`;
}

/** One line for logs and task errors, e.g. "`npm test` failed with exit code 1 after 3.2 s". */
export function describeResult(result: SandboxResult): string {
  const oneLine = result.command.replace(/\s+/g, " ").trim();
  const name = `\`${oneLine.length > 100 ? `${oneLine.slice(0, 99)}…` : oneLine}\``;
  const after = formatDuration(result.durationMs);
  if (result.timedOut) return `${name} timed out after ${after}`;
  if (result.aborted) return `${name} was cancelled after ${after}`;
  if (result.ok) return `${name} succeeded after ${after}`;
  if (result.exitCode !== null)
    return `${name} failed with exit code ${result.exitCode} after ${after}`;
  return `${name} was killed by ${result.signal ?? "a signal"} after ${after}`;
}
