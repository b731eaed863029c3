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
import { execFileAsync, launchDetached, type Launched } from "../util/launcher.js";
import { randomBytes } from "node:crypto";
import {
  closeSync,
  existsSync,
  constants as fsConstants,
  openSync,
  readFileSync,
  writeFileSync,
} from "node:fs";
import { Socket } from "node:net";
import {
  chmod,
  lstat,
  mkdir,
  mkdtemp,
  readFile,
  readlink,
  realpath,
  rm,
  rmdir,
  stat,
  symlink,
  writeFile,
} from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { bwrapFix, HOST_BWRAP_FIX } from "./container.js";
import { findExecutable } from "../util/executables.js";
import { fileURLToPath } from "node:url";
import { recordSandboxRun } from "../metrics/index.js";
import { redactText } from "../util/redact.js";
import { proxyBinary } from "./setup-proxy.js";
import { STRICT_POLICY, type AddressPolicy } from "./setup-proxy-guard.js";
import {
  DISK_WATCH_MAX_INTERVAL_MS,
  DISK_WATCH_MIN_INTERVAL_MS,
  diskLimitText,
  DiskBudgetError,
  watchDisk,
  type DiskBudgetSubject,
  type DiskWatch,
  type DiskWatchStats,
} from "./disk.js";
import {
  buildCacheMounts,
  OVERLAY_SCRATCH_PREFIX,
  removeTree,
  type SandboxCache,
} from "./cache.js";
import { onVolume, overlayPlace, volumeFull, volumeSupport } from "../workcopy/volume.js";
import {
  NETWORK_FAILED_EXIT,
  NETWORK_FIX,
  networkFailure,
  networkTools,
  proxyNetwork,
  publicNetwork,
  SLIRP_HOST,
  type SandboxNetwork,
} from "./network.js";

export { DiskBudgetError, type SandboxCache };

/** Where a sandboxed command sees its working copy, whatever its folder on the host. */
export const WORKSPACE = "/workspace";
/** Where it sees its package cache (npm, Go, pip, cargo; sandbox/cache.ts). */
export const CACHE_MOUNT = "/cache";
/** Where it sees the build caches of its account and repository (GOCACHE; sandbox-cache.ts). */
export const BUILD_CACHE_MOUNT = "/build-cache";
/**
 * A working copy's Python virtual environment (the setup step's, ecosystems/python.ts): when
 * it holds one, every command there runs with its bin/ first on PATH and VIRTUAL_ENV set, so
 * `python3`, `pip` and `pytest` are the venv's.
 */
export const VENV_DIR = ".venv";
/** The service's own node_modules (c8 for health-scan coverage), read-only. */
export const SERVICE_MODULES_MOUNT = "/foreman/node_modules";

/**
 * Runs a command within a task's time budget (sandbox/command-time.ts `CommandTimeBudget`, which
 * implements it; declared here so the sandbox does not import its caller).
 */
export interface SandboxTimeBudget {
  run(
    command: string,
    options: SandboxOptions,
    run: (options: SandboxOptions) => Promise<SandboxResult>,
  ): Promise<SandboxResult>;
}

export type SandboxOptions = {
  /** The working copy: the command starts in it (at /workspace when sandboxed). */
  cwd: string;
  timeoutMs: number;
  signal?: AbortSignal;
  /** Bytes of output kept (head and tail); 64 KiB by default. */
  maxOutputBytes?: number;
  /** Extra variables (e.g. CI=true); secret-looking names are dropped. */
  env?: Record<string, string>;
  /**
   * The package cache of the task's or scan's account and repository (sandboxCache in
   * sandbox/cache.ts). Without one the run gets an empty cache of its own, removed
   * with the run: nothing is shared.
   */
  cache?: SandboxCache;
  /** TASK_DISK_LIMIT_MB for this run instead of the configured one; 0: not watched. */
  diskLimitMb?: number;
  /**
   * The folder the disk budget counts in place of `cwd`, which is inside it: a base checkout
   * in the working copy's `.git` (verify/baseline.ts) counts with the whole working copy.
   */
  budgetRoot?: string;
  /**
   * The setup step's network (verify/setup.ts) in place of SANDBOX_NETWORK: the command
   * reaches only the setup proxy on the host's loopback at this port (sandbox/setup-proxy.ts),
   * named to it in HTTP_PROXY/HTTPS_PROXY and npm's proxy settings.
   */
  proxy?: { port: number };
  /**
   * Called every `heartbeatMs` (SANDBOX_HEARTBEAT_S, 10 s by default) while the command
   * runs, with the time it has run so far: long installs and test runs show they are alive.
   */
  onHeartbeat?: (elapsedMs: number) => void;
  /**
   * Internal, for the benchmark only: `host` mounts the working copy at its host path (as
   * before /workspace), `bind` skips the overlay that keeps that path out of mountinfo.
   */
  mount?: "workspace" | "bind" | "host";
  /**
   * A folder of the run for files passed between the caller and the command (a test
   * runner's reporter and its report, verify/tests/). `prepare` gets its host path and its
   * path as the command sees it before the command starts and returns variables for the
   * command; `collect` gets the host path once the command has ended, before the folder goes
   * with the run. Sandboxed it is in /tmp: out of the working copy, within the disk budget.
   */
  exchange?: {
    prepare(hostDir: string, innerDir: string): Promise<Record<string, string>>;
    collect(hostDir: string): Promise<void>;
  };
  /** The task's TASK_COMMAND_TIME_LIMIT_S (sandbox/command-time.ts): the run counts against it. */
  timeBudget?: SandboxTimeBudget | undefined;
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
  /**
   * Which sandbox limit most likely ended the command (or that its network could not be
   * brought up), in words; absent when none did.
   */
  limit?: string;
  /** Set when TASK_DISK_LIMIT_MB stopped the command: the limit and what was measured. */
  disk?: { limitMb: number; usedBytes: number };
  /** What measuring the disk cost during this run; absent when it was not watched. */
  diskWatch?: DiskWatchStats;
};

const DEFAULT_MAX_OUTPUT = 64 * 1024;
/** The `exchange` folder's name in the run's /tmp. */
const EXCHANGE_NAME = ".foreman-exchange";
/** Between SIGTERM to the group and SIGKILL. */
const KILL_GRACE_MS = 2_000;
/** After the shell exits, how long leftover holders of the pipes may delay the result. */
const PIPE_GRACE_MS = KILL_GRACE_MS + 500;
/**
 * Context kept beyond each cut of the output so a secret crossing a cut is still seen whole
 * by the redactor (PEM private keys are the longest, about 3.3 KiB for RSA-4096).
 */
const REDACT_MARGIN = 8 * 1024;
/** The sandbox's /dev/shm (memory-backed), at most; half the disk budget when that is less. */
const SHM_MB = 256;

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

export type SandboxEngine = "bwrap" | "none";

