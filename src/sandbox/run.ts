/*
 * The one way the service runs a repository's own commands (verification checks, install
 * steps, the model's `run_command` tool, health-scan test and coverage runs). The repository
 * is untrusted code, and with open sign-up so is its author, so this is a security boundary:
 *
 * - engine `bwrap` (the default): bubblewrap puts the command in its own user, PID, mount,
 *   network, IPC and UTS namespaces with every capability dropped. It sees the working copy
 *   read-write at the fixed path /workspace, its `.git` read-only (so nothing it does can
 *   plant hooks or config for the service's own git), the toolchains read-only, a private
 *   /tmp and HOME, its account's package cache at /cache (sandbox/cache.ts), and nothing
 *   else of the host: not DATA_DIR, not other working copies, not where its own working copy
 *   lives on the host, not the service's checkout, not the service's processes (own /proc),
 *   not the host's loopback (own network namespace with only its own `lo`). When the command
 *   ends or is killed, the PID namespace goes with it, so nothing it started survives.
 *   Memory, processes and file size are bounded with rlimits (prlimit), disk with
 *   TASK_DISK_LIMIT_MB (sandbox/disk.ts).
 * - engine `none`: a plain child process (scrubbed environment, own process group). Only for
 *   operators who trust every repository; refused while OPEN_SIGNUP is on (config/env.ts).
 *
 * In both, the environment is built from scratch (never the service's secrets), the output
 * is bounded and redacted, and a timeout or cancel kills everything the command started.
 */
import { mkdir, mkdtemp, realpath, stat } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { recordSandboxRun } from "../metrics/index.js";
import { execFileAsync, killGroup, launchDetached, type Launched } from "../util/launcher.js";
import { redactText } from "../util/redact.js";
import { volumeFull } from "../workcopy/volume.js";
import { boxedCommand } from "./bwrap.js";
import { diskLimitText, type DiskWatch, watchDisk } from "./disk.js";
import { buildEnv, hasVenv, proxyEnv, sandboxPathVariable } from "./env.js";
import {
  createPidsCgroup,
  fileLimitHit,
  fileLimitMb,
  limitHit,
  pidsLimitHit,
  processLimitText,
  removeCgroup,
} from "./limits.js";
import { networkFailure, SLIRP_HOST } from "./network.js";
import { createCollector, DEFAULT_MAX_OUTPUT, openOutputFifo, type OutputFifo } from "./output.js";
import { removeRunFolders } from "./overlays.js";
import {
  BUILD_CACHE_MOUNT,
  CACHE_MOUNT,
  MIB,
  type SandboxOptions,
  type SandboxResult,
  sandboxSettings,
  VENV_DIR,
  WORKSPACE,
} from "./settings.js";

/** The `exchange` folder's name in the run's /tmp. */
const EXCHANGE_NAME = ".foreman-exchange";
/** Between SIGTERM to the group and SIGKILL. */
const KILL_GRACE_MS = 2_000;
/** After the shell exits, how long leftover holders of the pipes may delay the result. */
const PIPE_GRACE_MS = KILL_GRACE_MS + 500;
export async function assertDirectory(cwd: string): Promise<void> {
  let info;
  try {
    info = await stat(cwd);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? "error";
    throw new Error(`sandbox: working directory ${cwd} is not accessible (${code})`);
  }
  if (!info.isDirectory()) throw new Error(`sandbox: working directory ${cwd} is not a directory`);
}

