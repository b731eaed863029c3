import { statfs } from "node:fs/promises";
import { errors } from "../errors.js";

/*
 * DATA_DIR_MIN_FREE_MB: a task or health scan is never started on a disk that cannot hold
 * it. Below that much free space under DATA_DIR (working copies, health clones and, by
 * default, the sandboxes' package caches live there), creating a task or requesting a scan
 * answers 503 `insufficient_storage` with Retry-After and creates nothing; what runs already
 * runs on (each within TASK_DISK_LIMIT_MB, sandbox/disk.ts).
 *
 * statfs is cheap but not free on a busy API; the figure is kept for a second.
 */

/** How long one statfs answer is used. */
const CACHE_MS = 1_000;
/** What the 503 tells the client to wait. */
const RETRY_AFTER_S = 60;
const MIB = 1024 * 1024;

export type StorageCheck = () => Promise<void>;

/**
 * A check that throws 503 `insufficient_storage` while `dir` has less than `minFreeMb` free
 * (for an unprivileged user: statfs's bavail). `minFreeMb` 0: never throws.
 */
export function createStorageCheck(
  dir: string,
  minFreeMb: number,
  read: (dir: string) => Promise<number> = freeBytes,
): StorageCheck {
  let cached: { at: number; free: Promise<number> } | undefined;
  return async () => {
    if (minFreeMb <= 0) return;
    const now = Date.now();
    if (!cached || now - cached.at >= CACHE_MS) {
      const free = read(dir);
      cached = { at: now, free };
      // A failed read is not cached: the next request asks again.
      free.catch(() => {
        if (cached?.free === free) cached = undefined;
      });
    }
    let free: number;
    try {
      free = await cached.free;
    } catch {
      return; // the folder is not there yet (first start) or unreadable: not a reason to refuse
    }
    if (free >= minFreeMb * MIB) return;
    throw errors.insufficientStorage(
      `The server is low on disk space (${Math.floor(free / MIB)} MB free for its data, under DATA_DIR_MIN_FREE_MB=${minFreeMb}), so no task or scan is started now. Retry later; the operator can free space or lower DATA_DIR_MIN_FREE_MB.`,
      RETRY_AFTER_S,
    );
  };
}

/** Free bytes on the file system of `dir`, for an unprivileged user (statfs's bavail). */
export async function freeBytes(dir: string): Promise<number> {
  const info = await statfs(dir);
  return info.bavail * info.bsize;
}