export interface SandboxSettings {
  engine: SandboxEngine;
  /**
   * `none`: no network at all; `public`: public hosts only, never the host's loopback, its
   * own addresses or private ranges (sandbox/network.ts; README, "Sandbox").
   */
  network: SandboxNetwork;
  /** RLIMIT_DATA of every process of the command, in MiB. */
  memoryMb: number;
  /** RLIMIT_NPROC inside the sandbox's own user namespace. */
  maxProcs: number;
  /** RLIMIT_FSIZE: the largest file the command may write, in MiB. */
  maxFileMb: number;
  /** Host paths never visible inside, even below a mounted toolchain folder (DATA_DIR). */
  hiddenPaths: string[];
  /**
   * Host folders mounted read-only at their own path besides the usual layout; none by
   * default (tests whose fixtures link to this checkout's node_modules).
   */
  readOnlyPaths: string[];
  /**
   * TASK_DISK_LIMIT_MB: what a run's working copy, temporary files and package cache may
   * take on disk while it runs (sandbox/disk.ts); 0 turns the watcher off.
   */
  diskLimitMb: number;
  /** SANDBOX_HEARTBEAT_S in ms: how often onHeartbeat is called while a command runs. */
  heartbeatMs: number;
  /**
   * What the setup proxy's address guard lets through besides public addresses
   * (SANDBOX_SETUP_ALLOW_ADDRESSES) and the service's own ports it never does.
   */
  setupAddresses: AddressPolicy;
}

/** The service's own checkout (this file is src/util/ or dist/util/ of it): never mounted. */
const SERVICE_ROOT = path.resolve(fileURLToPath(new URL("../..", import.meta.url)));

const DEFAULT_SETTINGS: SandboxSettings = {
  engine: "bwrap",
  network: "none",
  memoryMb: 4096,
  maxProcs: 1024,
  maxFileMb: 1024,
  hiddenPaths: [],
  readOnlyPaths: [],
  diskLimitMb: 2048,
  heartbeatMs: 10_000,
  setupAddresses: STRICT_POLICY,
};

let settings: SandboxSettings = DEFAULT_SETTINGS;
/** The read-only host layout and what it was worked out from (see layoutArgs). */
let layout: { key: string; args: Promise<string[]> } | undefined;

/** Sets the engine and limits for every later run (service start; tests and benchmarks). */
export function configureSandbox(next: Partial<SandboxSettings>): void {
  settings = { ...DEFAULT_SETTINGS, ...next };
}

export function sandboxSettings(): Readonly<SandboxSettings> {
  return settings;
}

/** Tool names whose folders (outside /usr and /opt) are mounted read-only. */
const TOOLCHAIN_COMMANDS = [
  "node",
  "npm",
  "npx",
  "corepack",
  "go",
  "gofmt",
  "python3",
  "python",
  "pip3",
  "pip",
  "cargo",
  "rustc",
];

/** rustup's proxies (~/.cargo/bin/cargo) need its toolchains folder. */
function rustupHome(): string {
  return process.env.RUSTUP_HOME || path.join(os.homedir(), ".rustup");
}

/** Credential files a mounted toolchain folder may hold: covered by an empty file. */
const TOOLCHAIN_CREDENTIALS = ["credentials", "credentials.toml", ".credentials.toml"];

/*
 * What of /etc a toolchain needs: name resolution files (harmless without a network), TLS
 * roots, users and groups (no password hashes: those are in shadow), the dynamic linker's
 * cache, and Debian's alternatives symlinks (cc, python, editor …).
 */
const ETC_ENTRIES = [
  "alternatives",
  "ca-certificates",
  "ca-certificates.conf",
  "ssl",
  "pki",
  "passwd",
  "group",
  "nsswitch.conf",
  "hosts",
  "resolv.conf",
  "localtime",
  "timezone",
  "ld.so.cache",
  "ld.so.conf",
  "ld.so.conf.d",
  "os-release",
  "protocols",
  "services",
  "mime.types",
];

function isInside(child: string, parent: string): boolean {
  const relative = path.relative(parent, child);
  return relative === "" || (!relative.startsWith("..") && !path.isAbsolute(relative));
}

function findOnPath(name: string): Promise<string | undefined> {
  return findExecutable(name);
}

/** The install folder of a tool: the parent of its bin/ (or pyenv's shims/), else its folder. */
function toolRoot(file: string): string {
  const dir = path.dirname(file);
  return ["bin", "sbin", "shims"].includes(path.basename(dir)) ? path.dirname(dir) : dir;
}

/*
 * The read-only part of the sandbox, the same for every run: /usr (with /usr/local: Go,
 * Node), the merged-/usr symlinks, /opt, a few /etc files, and the install folders of the
 * toolchains on the service's PATH (e.g. ~/.pyenv), found from where they really are rather
 * than from a list of this machine's paths. A folder that would expose DATA_DIR, the
 * service's checkout or the service user's whole home is not mounted; a hidden path below a
 * mounted folder is covered by an empty tmpfs.
 */
async function hostLayout(hidden: string[]): Promise<string[]> {
  const args: string[] = ["--ro-bind", "/usr", "/usr"];
  const mounted = ["/usr"];
  for (const top of ["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"]) {
    const info = await lstat(top).catch(() => undefined);
    if (!info) continue;
    if (info.isSymbolicLink()) args.push("--symlink", await readlink(top), top);
    else if (info.isDirectory()) {
      args.push("--ro-bind", top, top);
      mounted.push(top);
    }
  }
  for (const entry of ETC_ENTRIES) {
    const file = path.join("/etc", entry);
    if (await lstat(file).catch(() => undefined)) args.push("--ro-bind-try", file, file);
  }
  if (await stat("/opt").catch(() => undefined)) {
    args.push("--ro-bind", "/opt", "/opt");
    mounted.push("/opt");
  }
  const home = path.resolve(os.homedir());
  const roots = new Set<string>();
  for (const name of TOOLCHAIN_COMMANDS) {
    const found = await findOnPath(name);
    if (!found) continue;
    const real = await realpath(found).catch(() => found);
    for (const root of [toolRoot(found), toolRoot(real)]) {
      if (mounted.some((m) => isInside(root, m))) continue;
      // Nor a folder inside a hidden one: the service's own node_modules/.bin is on PATH under
      // npm (`node` there is a link to the Node the set-up provides), and mounting it would
      // show the checkout's path and its tools; the link's real folder is mounted instead.
      const exposes =
        root === "/" || root === home || hidden.some((h) => isInside(h, root) || isInside(root, h));
      if (!exposes) roots.add(root);
    }
  }
  if (roots.size > 0 && (await stat(rustupHome()).catch(() => undefined))) {
    const rustup = path.resolve(rustupHome());
    if (rustup !== home && !hidden.some((h) => isInside(h, rustup))) roots.add(rustup);
  }
  for (const root of [...roots].sort()) {
    if (mounted.some((m) => isInside(root, m))) continue;
    args.push("--ro-bind", root, root);
    mounted.push(root);
    for (const name of TOOLCHAIN_CREDENTIALS) {
      const file = path.join(root, name);
      if (await lstat(file).catch(() => undefined)) args.push("--ro-bind", "/dev/null", file);
    }
  }
  for (const h of hidden) {
    if (mounted.some((m) => isInside(h, m))) args.push("--tmpfs", h);
  }
  return args;
}

