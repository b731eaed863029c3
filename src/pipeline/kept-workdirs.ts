/*
 * Kept working copies (docs/operations.md, "Kept working copies"): a task that ended DONE with
 * a branch leaves its working copy where it is, set up and indexed files and all, for
 * FOLLOW_UP_KEEP_MIN minutes; a follow-up of it that runs on the same DATA_DIR takes it over
 * (stages/clone.ts) instead of making a volume, cloning and installing again. At most
 * FOLLOW_UP_KEEP_MAX are kept (the oldest goes first: a follow-up comes likeliest on the work
 * that just finished); the task sweep removes the expired ones on every worker.
 *
 * The bookkeeping is the marker beside each kept copy (workcopy/volume.ts): a copy is on
 * this worker's disk or not, so no database record could say more, and the marker's rename is
 * the lock between a follow-up taking it and the sweep removing it.
 */
import path from "node:path";
import { freeBytes } from "../domain/storage.js";
import { keptWorkdirs, markKept, removeKept } from "../workcopy/volume.js";

export interface KeepPolicy {
  /** How long (FOLLOW_UP_KEEP_MIN); 0: nothing is kept. */
  ms: number;
  /** How many per DATA_DIR (FOLLOW_UP_KEEP_MAX); 0: nothing is kept. */
  max: number;
  /**
   * DATA_DIR_MIN_FREE_MB in bytes: below this much free space nothing is kept (a kept copy is
   * a saving, never worth the room new tasks need); 0 or absent: no such limit.
   */
  minFreeBytes?: number;
}

/** True when the disk of `dir` has less than `minFreeBytes` free (unknown: not low). */
async function lowOnDisk(dir: string, minFreeBytes = 0): Promise<boolean> {
  if (minFreeBytes <= 0) return false;
  return (await freeBytes(dir).catch(() => Number.POSITIVE_INFINITY)) < minFreeBytes;
}

/**
 * Keeps the working copy `workdir` for a follow-up, making room among the others first.
 * Answers until when, or null when the policy keeps nothing (the caller removes it).
 */
export async function keepWorkdir(
  workdir: string,
  policy: KeepPolicy,
  now = Date.now(),
): Promise<Date | null> {
  if (policy.ms <= 0 || policy.max <= 0) return null;
  if (await lowOnDisk(path.dirname(workdir), policy.minFreeBytes)) return null;
  const others = (await keptWorkdirs(path.dirname(workdir)))
    .filter((kept) => kept.workdir !== workdir)
    .sort((a, b) => a.until - b.until);
  const over = others.length - (policy.max - 1);
  for (const old of others.slice(0, Math.max(0, over))) await removeKept(old.workdir);
  const until = now + policy.ms;
  await markKept(workdir, until);
  return new Date(until);
}

/**
 * Removes the kept working copies under `root` whose time is up, and all of them while the
 * disk has less than `minFreeBytes` free; answers how many.
 */
export async function removeExpiredWorkdirs(
  root: string,
  now = Date.now(),
  minFreeBytes = 0,
): Promise<number> {
  const copies = await keptWorkdirs(root);
  if (copies.length === 0) return 0;
  const all = await lowOnDisk(root, minFreeBytes);
  let removed = 0;
  for (const kept of copies) {
    if (!all && kept.until > now) continue;
    await removeKept(kept.workdir);
    removed++;
  }
  return removed;
}
