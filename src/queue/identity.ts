import { createHash } from "node:crypto";
import { hostname } from "node:os";
import path from "node:path";
import type { Db } from "mongodb";
import type { Logger } from "../util/logger.js";

/*
 * Who holds a job lock or a stage lease: `<host>:<pid>:<data folder hash>`, stored as the job's
 * `lastModifiedBy` (Agenda's name of this process) and the lease's `holder_id`. A worker that
 * finds locks of its own dead predecessor (same host and DATA_DIR, pid gone: a crash and a
 * restart) retakes them at once instead of waiting out JOB_LOCK_LIFETIME_S.
 */

let dataKey = "-";

/** Sets the data folder part of this process's identity (service start). */
export function setIdentityDataDir(dataDir: string): void {
  dataKey = createHash("sha256").update(path.resolve(dataDir)).digest("hex").slice(0, 12);
}

/** This process's identity. */
export function processIdentity(): string {
  return `${hostname()}:${process.pid}:${dataKey}`;
}

/** True when `holder` is another process of this host and data folder that no longer runs. */
export function isDeadPredecessor(holder: unknown): boolean {
  if (typeof holder !== "string" || dataKey === "-") return false;
  const match = /^(.*):(\d+):([0-9a-f]{12})$/.exec(holder);
  if (!match || match[1] !== hostname() || match[3] !== dataKey) return false;
  const pid = Number(match[2]);
  // A running pid may have been reused: the lock lifetime decides then.
  return pid !== process.pid && !pidRunning(pid);
}

/** Whether a process of this pid runs on this host (one we may not signal counts as running). */
function pidRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code !== "ESRCH";
  }
}

/**
 * Frees what dead predecessors held: their job locks are moved back past the lock lifetime
 * (so the job store takes them over at its next poll, see durable/exclusive-locks.ts, with a
 * lock marker of its own: the expired time names this takeover), and their leases are
 * released (the next run takes the next attempt, see durable/lease.ts).
 */
export async function retakeFromDeadPredecessors(
  db: Db,
  lockLifetimeMs: number,
  logger: Logger,
): Promise<{ jobs: number; leases: number }> {
  const jobsCollection = db.collection("jobs");
  const locked = await jobsCollection
    .find({ lockedAt: { $ne: null } }, { projection: { _id: 1, lockedAt: 1, lastModifiedBy: 1 } })
    .toArray();
  let jobs = 0;
  for (const job of locked) {
    if (!(job.lockedAt instanceof Date) || !isDeadPredecessor(job.lastModifiedBy)) continue;
    const expired = new Date(job.lockedAt.getTime() - lockLifetimeMs - 1000);
    const result = await jobsCollection.updateOne(
      { _id: job._id, lockedAt: job.lockedAt },
      { $set: { lockedAt: expired } },
    );
    jobs += result.modifiedCount;
  }
  const markers = db.collection("once_markers");
  const leaseList = await markers
    .find(
      {
        holder_id: { $exists: true },
        released: { $ne: true },
        heartbeat_at: { $gt: new Date(Date.now() - lockLifetimeMs) },
      },
      { projection: { _id: 1, holder_id: 1 } },
    )
    .toArray();
  let leases = 0;
  for (const lease of leaseList) {
    if (!isDeadPredecessor(lease.holder_id)) continue;
    const result = await markers.updateOne(
      { _id: lease._id, released: { $ne: true } },
      { $set: { released: true } },
    );
    leases += result.modifiedCount;
  }
  if (jobs + leases > 0)
    logger.info({ jobs, leases }, "took over the work of a dead process of this DATA_DIR");
  return { jobs, leases };
}