function hiddenPaths(): string[] {
  return [SERVICE_ROOT, ...settings.hiddenPaths.map((p) => path.resolve(p))];
}

/*
 * Cached while what it depends on stays the same (the hidden paths, PATH, HOME, RUSTUP_HOME):
 * the layout walks PATH and stats every toolchain folder, a few milliseconds that every
 * command would otherwise pay again.
 */
function layoutArgs(): Promise<string[]> {
  const hidden = hiddenPaths();
  const key = JSON.stringify([hidden, process.env.PATH, os.homedir(), rustupHome()]);
  if (layout?.key !== key) layout = { key, args: hostLayout(hidden) };
  return layout.args;
}

/*
 * The sandbox's user: the service's own uid, or 1000 when the service runs as root (a
 * non-root uid inside keeps the kernel from handing capabilities back on exec). Files the
 * command writes still belong to the service's user on the host.
 */
function sandboxIds(): { uid: number; gid: number } {
  const uid = process.getuid?.() ?? 1000;
  const gid = process.getgid?.() ?? 1000;
  return uid === 0 ? { uid: 1000, gid: 1000 } : { uid, gid };
}

const MIB = 1024 * 1024;

/** The sandbox's /dev/shm in MiB: SHM_MB, or half the disk budget when that is smaller. */
function shmLimitMb(diskLimitMb: number): number {
  return diskLimitMb > 0 ? Math.min(SHM_MB, Math.max(1, Math.floor(diskLimitMb / 2))) : SHM_MB;
}

/** RLIMIT_FSIZE in MiB: SANDBOX_MAX_FILE_MB, or the disk budget when that is smaller. */
function fileLimitMb(diskLimitMb: number): number {
  return diskLimitMb > 0 ? Math.min(settings.maxFileMb, diskLimitMb) : settings.maxFileMb;
}

/** prlimit in front of the command: the memory, process and file-size limits. */
function limitArgs(diskLimitMb: number): string[] {
  return [
    "prlimit",
    `--data=${settings.memoryMb * MIB}`,
    `--nproc=${settings.maxProcs}`,
    `--fsize=${fileLimitMb(diskLimitMb) * MIB}`,
    "--",
  ];
}

/** What bwrap mounts for one run, as paths where bwrap runs (see runSandboxed). */
interface RunMounts {
  /** The working copy to mount: the overlay's mount point, or the host folder. */
  workspace: string;
  /**
   * The working copy's folder on the host, to look at before bwrap starts (the overlay's
   * mount point is still an empty folder then).
   */
  hostWorkspace: string;
  /** Where the command sees it: WORKSPACE, or (benchmark only) the host path. */
  workspaceAt: string;
  /** The run's private /tmp (HOME is /tmp/home). */
  tmp: string;
  /** The package cache, mounted at CACHE_MOUNT. */
  cache?: { source: string; readOnly: boolean } | undefined;
  /** The build caches (writable), mounted at BUILD_CACHE_MOUNT. */
  build?: string | undefined;
  /** The service's node_modules as mounted (a read-only overlay's mount point), if prepared. */
  modules?: string | undefined;
  diskLimitMb: number;
}

/**
 * bwrap and its arguments, up to the `--` before the command. `network`: options of the
 * public network (sandbox/network.ts), mounted last.
 */
async function bwrapArgs(mounts: RunMounts, network: string[] = []): Promise<string[]> {
  const { uid, gid } = sandboxIds();
  const shmMb = shmLimitMb(mounts.diskLimitMb);
  const args = [
    "bwrap",
    "--unshare-all",
    "--unshare-user",
    "--uid",
    String(uid),
    "--gid",
    String(gid),
    "--disable-userns",
    "--cap-drop",
    "ALL",
    "--die-with-parent",
    "--new-session",
    "--hostname",
    "sandbox",
    ...(await layoutArgs()),
    "--proc",
    "/proc",
    "--dev",
    "/dev",
    // A size-capped tmpfs: /dev/shm is memory, and otherwise half of it.
    "--size",
    String(shmMb * MIB),
    "--tmpfs",
    "/dev/shm",
    "--bind",
    mounts.tmp,
    "/tmp",
  ];
  if (mounts.cache)
    args.push(mounts.cache.readOnly ? "--ro-bind" : "--bind", mounts.cache.source, CACHE_MOUNT);
  if (mounts.build) args.push("--bind", mounts.build, BUILD_CACHE_MOUNT);
  args.push("--bind", mounts.workspace, mounts.workspaceAt);
  // The service's own node_modules, read-only at a fixed path: a health scan runs the
  // service's c8 around a repository's tests (src/health/coverage.ts, sandboxPath). Third-party
  // packages only; the rest of the checkout (configuration, .env, data) stays out of sight.
  const modules = path.join(SERVICE_ROOT, "node_modules");
  if (mounts.modules) args.push("--ro-bind", mounts.modules, SERVICE_MODULES_MOUNT);
  else if (await stat(modules).catch(() => undefined))
    args.push("--ro-bind", modules, SERVICE_MODULES_MOUNT);
  for (const extra of settings.readOnlyPaths) args.push("--ro-bind", extra, extra);
  // Read-only over itself: hooks, config (fsmonitor, filters, aliases), info/attributes the
  // service's own git reads later can't be written from inside. A `.git` file (a worktree
  // pointer) is pinned the same way; the folder it points to is not mounted at all.
  if (await lstat(path.join(mounts.hostWorkspace, ".git")).catch(() => undefined))
    args.push(
      "--ro-bind",
      path.join(mounts.workspace, ".git"),
      path.join(mounts.workspaceAt, ".git"),
    );
  // Kept build outputs where their tools look (cargo's target/, jest's cache; sandbox-cache.ts).
  if (mounts.build)
    args.push(
      ...(await buildCacheMounts(mounts.build, mounts.hostWorkspace, mounts.workspaceAt, uid)),
    );
  args.push(...network);
  // bwrap's root is a tmpfs holding the mount points; read-only, so a write "outside" fails
  // loudly instead of landing somewhere that vanishes with the run. /dev too (its device
  // nodes still work): only /dev/shm, capped above, takes files.
  args.push("--remount-ro", "/dev", "--remount-ro", "/", "--chdir", mounts.workspaceAt, "--");
  return args;
}