/** Whether any process of the group led by `pid` is still there. */
export function groupExists(pid: number): boolean {
  try {
    process.kill(-pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * Runs `argv` in `cwd` from the launcher (util/launcher.ts: a fork of the service's whole
 * process would stall it), detached, its output into the FIFO at `fifoPath`. The command
 * writes to a FIFO, stderr joined to stdout (one stream keeps the true order of writes to
 * both). Not Node's "pipe" stdio: that is a socket, and a Node program that prints a lot and
 * then calls process.exit() (tsc, many test runners) loses whatever is still queued for a
 * socket, while pipe writes are synchronous. The shell execs the real one (bwrap, or the
 * command's shell): same pid, so the same process group. bwrap dies with its group on a kill,
 * and its PID namespace with it.
 */
async function startCommand(
  fifoPath: string,
  cgroup: string | undefined,
  argv: string[],
  cwd: string,
  env: NodeJS.ProcessEnv,
): Promise<Launched> {
  try {
    return await launchDetached(
      "/bin/sh",
      [
        "-c",
        // Joins the run's cgroup (when there is one) before anything of the command starts:
        // `0` to `tasks` moves the shell's one thread (so the process, and all it starts),
        // which the kernel does without the global lock a pid written to `cgroup.procs`
        // takes, whose RCU grace period cost 5-10 ms before every command (25 on a busy host).
        'out=$1; cg=$2; shift 2; if [ -n "$cg" ]; then echo 0 > "$cg/tasks" || exit 125; fi; exec >"$out" 2>&1; exec "$@"',
        "sh",
        fifoPath,
        cgroup ?? "",
        ...argv,
      ],
      { cwd, env },
    );
  } catch (error) {
    throw new Error(`sandbox: could not run command: ${redactText((error as Error).message)}`);
  }
}

/**
 * The command's environment: the scrubbed base (HOME, the cache) with the proxy's, the
 * caller's and an exchange folder's variables, the kept build outputs (GOCACHE), the
 * sandbox's /tmp and PATH, and the working copy's virtualenv; with the exchange folder (on
 * the host), when the run has one.
 */
async function commandEnv(
  run: string,
  cwd: string,
  options: SandboxOptions,
  at: { boxed: boolean; home: string; cacheSeen: string; buildDir: string | undefined },
): Promise<{ env: NodeJS.ProcessEnv; exchangeDir: string | undefined }> {
  const { boxed, buildDir } = at;
  const exchangeDir = options.exchange
    ? path.join(run, ...(boxed ? ["tmp", EXCHANGE_NAME] : [EXCHANGE_NAME]))
    : undefined;
  if (exchangeDir) await mkdir(exchangeDir);
  const env = buildEnv(at.home, at.cacheSeen, {
    ...(options.proxy ? proxyEnv(boxed ? SLIRP_HOST : "127.0.0.1", options.proxy.port) : {}),
    ...options.env,
    ...(exchangeDir
      ? await options.exchange?.prepare(exchangeDir, boxed ? `/tmp/${EXCHANGE_NAME}` : exchangeDir)
      : {}),
  });
  // Kept build outputs: a run compiles only what changed (cache.ts, withBuildCache).
  if (buildDir && !options.env?.GOCACHE)
    env.GOCACHE = path.join(boxed ? BUILD_CACHE_MOUNT : buildDir, "go-build");
  if (boxed) {
    env.TMPDIR = "/tmp";
    env.PATH = sandboxPathVariable(env.PATH ?? "");
  }
  if (await hasVenv(cwd)) {
    const venv = path.join(boxed && options.mount !== "host" ? WORKSPACE : cwd, VENV_DIR);
    env.VIRTUAL_ENV = venv;
    env.PATH = `${venv}/bin:${env.PATH ?? ""}`;
  }
  return { env, exchangeDir };
}

/**
 * Runs `command` with /bin/sh in `cwd` under a scrubbed environment and a time limit; the
 * whole process group is killed on timeout, abort, past the disk budget, or once the shell
 * itself has exited.
 */
export async function runSandboxed(
  command: string,
  options: SandboxOptions,
): Promise<SandboxResult> {
  if (options.timeBudget) {
    const { timeBudget, ...rest } = options;
    return timeBudget.run(command, rest, (within) => runSandboxed(command, within));
  }
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

  // A fresh HOME (and, sandboxed, /tmp) per run rather than the cwd's parent: that parent
  // is the workspace area other checkouts live in, and tools write dotfiles (~/.npmrc,
  // ~/.gitconfig, shell history, config dirs) that would leak between runs and tasks. What
  // is worth keeping across runs, the package cache, is the account's own folder (or, without
  // one, an empty folder of this run). The run folder is in the OS temp dir, never under
  // DATA_DIR; inside bwrap its tmp/ is /tmp and /tmp/home is HOME, and the output FIFO and
  // the overlay mount points beside them are not mounted.
  const run = await mkdtemp(path.join(os.tmpdir(), "foreman-run-"));
  let output: OutputFifo | undefined;
  let cgroup: string | undefined;
  const scratch: string[] = [];
  let watch: DiskWatch | undefined;
  try {
    const boxed = sandboxSettings().engine === "bwrap";
    const cwd = await realpath(options.cwd);
    const diskLimitMb = options.diskLimitMb ?? sandboxSettings().diskLimitMb;
    const cacheDir = options.cache
      ? await realpath(options.cache.dir)
      : path.join(run, "scratch-cache");
    if (!options.cache) await mkdir(cacheDir);
    const cacheReadOnly = options.cache?.readOnly === true;
    const buildDir = options.cache?.build ? await realpath(options.cache.build) : undefined;
    // Where the run's writes to a read-only cache land (watched for the disk budget).
    let cacheWrites: string | undefined;
    let home = path.join(run, "home");
    let cacheSeen = cacheDir;
    let argv = ["/bin/sh", "-c", command];
    if (boxed) {
      home = "/tmp/home";
      cacheSeen = CACHE_MOUNT;
      const boxedRun = await boxedCommand(run, cwd, options, {
        cacheDir,
        buildDir,
        diskLimitMb,
        scratch,
        argv,
      });
      argv = boxedRun.argv;
      cacheWrites = boxedRun.cacheWrites;
      cgroup = await createPidsCgroup(sandboxSettings().maxProcs);
    } else {
      await mkdir(home);
      // Unsandboxed, a read-only cache is a copy of the run's own (it goes with the run).
      if (options.cache && cacheReadOnly) {
        cacheSeen = path.join(run, "cache-copy");
        await execFileAsync("cp", ["-a", "--reflink=auto", "--", `${cacheDir}/.`, cacheSeen]);
      }
    }
    const { env, exchangeDir } = await commandEnv(run, cwd, options, {
      boxed,
      home,
      cacheSeen,
      buildDir,
    });
    const fifo = (output = await openOutputFifo(path.join(run, ".output")));
    // What the run can write to: the working copy, the run folder (its /tmp and HOME) and a
    // writable cache.
    const watched = [
      options.budgetRoot ?? cwd,
      run,
      ...(cacheReadOnly || !options.cache ? [] : [cacheDir]),
      ...(cacheWrites ? [cacheWrites] : []),
      ...(buildDir ? [buildDir] : []),
    ];
    const child = await startCommand(fifo.path, cgroup, argv, cwd, env);
    const result = await new Promise<SandboxResult>((resolve) => {
      const collector = createCollector(options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT);
      let outputClosed = false;
      let exited = false;
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
        if (terminating) return;
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
      const onHeartbeat = options.onHeartbeat;
      const heartbeat = onHeartbeat
        ? setInterval(() => {
            if (!exited) onHeartbeat(Math.round(performance.now() - started));
          }, sandboxSettings().heartbeatMs)
        : undefined;
      heartbeat?.unref();
      options.signal?.addEventListener("abort", onAbort, { once: true });
      // Aborted while the sandbox was being set up (after the check at the start): the event
      // has fired already and will not again.
      if (options.signal?.aborted) onAbort();
      if (diskLimitMb > 0)
        watch = watchDisk({
          paths: watched,
          key: JSON.stringify([options.budgetRoot ?? cwd, options.cache?.dir ?? null]),
          rootPid: pid,
          limitBytes: diskLimitMb * MIB,
          // Past the budget: stopped like a timeout, whole group and PID namespace.
          onExceeded: () => terminate(),
        });

      function cleanup(): void {
        clearTimeout(deadline);
        clearInterval(heartbeat);
        clearTimeout(pipeTimer);
        options.signal?.removeEventListener("abort", onAbort);
      }

      async function finish(): Promise<void> {
        if (settled) return;
        settled = true;
        cleanup();
        // One last measurement: what the command wrote since the previous one counts too.
        await watch?.finish();
        const text = collector.text();
        let disk = watch?.exceededBytes;
        const fileCap = boxed ? fileLimitMb(diskLimitMb) : 0;
        // A working copy on a volume of the budget's size that is full: the kernel stopped
        // the command's writes there (workcopy/volume.ts).
        if (
          disk === undefined &&
          boxed &&
          diskLimitMb > 0 &&
          exitCode !== 0 &&
          (await volumeFull(options.budgetRoot ?? cwd))
        )
          disk = diskLimitMb * MIB;
        // A single file as large as the budget is past it (RLIMIT_FSIZE stopped the write).
        if (
          disk === undefined &&
          boxed &&
          diskLimitMb > 0 &&
          fileCap === diskLimitMb &&
          fileLimitHit(exitCode, text)
        )
          disk = diskLimitMb * MIB;
        const ok = exitCode === 0 && !timedOut && !aborted && disk === undefined;
        const limit =
          disk !== undefined
            ? diskLimitText(diskLimitMb, disk)
            : boxed && !ok && !timedOut && !aborted
              ? pidsLimitHit(cgroup)
                ? processLimitText()
                : (networkFailure(
                    exitCode,
                    text,
                    options.proxy ? "the setup step's network, SANDBOX_SETUP_ALLOW" : undefined,
                  ) ?? limitHit(exitCode, text))
              : undefined;
        recordSandboxRun(
          timedOut
            ? "timeout"
            : aborted
              ? "aborted"
              : disk !== undefined
                ? "disk_limit"
                : exitCode === 0
                  ? "ok"
                  : "failed",
          performance.now() - started,
        );
        resolve({
          command: shown,
          exitCode,
          signal: exitSignal,
          timedOut,
          aborted,
          durationMs: Math.round(performance.now() - started),
          output: text,
          ok,
          ...(limit ? { limit } : {}),
          ...(disk !== undefined ? { disk: { limitMb: diskLimitMb, usedBytes: disk } } : {}),
          ...(watch ? { diskWatch: watch.stats } : {}),
        });
      }

      fifo.reader.on("data", (chunk: Buffer) => collector.push(chunk));
      fifo.reader.on("error", () => undefined);
      fifo.reader.on("close", () => {
        outputClosed = true;
        if (exited) void finish();
      });
      void child.exited.then(({ code, signal }) => {
        exitCode = code;
        exitSignal = signal;
        exited = true;
        clearInterval(heartbeat);
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
          void finish();
        }, PIPE_GRACE_MS);
        if (outputClosed) void finish();
      });
    });
    if (exchangeDir) await options.exchange?.collect(exchangeDir);
    return result;
  } finally {
    watch?.cancel();
    output?.close();
    await removeRunFolders(run, scratch);
    // In the background: the PID namespace dies asynchronously, and the result need not wait.
    void removeCgroup(cgroup);
  }
}
