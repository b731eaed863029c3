/*
 * The sandbox's settings (configureSandbox: engine, network, limits; one set per process),
 * the options and result of a run, and the fixed paths a sandboxed command sees (run.ts).
 */
import path from "node:path";
import { fileURLToPath } from "node:url";
import { type SandboxCache } from "./cache.js";
import { type DiskWatchStats } from "./disk.js";

import { type SandboxNetwork } from "./network.js";
import { type AddressPolicy, STRICT_POLICY } from "./setup-proxy-guard.js";

/** Where a sandboxed command sees its working copy, whatever its folder on the host. */
export const WORKSPACE = "/workspace";
/** Where it sees its package cache (npm, Go, pip, cargo; sandbox/cache.ts). */
export const CACHE_MOUNT = "/cache";
/** Where it sees the build caches of its account and repository (GOCACHE; cache.ts). */
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

/** The service's own checkout (this file is src/sandbox/ or dist/sandbox/ of it): never mounted. */
export const SERVICE_ROOT = path.resolve(fileURLToPath(new URL("../..", import.meta.url)));

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

/** Sets the engine and limits for every later run (service start; tests and benchmarks). */
export function configureSandbox(next: Partial<SandboxSettings>): void {
  settings = { ...DEFAULT_SETTINGS, ...next };
}

export function sandboxSettings(): Readonly<SandboxSettings> {
  return settings;
}

export function isInside(child: string, parent: string): boolean {
  const relative = path.relative(parent, child);
  return relative === "" || (!relative.startsWith("..") && !path.isAbsolute(relative));
}

export const MIB = 1024 * 1024;