/*
 * Keeping the working copy's host path out of /proc/self/mountinfo. A bind mount shows its
 * source folder's path (DATA_DIR/work/<task>) there, whatever the mount point is called. An
 * overlay mount shows the option strings it was given instead, so the working copy (and the
 * package cache) is mounted, before bwrap starts, as an overlay whose upper layer is the folder
 * itself and whose lower layer is empty: every read and write goes straight to the folder,
 * nothing is copied. It is mounted in a user and mount namespace of the run's own (util-linux
 * `unshare`, the service's uid as root there, as for the public network), from inside the
 * run folder with relative names, so mountinfo shows `lowerdir=ws.l,upperdir=ws.u,...`.
 * The overlay's scratch folders (an empty lower layer and its work folder) sit beside the
 * folder on the same filesystem, as `.foreman-overlay-<random>`, removed with the run.
 *
 * The service's own node_modules (SERVICE_MODULES_MOUNT) is a read-only overlay of the same
 * kind (the folder and an empty one as its two lower layers, mountinfo shows `mods.l:mods.e`),
 * so the service's checkout path does not show either.
 *
 * All of a run's overlays are mounted by one `mount -a` over an fstab of the run folder (one
 * process: each `mount` costs a few milliseconds of start-up, and a run has three to five).
 * Each mount point holds a marker folder until something is mounted over it; when `mount -a`
 * reports a failure, the names whose marker still shows are mounted one by one as before.
 * The same shell then opens bwrap's options file (see bwrapFromFile) and execs bwrap, so the
 * options need no shell of their own.
 *
 * Writable overlays are `volatile`: without it, taking an overlay down (when the run's last
 * process exits) syncs the whole filesystem of its upper folder, every task's dirty data on
 * it, once per overlay and command (about 15-25 ms a command on a busy host, more under heavy
 * writes). Writes still land in the folder itself as they did and reach the disk with the
 * kernel's normal writeback; only the command's own fsync calls no longer force them there
 * (what a command writes is rebuilt by running it again; the service's own git runs outside).
 * A volatile overlay leaves mode-000 folders in its work folder: openLeftovers makes them
 * removable before the run folder and the scratch folders go.
 *
 * Unprivileged overlay mounts need Linux 5.11+; where the start-up probe finds none, or one
 * mount fails, the folder is bind-mounted as before (at /workspace all the same; only
 * mountinfo then shows its host path). checkSandbox reports which: `<name>.mode` says `bind`
 * for a folder bound, and is absent for an overlay.
 */
/** The fstab of a run's overlays, in the run folder (see MOUNT_SCRIPT). */
const FSTAB = "overlays.fstab";
/** A folder in each overlay's mount point, hidden once the overlay is mounted over it. */
const UNMOUNTED = ".foreman-unmounted";

const MOUNT_SCRIPT = `d=$1; mount=$2; args=$3; shift 3
cd "$d" || exit 125
"$mount" -a -T ./${FSTAB} 2>/dev/null && all=1 || all=
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do
  n=$1; shift
  [ -z "$all" ] && [ -e "$n/${UNMOUNTED}" ] || continue
  o="lowerdir=$n.l,upperdir=$n.u,workdir=$n.w,userxattr,volatile"; b="$n.u"
  # No upper folder: a read-only overlay (two lower layers, the second one empty).
  [ -e "$n.u" ] || { o="lowerdir=$n.l:$n.e"; b="$n.l"; }
  if "$mount" -t overlay overlay -o "$o,uuid=off" "$n" 2>/dev/null || "$mount" -t overlay overlay -o "$o" "$n" 2>/dev/null; then
    :
  elif "$mount" --bind "$b" "$n"; then
    echo bind >"$n.mode"
  else
    echo "foreman-sandbox: could not mount the working copy" >&2; exit 125
  fi
done
shift
if [ -n "$args" ]; then exec 3<"$args" || exit 125; fi
unset PWD OLDPWD
exec "$@"
`;

/**
 * The argv that mounts `overlays` (names of mount points in `run`, prepared by prepareOverlay,
 * layerOver or prepareReadOnlyOverlay) and then runs `command` with bwrap's options file
 * `args` open as descriptor 3 (none: ""). Writes the run's fstab: relative names only, the
 * script runs in `run`.
 */
async function mountArgv(
  run: string,
  tools: OverlayTools,
  overlays: string[],
  args: string,
  command: string[],
): Promise<string[]> {
  const lines = overlays.map((n) => {
    const options = existsSync(path.join(run, `${n}.u`))
      ? `lowerdir=${n}.l,upperdir=${n}.u,workdir=${n}.w,userxattr,volatile`
      : `lowerdir=${n}.l:${n}.e`;
    return `overlay ${n} overlay ${options},uuid=off 0 0\n`;
  });
  // Synchronous, as bwrap's options file: a few hundred bytes in the run folder, where the
  // thread pool's open, write and close would be three round trips before every command.
  writeFileSync(path.join(run, FSTAB), lines.join(""), { mode: 0o600 });
  return [
    "/bin/sh",
    "-c",
    MOUNT_SCRIPT,
    "sh",
    run,
    tools.mount,
    args,
    ...overlays,
    "--",
    ...command,
  ];
}

interface OverlayTools {
  unshare: string;
  mount: string;
}

let overlayProbe: { key: string; result: Promise<OverlayTools | undefined> } | undefined;

/** The tools of the overlay mounts, when this machine can make them; undefined otherwise. */
function overlayTools(): Promise<OverlayTools | undefined> {
  const key = process.env.PATH ?? "";
  if (overlayProbe?.key !== key) overlayProbe = { key, result: probeOverlay() };
  return overlayProbe.result;
}

async function probeOverlay(): Promise<OverlayTools | undefined> {
  const sbin = ["/usr/bin", "/bin", "/usr/sbin", "/sbin"];
  const unshare = await findExecutable("unshare", sbin);
  const mount = await findExecutable("mount", sbin);
  if (!unshare || !mount) return undefined;
  const probe = await mkdtemp(path.join(os.tmpdir(), "foreman-overlay-probe-"));
  try {
    const upper = path.join(probe, "upper");
    const run = path.join(probe, "run");
    await mkdir(upper);
    await mkdir(run);
    const overlay = await prepareOverlay(run, "ws", upper);
    if (!overlay) return undefined;
    const tools = { unshare, mount };
    await execFileAsync(
      unshare,
      [
        "--user",
        "--map-root-user",
        "--mount",
        "--",
        ...(await mountArgv(run, tools, ["ws"], "", ["/bin/true"])),
      ],
      { timeout: 15_000, env: { PATH: process.env.PATH ?? "/usr/bin:/bin" } },
    );
    // No mode file: mounted as an overlay (MOUNT_SCRIPT writes `bind` for a fallback).
    const mode = await readFile(path.join(run, "ws.mode"), "utf8").catch(() => "overlay");
    return mode.trim() === "overlay" ? tools : undefined;
  } catch {
    return undefined;
  } finally {
    await removeTree(probe);
  }
}

/** Folders of an overlay's work folder that the kernel makes mode 000, parents first. */
const WORK_LEFTOVERS = ["work", "work/work", "work/work/incompat", "work/work/incompat/volatile"];

/**
 * Makes what an overlay left in the scratch folder `folder` (its work folder, see
 * prepareOverlay and layerOver) removable by the service's user: as root in its namespace the
 * kernel made them mode 000, which a non-root service cannot read to remove.
 */
async function openLeftovers(folder: string): Promise<void> {
  // Root removes them as they are.
  if (process.getuid?.() === 0) return;
  for (const dir of WORK_LEFTOVERS)
    await chmod(path.join(folder, dir), 0o700).catch(() => undefined);
}

/** Removes a run folder and its overlays' scratch folders (some of them inside it). */
export async function removeRunFolders(run: string, scratch: string[]): Promise<void> {
  await Promise.all(scratch.map(openLeftovers));
  await rm(run, { recursive: true, force: true }).catch(() => undefined);
  await Promise.all(scratch.map((folder) => removeTree(folder).catch(() => undefined)));
}

