/*
 * The sandbox's limits: rlimits (prlimit), the pids cgroup, and the words for a limit a
 * command ran into (run.ts).
 */
import { readFileSync } from "node:fs";
import { mkdir, rmdir, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { DiskBudgetError, type DiskBudgetSubject } from "./disk.js";
import { MIB, type SandboxResult, sandboxSettings } from "./settings.js";

/** The sandbox's /dev/shm (memory-backed), at most; half the disk budget when that is less. */
const SHM_MB = 256;

/** The sandbox's /dev/shm in MiB: SHM_MB, or half the disk budget when that is smaller. */
export function shmLimitMb(diskLimitMb: number): number {
  return diskLimitMb > 0 ? Math.min(SHM_MB, Math.max(1, Math.floor(diskLimitMb / 2))) : SHM_MB;
}

/** RLIMIT_FSIZE in MiB: SANDBOX_MAX_FILE_MB, or the disk budget when that is smaller. */
export function fileLimitMb(diskLimitMb: number): number {
  return diskLimitMb > 0
    ? Math.min(sandboxSettings().maxFileMb, diskLimitMb)
    : sandboxSettings().maxFileMb;
}

/** prlimit in front of the command: the memory, process and file-size limits. */
export function limitArgs(diskLimitMb: number): string[] {
  return [
    "prlimit",
    `--data=${sandboxSettings().memoryMb * MIB}`,
    `--nproc=${sandboxSettings().maxProcs}`,
    `--fsize=${fileLimitMb(diskLimitMb) * MIB}`,
    "--",
  ];
}

/*
 * RLIMIT_NPROC binds nobody when the service runs as root (the kernel exempts root's
 * processes, user namespace or not). Where the service may create cgroups (root with the
 * cgroup v1 `pids` controller mounted, as on this project's CI machines), each run also
 * gets a pids cgroup of its own, which counts every process and thread whoever owns it.
 */
const PIDS_CGROUP_ROOT = "/sys/fs/cgroup/pids";

export async function createPidsCgroup(max: number): Promise<string | undefined> {
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
export function pidsLimitHit(dir: string | undefined): boolean {
  if (!dir) return false;
  try {
    return /^max [1-9]/m.test(readFileSync(path.join(dir, "pids.events"), "utf8"));
  } catch {
    return false;
  }
}

/** Removes a run's cgroup once its processes are gone (the PID namespace dies async). */
export async function removeCgroup(dir: string | undefined): Promise<void> {
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

export function processLimitText(): string {
  return `too many processes: the command exceeded SANDBOX_MAX_PROCS=${sandboxSettings().maxProcs}`;
}

export function fileLimitHit(exitCode: number | null, output: string): boolean {
  return exitCode === SIGXFSZ_EXIT || /File size limit exceeded/.test(output);
}

export function limitHit(exitCode: number | null, output: string): string | undefined {
  if (fileLimitHit(exitCode, output))
    return `file too large: the command wrote a file over SANDBOX_MAX_FILE_MB=${sandboxSettings().maxFileMb}`;
  if (OUT_OF_MEMORY.test(output))
    return `out of memory: the command exceeded SANDBOX_MEMORY_MB=${sandboxSettings().memoryMb}`;
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