/** An overlay's mount point `name` in `run`, with MOUNT_SCRIPT's marker (a folder) in it. */
async function mountPoint(run: string, name: string): Promise<void> {
  await mkdir(path.join(run, name, UNMOUNTED), { recursive: true });
}

/**
 * The run folder's side of one overlay mount `name`: its mount point, and links to the
 * upper folder and to scratch folders beside it. Returns the scratch folder (to remove after
 * the run), or undefined when there is no room for one (the folder is then bind-mounted).
 */
async function prepareOverlay(
  run: string,
  name: string,
  upper: string,
): Promise<string | undefined> {
  const place = overlayPlace(upper);
  const scratch = path.join(
    place.scratchParent,
    `${OVERLAY_SCRATCH_PREFIX}${randomBytes(6).toString("hex")}`,
  );
  try {
    await mkdir(scratch, { mode: 0o700 });
    await Promise.all([
      mkdir(path.join(scratch, "lower"), { mode: 0o700 }),
      mkdir(path.join(scratch, "work"), { mode: 0o700 }),
    ]);
  } catch {
    await removeTree(scratch);
    return undefined;
  }
  await Promise.all([
    mountPoint(run, name),
    symlink(place.upper, path.join(run, `${name}.u`)),
    symlink(path.join(scratch, "lower"), path.join(run, `${name}.l`)),
    symlink(path.join(scratch, "work"), path.join(run, `${name}.w`)),
  ]);
  return scratch;
}

/**
 * A read-only folder (a package cache entry, sandbox/cache.ts) made writable for one run
 * without changing it: an overlay with the folder as its lower layer and a scratch folder
 * beside it as the upper one (mounted by MOUNT_SCRIPT as `cache`), or, where this machine
 * has no unprivileged overlays, a copy in that scratch folder. Returns what to mount, the
 * scratch folder (removed after the run) and where the run's writes land.
 */
async function layerOver(
  run: string,
  lower: string,
  tools: OverlayTools | undefined,
): Promise<{ source: string; overlay: boolean; scratch: string; writes: string }> {
  const scratch = path.join(
    path.dirname(lower),
    `${OVERLAY_SCRATCH_PREFIX}${randomBytes(6).toString("hex")}`,
  );
  const upper = path.join(scratch, "upper");
  await mkdir(upper, { recursive: true, mode: 0o700 });
  if (tools) {
    await Promise.all([
      mkdir(path.join(scratch, "work"), { mode: 0o700 }),
      mountPoint(run, "cache"),
      symlink(upper, path.join(run, "cache.u")),
      symlink(lower, path.join(run, "cache.l")),
      symlink(path.join(scratch, "work"), path.join(run, "cache.w")),
    ]);
    return { source: path.join(run, "cache"), overlay: true, scratch, writes: upper };
  }
  await execFileAsync("cp", ["-a", "--reflink=auto", "--", `${lower}/.`, upper]);
  return { source: upper, overlay: false, scratch, writes: upper };
}

/**
 * The run folder's side of a read-only overlay `name` over the host folder `lower` (see
 * MOUNT_SCRIPT: no `.u`, so `lowerdir=name.l:name.e`): nothing is written, nothing to remove
 * but the run folder. Answers the mount point, which bwrap binds.
 */
async function prepareReadOnlyOverlay(run: string, name: string, lower: string): Promise<string> {
  await Promise.all([
    mountPoint(run, name),
    mkdir(path.join(run, `${name}.e`)),
    symlink(lower, path.join(run, `${name}.l`)),
  ]);
  return path.join(run, name);
}

/**
 * The service's node_modules for a run's overlays (appended to `overlays`): its read-only
 * overlay's mount point, or undefined (bound as it is) without overlay tools or the folder.
 */
async function modulesOverlay(
  run: string,
  tools: OverlayTools | undefined,
  overlays: string[],
): Promise<string | undefined> {
  const modules = path.join(SERVICE_ROOT, "node_modules");
  if (!tools || !(await stat(modules).catch(() => undefined))) return undefined;
  overlays.push("mods");
  return prepareReadOnlyOverlay(run, "mods", modules);
}

/** The variables that send a setup run's downloads through the setup proxy. */
function proxyEnv(host: string, port: number): Record<string, string> {
  const url = `http://${host}:${port}`;
  return {
    HTTP_PROXY: url,
    HTTPS_PROXY: url,
    http_proxy: url,
    https_proxy: url,
    npm_config_proxy: url,
    npm_config_https_proxy: url,
    // What is in the cache is used as it is: a second install of the same lockfile asks
    // the registry nothing.
    npm_config_prefer_offline: "true",
    CARGO_HTTP_PROXY: url,
  };
}

/** The heartbeat line of a long command, e.g. "still running `npm ci` (40 s)". */
export function heartbeatLine(command: string, elapsedMs: number): string {
  const oneLine = redactText(command).replace(/\s+/g, " ").trim();
  const name = oneLine.length > 100 ? `${oneLine.slice(0, 99)}…` : oneLine;
  return `still running \`${name}\` (${Math.round(elapsedMs / 1000)} s)`;
}

/*
 * RLIMIT_NPROC binds nobody when the service runs as root (the kernel exempts root's
 * processes, user namespace or not). Where the service may create cgroups (root with the
 * cgroup v1 `pids` controller mounted, as on this project's CI machines), each run also
 * gets a pids cgroup of its own, which counts every process and thread whoever owns it.
 */
const PIDS_CGROUP_ROOT = "/sys/fs/cgroup/pids";

async function createPidsCgroup(max: number): Promise<string | undefined> {
  if (process.getuid?.() !== 0) return undefined;
  const dir = path.join(PIDS_CGROUP_ROOT, `foreman-${process.pid}-${randomSuffix()}`);
  try {
    await mkdir(dir);
  } catch {
    return undefined; // no v1 pids hierarchy here, or not ours to change
  }
  try {
    await writeFile(path.join(dir, "pids.max"), String(max));
    return dir;
  } catch {
    await rmdir(dir).catch(() => undefined);
    return undefined;
  }
}

function randomSuffix(): string {
  return Math.random().toString(36).slice(2, 10);
}

/** True when the cgroup refused a fork (pids.events counts each refusal). */
function pidsLimitHit(dir: string | undefined): boolean {
  if (!dir) return false;
  try {
    return /^max [1-9]/m.test(readFileSync(path.join(dir, "pids.events"), "utf8"));
  } catch {
    return false;
  }
}

/** Removes a run's cgroup once its processes are gone (the PID namespace dies async). */
async function removeCgroup(dir: string | undefined): Promise<void> {
  if (!dir) return;
  for (let i = 0; i < 50; i++) {
    try {
      await rmdir(dir);
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EBUSY") return;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
}

/** What the start-up check found, for the service's log (checkSandbox). */
export interface SandboxReport {
  /** How the working copy reaches /workspace. */
  workspaceMount: "overlay" | "bind" | "host";
  /** How TASK_DISK_LIMIT_MB is enforced, in words. */
  diskBudget: string;
}

/** The disk budget's mechanism, in words (logged at start, docs/operations.md). */
export function diskBudgetMechanism(): string {
  if (settings.diskLimitMb <= 0) return "off (TASK_DISK_LIMIT_MB=0)";
  return (
    `TASK_DISK_LIMIT_MB=${settings.diskLimitMb}: a watcher measures each run's working copy, ` +
    `temporary files and package cache with du every ${DISK_WATCH_MIN_INTERVAL_MS / 1000}-` +
    `${DISK_WATCH_MAX_INTERVAL_MS / 1000} s (and open deleted files) and stops the command past ` +
    `the budget; the kernel caps single files at ${fileLimitMb(settings.diskLimitMb)} MB (RLIMIT_FSIZE)` +
    (settings.engine === "bwrap" ? ` and /dev/shm at ${shmLimitMb(settings.diskLimitMb)} MB` : "")
  );
}

/**
 * Start-up check that the configured engine works here: runs `true` in the same sandbox as
 * a real command (same mounts and limits). Throws an error naming the fix; says how the
 * working copy is mounted and how the disk budget is kept.
 */
export async function checkSandbox(options: { setupProxy?: boolean } = {}): Promise<SandboxReport> {
  const volumes = await volumeSupport();
  const diskBudget =
    settings.diskLimitMb > 0
      ? `${diskBudgetMechanism()}; ${
          volumes.available
            ? `the kernel caps each working copy at ${settings.diskLimitMb} MB (a loop-mounted ext4 volume per task, TASK_DISK_VOLUMES=auto)`
            : `no volume per working copy (${volumes.reason})`
        }`
      : diskBudgetMechanism();
  if (options.setupProxy) {
    // The setup step's allowlist needs its proxy, and (sandboxed) the user-mode network.
    await proxyBinary();
    if (settings.engine === "bwrap")
      await networkTools().catch((error: Error) => {
        throw new Error(
          `${error.message.replace("SANDBOX_NETWORK=public", "The setup step (SANDBOX_SETUP_ALLOW)")} Or set SANDBOX_SETUP_ALLOW to an empty value.`,
        );
      });
  }
  if (settings.engine === "none") return { workspaceMount: "host", diskBudget };
  if (!(await findOnPath("bwrap"))) {
    // Installing it is the fix on a host and in an image alike: the host's words.
    throw new Error(`SANDBOX=bwrap but bwrap is not on the PATH: ${HOST_BWRAP_FIX}.`);
  }
  if (!(await findOnPath("prlimit"))) {
    throw new Error(
      "SANDBOX=bwrap needs prlimit for its limits: install util-linux (`apt-get install util-linux`).",
    );
  }
  const publicNet = settings.network === "public";
  if (publicNet) await networkTools(); // names the packages to install
  const probe = await mkdtemp(path.join(os.tmpdir(), "foreman-probe-"));
  try {
    const workspace = path.join(probe, "workspace");
    const tmp = path.join(probe, "tmp");
    await mkdir(workspace);
    await mkdir(tmp);
    const tools = await overlayTools();
    const overlays: string[] = [];
    let source = workspace;
    if (tools && (await prepareOverlay(probe, "ws", workspace))) {
      overlays.push("ws");
      source = path.join(probe, "ws");
    }
    const net = publicNet ? await publicNetwork(probe) : undefined;
    const args = await sandboxArgv({
      run: probe,
      bwrap: await bwrapArgs(
        {
          workspace: source,
          hostWorkspace: workspace,
          workspaceAt: WORKSPACE,
          tmp,
          diskLimitMb: settings.diskLimitMb,
        },
        net?.bwrapOptions,
      ),
      command: ["/bin/sh", "-c", "true"],
      overlays,
      tools,
      net,
      diskLimitMb: settings.diskLimitMb,
    });
    await execFileAsync(args[0]!, args.slice(1), {
      timeout: 15_000,
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
    });
    const mode = overlays.length
      ? (await readFile(path.join(probe, "ws.mode"), "utf8").catch(() => "overlay")).trim()
      : "bind";
    return { workspaceMount: mode === "overlay" ? "overlay" : "bind", diskBudget };
  } catch (error) {
    const failure = error as NodeJS.ErrnoException & { stderr?: string };
    const detail = (failure.stderr ?? "").trim().split("\n")[0] || failure.message;
    if (publicNet && (failure.code as unknown) === NETWORK_FAILED_EXIT)
      throw new Error(
        `SANDBOX_NETWORK=public does not work on this machine (${(failure.stderr ?? "").trim().replace(/\s+/g, " ")}): ${NETWORK_FIX}, or set SANDBOX_NETWORK=none.`,
      );
    // In a container, the container's options (sandbox/container.ts), not the host's packages.
    throw new Error(`SANDBOX=bwrap does not work on this machine (${detail}): ${bwrapFix()}.`);
  } finally {
    await removeTree(probe);
  }
}

/**
 * The argv of a sandboxed run: bwrap with the limits and the command, inside the overlay
 * mounts' namespace when there are any, inside the public network's launcher when asked.
 */
async function sandboxArgv(parts: {
  run: string;
  bwrap: string[];
  command: string[];
  overlays: string[];
  tools: OverlayTools | undefined;
  net: Awaited<ReturnType<typeof publicNetwork>> | undefined;
  diskLimitMb: number;
}): Promise<string[]> {
  const { file, argv: bwrap } = await bwrapFromFile(parts.run, parts.bwrap);
  const inner = [...bwrap, ...limitArgs(parts.diskLimitMb), ...parts.command];
  const tools = parts.tools;
  const mounted = tools && parts.overlays.length > 0;
  // The mount script opens the options file itself; without overlays a shell of its own does.
  const argv = mounted
    ? await mountArgv(parts.run, tools, parts.overlays, file, inner)
    : ["/bin/sh", "-c", BWRAP_SHIM, "sh", file, ...inner];
  // The network's launcher has a user and mount namespace of its own already.
  if (parts.net) return parts.net.wrap(argv);
  if (mounted) return [tools.unshare, "--user", "--map-root-user", "--mount", "--", ...argv];
  return argv;
}

/*
 * bwrap stays in the sandbox as its PID 1 (the reaper of the command's processes), and the
 * command can read that process's /proc/1/cmdline and /proc/1/environ: bwrap's own arguments
 * (every bind's host source) and the environment it was started with. So bwrap reads its
 * options from a file of the run folder (`--args 3`, a descriptor it closes before the command
 * starts), and the last shell before it (MOUNT_SCRIPT, or this one without overlays) drops
 * PWD and OLDPWD (the launchers' host folders) before it execs bwrap; the rest of that
 * environment is buildEnv's, the command's own.
 */
const BWRAP_SHIM = 'exec 3<"$1" || exit 125; shift; unset PWD OLDPWD; exec "$@"';

/**
 * `bwrap … --` as bwrap reading its options from a file in `run` (descriptor 3, opened by
 * the shell that execs it: see BWRAP_SHIM): the file, and the argv up to the `--`.
 */
async function bwrapFromFile(
  run: string,
  bwrap: string[],
): Promise<{ file: string; argv: string[] }> {
  const [binary, ...options] = bwrap;
  const end = options.lastIndexOf("--");
  const file = path.join(run, "bwrap.args");
  writeFileSync(
    file,
    options
      .slice(0, end)
      .map((o) => `${o}\0`)
      .join(""),
    { mode: 0o600 },
  );
  return { file, argv: [binary!, "--args", "3", "--"] };
}

/**
 * PATH as a sandboxed command gets it: without the folders it cannot see or must not learn of
 * (the service's checkout, whose node_modules/.bin npm put first, hidden paths such as
 * DATA_DIR, and any other package's node_modules/.bin of the service's own run); a folder
 * under /workspace a caller put there (the repository's node_modules/.bin) stays.
 */
function sandboxPathVariable(value: string): string {
  const hidden = hiddenPaths();
  return (
    value
      .split(":")
      .filter((dir) => dir !== "" && path.isAbsolute(dir))
      .filter((dir) => !hidden.some((h) => dir === h || isInside(dir, h)))
      // A caller's own (the working copy's /workspace/node_modules/.bin) stays.
      .filter((dir) => isInside(dir, WORKSPACE) || !/(^|\/)node_modules\/\.bin\/?$/.test(dir))
      .filter((dir, i, all) => all.indexOf(dir) === i)
      .join(":")
  );
}

/** Where the sandbox's variables point: HOME, and the package cache's folder. */
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
    XDG_CACHE_HOME: path.join(cache, "xdg"), // yarn and most others follow XDG
    PIP_CACHE_DIR: path.join(cache, "pip"),
    PIP_DISABLE_PIP_VERSION_CHECK: "1",
    PIP_NO_INPUT: "1",
    PIP_PROGRESS_BAR: "off",
  };
  // Where a toolchain's shims look for it (pyenv's shims need PYENV_ROOT once HOME moved).
  for (const name of ["PYENV_ROOT", "GOROOT", "RUSTUP_HOME"]) {
    const value = process.env[name];
    if (value) env[name] = value;
  }
  env.RUSTUP_HOME ??= rustupHome();
  env.CARGO_HOME = path.join(cache, "cargo"); // registry downloads; ~/.cargo stays read-only
  // Callers may override the defaults above (a different PATH, CI=false) but never pass a
  // secret-looking name: those are dropped silently, because the service's own credentials
  // must not cross into repository code whatever a caller or configuration asks.
  for (const [name, value] of Object.entries(extra)) {
    if (!isBlockedEnvName(name)) env[name] = value;
  }
  return env;
}

/** True when the working copy holds a virtual environment (a real folder with pyvenv.cfg). */
async function hasVenv(cwd: string): Promise<boolean> {
  const dir = await lstat(path.join(cwd, VENV_DIR)).catch(() => undefined);
  if (!dir?.isDirectory()) return false;
  const cfg = await lstat(path.join(cwd, VENV_DIR, "pyvenv.cfg")).catch(() => undefined);
  return cfg?.isFile() === true;
}

/**
 * The path a sandboxed command sees for a host path the service hands it: a file of the
 * service's own node_modules (serviceC8) is under SERVICE_MODULES_MOUNT. Unchanged with
 * SANDBOX=none.
 */
export function sandboxPath(hostPath: string): string {
  if (settings.engine === "none") return hostPath;
  const modules = path.join(SERVICE_ROOT, "node_modules");
  if (isInside(hostPath, modules))
    return path.posix.join(SERVICE_MODULES_MOUNT, path.relative(modules, hostPath));
  return hostPath;
}

/** The working copy's path as sandboxed commands see it: /workspace, or `root` (SANDBOX=none). */
export function sandboxRoot(root: string): string {
  return settings.engine === "none" ? root : WORKSPACE;
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

/** Whether any process of the group led by `pid` is still there. */
export function groupExists(pid: number): boolean {
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
 * The command line of a run in bwrap: the working copy, caches, /tmp and node_modules mounted
 * (through overlays of the run's own where the host allows: MOUNT_SCRIPT), the network, and
 * the limits. Scratch folders it makes are added to `parts.scratch` (removed with the run).
 */
async function boxedCommand(
  run: string,
  cwd: string,
  options: SandboxOptions,
  parts: {
    cacheDir: string;
    buildDir: string | undefined;
    diskLimitMb: number;
    scratch: string[];
    argv: string[];
  },
): Promise<{ argv: string[]; cacheWrites: string | undefined }> {
  const { cacheDir, buildDir, diskLimitMb, scratch } = parts;
  const cacheReadOnly = options.cache?.readOnly === true;
  const tmp = path.join(run, "tmp");
  await mkdir(path.join(tmp, "home"), { recursive: true });
  let cacheWrites: string | undefined;
  const mode = options.mount ?? "workspace";
  const tools = mode === "workspace" ? await overlayTools() : undefined;
  const overlays: string[] = [];
  // Through an overlay of the run's own (see MOUNT_SCRIPT), or bound as it is.
  const mountSource = async (name: string, folder: string): Promise<string> => {
    // A working copy on a volume is neutral bound as it is (workcopy/volume.ts).
    if (!tools || (name === "ws" && onVolume(folder))) return folder;
    const made = await prepareOverlay(run, name, folder);
    if (!made) return folder;
    scratch.push(made);
    overlays.push(name);
    return path.join(run, name);
  };
  // The run's own /tmp and empty cache live in the run folder, whose host path (in the
  // OS temp folder) is kept out of mountinfo the same way.
  // A read-only cache is the lower layer of an overlay whose upper layer is the run's
  // own: the command may write (npm needs to), nothing it writes reaches the cache.
  const layerCache = async (): Promise<string> => {
    const layered = await layerOver(run, cacheDir, tools);
    scratch.push(layered.scratch);
    cacheWrites = layered.writes;
    if (layered.overlay) overlays.push("cache");
    return layered.source;
  };
  // Each mount is prepared beside the others (a few file operations each, on the thread
  // pool): one after another they were a dozen round trips before every command.
  const [workspace, cacheSource, tmpSource, buildSource, modules, net] = await Promise.all([
    mountSource("ws", cwd),
    options.cache && cacheReadOnly ? layerCache() : mountSource("cache", cacheDir),
    mountSource("t", tmp),
    buildDir && mountSource("build", buildDir),
    modulesOverlay(run, tools, overlays),
    options.proxy
      ? proxyNetwork(run, options.proxy.port)
      : settings.network === "public"
        ? publicNetwork(run)
        : undefined,
  ]);
  const bwrap = await bwrapArgs(
    {
      workspace,
      hostWorkspace: cwd,
      workspaceAt: mode === "host" ? cwd : WORKSPACE,
      tmp: tmpSource,
      cache: { source: cacheSource, readOnly: false },
      build: buildSource,
      modules,
      diskLimitMb,
    },
    net?.bwrapOptions,
  );
  const argv = await sandboxArgv({
    run,
    bwrap,
    command: parts.argv,
    overlays,
    tools,
    net,
    diskLimitMb,
  });
  return { argv, cacheWrites };
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
    const boxed = settings.engine === "bwrap";
    const cwd = await realpath(options.cwd);
    const diskLimitMb = options.diskLimitMb ?? settings.diskLimitMb;
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
      cgroup = await createPidsCgroup(settings.maxProcs);
    } else {
      await mkdir(home);
      // Unsandboxed, a read-only cache is a copy of the run's own (it goes with the run).
      if (options.cache && cacheReadOnly) {
        cacheSeen = path.join(run, "cache-copy");
        await execFileAsync("cp", ["-a", "--reflink=auto", "--", `${cacheDir}/.`, cacheSeen]);
      }
    }
    const exchangeDir = options.exchange
      ? path.join(run, ...(boxed ? ["tmp", EXCHANGE_NAME] : [EXCHANGE_NAME]))
      : undefined;
    if (exchangeDir) await mkdir(exchangeDir);
    const env = buildEnv(home, cacheSeen, {
      ...(options.proxy ? proxyEnv(boxed ? SLIRP_HOST : "127.0.0.1", options.proxy.port) : {}),
      ...options.env,
      ...(exchangeDir
        ? await options.exchange?.prepare(
            exchangeDir,
            boxed ? `/tmp/${EXCHANGE_NAME}` : exchangeDir,
          )
        : {}),
    });
    // Kept build outputs: a run compiles only what changed (sandbox-cache.ts, withBuildCache).
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
      const pid: number | undefined = child.pid;

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
      const onHeartbeat = options.onHeartbeat;
      const heartbeat = onHeartbeat
        ? setInterval(() => {
            if (!exited) onHeartbeat(Math.round(performance.now() - started));
          }, settings.heartbeatMs)
        : undefined;
      heartbeat?.unref();
      options.signal?.addEventListener("abort", onAbort, { once: true });
      // Aborted while the sandbox was being set up (after the check at the start): the event
      // has fired already and will not again.
      if (options.signal?.aborted) onAbort();
      if (diskLimitMb > 0 && pid !== undefined)
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

/*
 * rlimits do not kill with a signal of their own (but RLIMIT_FSIZE's SIGXFSZ): an allocation
 * or a fork fails, and the tool prints why. These are the messages of the runtimes the
 * service runs (V8, Go, CPython, glibc, sh).
 */
const OUT_OF_MEMORY =
  /out of memory|Failed to reserve (virtual )?memory|Array buffer allocation failed|Cannot allocate memory|fatal error: (runtime: )?out of memory|MemoryError|std::bad_alloc|ENOMEM/;
const OUT_OF_PROCESSES =
  /Cannot fork|fork: (retry: )?Resource temporarily unavailable|pthread_create failed: Resource temporarily unavailable|spawn \S+ EAGAIN|failed to create new OS thread/;
const SIGXFSZ_EXIT = 128 + (os.constants.signals.SIGXFSZ ?? 25);

function processLimitText(): string {
  return `too many processes: the command exceeded SANDBOX_MAX_PROCS=${settings.maxProcs}`;
}

function fileLimitHit(exitCode: number | null, output: string): boolean {
  return exitCode === SIGXFSZ_EXIT || /File size limit exceeded/.test(output);
}

function limitHit(exitCode: number | null, output: string): string | undefined {
  if (fileLimitHit(exitCode, output))
    return `file too large: the command wrote a file over SANDBOX_MAX_FILE_MB=${settings.maxFileMb}`;
  if (OUT_OF_MEMORY.test(output))
    return `out of memory: the command exceeded SANDBOX_MEMORY_MB=${settings.memoryMb}`;
  if (OUT_OF_PROCESSES.test(output)) return processLimitText();
  return undefined;
}

/**
 * The failure of a task or scan whose command the disk budget stopped (DiskBudgetError, a
 * StageError: the task fails with its sentence); undefined for any other result.
 */
export function diskBudgetFailure(
  result: SandboxResult,
  subject: DiskBudgetSubject,
): DiskBudgetError | undefined {
  return result.disk
    ? new DiskBudgetError(subject, result.command, result.disk.limitMb, result.disk.usedBytes)
    : undefined;
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
  const limit = result.limit ? ` (${result.limit})` : "";
  if (result.disk) return `${name} was stopped after ${after}${limit}`;
  if (result.exitCode !== null)
    return `${name} failed with exit code ${result.exitCode} after ${after}${limit}`;
  return `${name} was killed by ${result.signal ?? "a signal"} after ${after}${limit}`;
}

/**
 * The argv and environment of a long-lived sandboxed process (sandbox/process.ts, an MCP
 * server of a task): the mounts, limits and network rule of runSandboxed, the working copy
 * bound at /workspace (no overlay and no disk watch: the process lives for one stage). `run`
 * is a folder of the caller's own, removed by it: its tmp/ is the process's /tmp and HOME.
 */
export async function sandboxedProcessArgv(
  command: string[],
  options: { cwd: string; run: string; env?: Record<string, string> | undefined },
): Promise<{ argv: string[]; env: NodeJS.ProcessEnv; cwd: string; scratch: string[] }> {
  await assertDirectory(options.cwd);
  const cwd = await realpath(options.cwd);
  const cache = path.join(options.run, "cache");
  await mkdir(cache, { recursive: true });
  if (settings.engine !== "bwrap") {
    const home = path.join(options.run, "home");
    await mkdir(home, { recursive: true });
    return { argv: command, env: buildEnv(home, cache, options.env), cwd, scratch: [] };
  }
  const tmp = path.join(options.run, "tmp");
  await mkdir(path.join(tmp, "home"), { recursive: true });
  const diskLimitMb = settings.diskLimitMb;
  const net = settings.network === "public" ? await publicNetwork(options.run) : undefined;
  // Overlays as for runSandboxed, so no host path shows in the process's mountinfo; the
  // working copy's scratch folder (beside it) is the caller's to remove with `run`.
  const tools = await overlayTools();
  const overlays: string[] = [];
  const scratch: string[] = [];
  const mountSource = async (name: string, folder: string): Promise<string> => {
    if (!tools || (name === "ws" && onVolume(folder))) return folder;
    const made = await prepareOverlay(options.run, name, folder);
    if (!made) return folder;
    scratch.push(made);
    overlays.push(name);
    return path.join(options.run, name);
  };
  const bwrap = await bwrapArgs(
    {
      workspace: await mountSource("ws", cwd),
      hostWorkspace: cwd,
      workspaceAt: WORKSPACE,
      tmp: await mountSource("t", tmp),
      cache: { source: await mountSource("c", cache), readOnly: false },
      modules: await modulesOverlay(options.run, tools, overlays),
      diskLimitMb,
    },
    net?.bwrapOptions,
  );
  const argv = await sandboxArgv({
    run: options.run,
    bwrap,
    command,
    overlays,
    tools,
    net,
    diskLimitMb,
  });
  const env = buildEnv("/tmp/home", CACHE_MOUNT, options.env);
  env.TMPDIR = "/tmp";
  env.PATH = sandboxPathVariable(env.PATH ?? "");
  return { argv, env, cwd, scratch };
}
