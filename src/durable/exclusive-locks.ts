import { claimOnce, lockTime, markerKind } from "./once.js";
import type { OnceRecord } from "../db/models.js";
import { MongoJobRepository } from "@agendajs/mongo-backend";
import type { JobParameters, JobRepositoryOptions } from "agenda";
import { ObjectId } from "mongodb";

/**
 * One lock of an Agenda job in the job state a lookup saw: its `nextRunAt`, `lastRunAt` and
 * the expired lock it took over. Pruned after a day (jobs/housekeeping.ts).
 */
export const jobLock = markerKind(
  "job-lock",
  "job-lock",
  (
    jobId: string,
    nextRunAt: Date | null | undefined,
    lastRunAt: Date | null | undefined,
    seenLockedAt: Date | null | undefined,
  ) => [jobId, lockTime(nextRunAt), lockTime(lastRunAt), lockTime(seenLockedAt)],
);

/** How many jobs one lookup may try after losing races before it gives up until the next. */
const MAX_LOST_RACES = 3;
/** A lookup this soon after one served from a hint is Agenda's queue-filling follow-up. */
const FOLLOW_UP_MS = 50;
/** How long one read of the due jobs serves the polls of every job name. */
const SNAPSHOT_MS = 100;
/** Hints kept per job name (jobs past the limit are found by the regular scan). */
const MAX_HINTS = 1000;

/** A due job as the shared read of all names sees it. */
interface DueJob {
  _id: ObjectId;
  name: string;
  nextRunAt: Date | null;
  lockedAt: Date | null;
}

/**
 * Agenda's job store with locks that hold on FerretDB.
 *
 * Agenda locks a job with one `findOneAndUpdate` on `lockedAt: null` (or an expired lock).
 * MongoDB applies that atomically; FerretDB does not, so two lookups at once (this process's
 * poll and its in-process notification, or two workers) can both lock the same job and run it
 * twice. Here a lock also takes a marker by unique `_id` insert, which is atomic on every
 * backend: the lookup that inserts it runs the job, the other one skips it. The lookup also
 * finds its job with a read and locks it by `_id`, which FerretDB serves without scanning.
 *
 * The marker names the job's state as both lookups saw it (see claim), so two lookups of
 * one state give one run while a dead worker's job, started or still queued, is taken over
 * once its lock expires. Markers are pruned after a day (`housekeeping.prune-once-markers`).
 */
export class ExclusiveJobRepository extends MongoJobRepository {
  /** Jobs this process just queued, by name: locked by `_id` without a scan. */
  private readonly hints = new Map<string, Array<{ id: ObjectId; nextRunAt: Date }>>();
  /** When a lookup of a name was last served from a hint, until the next lookup of it. */
  private readonly servedFromHint = new Map<string, number>();
  /** The marker of each job this process holds the lock of (see claim), for unlocks. */
  private readonly claims = new Map<string, string>();
  /** The due jobs of every name, read once for a round of polls (see dueJobs). */
  private snapshot: { at: number; jobs: Promise<DueJob[]> } | undefined;

  /**
   * Tells the store about a job this process has just inserted, due now. Agenda's in-process
   * notification then asks for "the next job of this name"; the store locks this one by its
   * `_id` instead of scanning the collection for it.
   */
  hint(name: string, id: ObjectId, nextRunAt: Date): void {
    const list = this.hints.get(name) ?? [];
    if (list.length >= MAX_HINTS) list.shift(); // the oldest is found by a scan instead
    list.push({ id, nextRunAt });
    this.hints.set(name, list);
  }

  private async fromHint(
    jobName: string,
    options: JobRepositoryOptions | undefined,
  ): Promise<JobParameters | undefined> {
    const list = this.hints.get(jobName);
    while (list && list.length > 0) {
      const { id, nextRunAt } = list.shift()!;
      if (list.length === 0) this.hints.delete(jobName);
      const job = await this.lockJob(
        { _id: id.toHexString(), name: jobName, nextRunAt } as unknown as JobParameters,
        options,
      );
      if (job && (await this.claim(job, null))) {
        this.servedFromHint.set(jobName, Date.now());
        return job;
      }
    }
    return undefined;
  }

  override async getNextJobToRun(
    jobName: string,
    nextScanAt: Date,
    lockDeadline: Date,
    now: Date | undefined,
    options: JobRepositoryOptions | undefined,
  ): Promise<JobParameters | undefined> {
    const hinted = await this.fromHint(jobName, options);
    if (hinted) return hinted;
    // Agenda asks again at once after each job it locks, to fill its queue. Right after a
    // hinted job that lookup would scan for nothing this process knows of; jobs queued by
    // other processes are found by the next regular poll instead.
    // Once per hinted job, so a steady stream of them cannot hold off the regular scan.
    const served = this.servedFromHint.get(jobName);
    this.servedFromHint.delete(jobName);
    if (served !== undefined && Date.now() - served < FOLLOW_UP_MS) return undefined;
    const due = await this.dueJobs(nextScanAt, lockDeadline);
    for (let lost = 0; lost < MAX_LOST_RACES; lost += 1) {
      const index = due.findIndex((candidate) => candidate.name === jobName);
      if (index < 0) return undefined;
      const [candidate] = due.splice(index, 1);
      const { _id: id, nextRunAt, lockedAt } = candidate!;
      const job = lockedAt
        ? await this.takeExpired(id, lockedAt, now ?? new Date(), options)
        : await this.lockJob(
            { _id: id.toHexString(), name: jobName, nextRunAt } as unknown as JobParameters,
            options,
          );
      if (job && (await this.claim(job, lockedAt))) return job;
    }
    return undefined;
  }

  /**
   * The jobs due by `nextScanAt` (or with a lock older than `lockDeadline`), of every name,
   * read at most once per SNAPSHOT_MS. Agenda polls each job name on its own, each time with
   * one findOneAndUpdate that FerretDB answers by scanning and sorting the collection inside
   * a write (~6-15 ms each, holding up the other writes; a dozen names per second). One read
   * for all names, then a lock by `_id` (which FerretDB serves without a scan), does the same
   * work once. A job another worker took meanwhile fails its `_id` lock and is skipped.
   */
  private dueJobs(nextScanAt: Date, lockDeadline: Date): Promise<DueJob[]> {
    const now = Date.now();
    if (this.snapshot && now - this.snapshot.at < SNAPSHOT_MS) return this.snapshot.jobs;
    const jobs = this.collection
      .find(
        {
          disabled: { $ne: true },
          $or: [
            { lockedAt: { $eq: null }, nextRunAt: { $lte: nextScanAt } },
            { lockedAt: { $lte: lockDeadline } },
          ],
        },
        {
          sort: { nextRunAt: 1, priority: -1 },
          projection: { _id: 1, name: 1, nextRunAt: 1, lockedAt: 1 },
        },
      )
      .toArray()
      .then((rows) =>
        rows.map((row) => ({
          _id: row._id,
          name: row.name,
          nextRunAt: row.nextRunAt ?? null,
          lockedAt: row.lockedAt ?? null,
        })),
      )
      .catch((error: unknown) => {
        this.snapshot = undefined;
        throw error;
      });
    this.snapshot = { at: now, jobs };
    return jobs;
  }

  /**
   * Takes over a lock that expired (its worker died, or stopped with the job still queued),
   * by `_id` and the expired `lockedAt` the lookup saw.
   */
  private async takeExpired(
    id: ObjectId,
    expired: Date,
    now: Date,
    options: JobRepositoryOptions | undefined,
  ): Promise<JobParameters | undefined> {
    const taken = await this.collection.findOneAndUpdate(
      { _id: id, lockedAt: expired, disabled: { $ne: true } },
      { $set: { lockedAt: now, lastModifiedBy: options?.lastModifiedBy ?? null } },
    );
    if (!taken) return undefined;
    return (await this.getJobById(id.toHexString())) ?? undefined;
  }

  /**
   * The marker of one lock. It names the job's state as the lookup saw it before locking:
   * `nextRunAt`, `lastRunAt` and the expired lock it took over, if any. Two lookups of one
   * state share a marker; a later lock of the same job is a new state: a run changed
   * `lastRunAt`, a takeover names the lock it replaced, and an unlock by this process
   * removes the marker (unlockJob).
   */
  private async claim(job: JobParameters, seenLockedAt: Date | null): Promise<boolean> {
    const marker = jobLock(String(job._id), job.nextRunAt, job.lastRunAt, seenLockedAt);
    if (!(await claimOnce(this.markers(), marker))) return false;
    if (this.claims.size >= MAX_HINTS) this.claims.delete(this.claims.keys().next().value!);
    this.claims.set(String(job._id), marker.id);
    return true;
  }

  private markers() {
    return this.getDb().collection<OnceRecord>("once_markers");
  }

  /** Agenda unlocks a job it locked but will not run now: its marker goes too. */
  override async unlockJob(job: JobParameters): Promise<void> {
    await super.unlockJob(job);
    await this.forget([String(job._id)]);
  }

  override async unlockJobs(
    jobIds: Parameters<MongoJobRepository["unlockJobs"]>[0],
  ): Promise<void> {
    await super.unlockJobs(jobIds);
    await this.forget(jobIds.map(String));
  }

  /**
   * For a stop: releases the jobs this process locked but did not start. Agenda's `drain`
   * leaves them locked (its `stop` afterwards finds nothing to do), so another worker would
   * wait out the lock lifetime first. A started one-off job has `nextRunAt` null and keeps
   * its lock: only its expiry makes it due again, as after a crash.
   */
  async releaseHeld(): Promise<void> {
    const held = [...this.claims.keys()];
    if (held.length === 0) return;
    await this.collection.updateMany(
      { _id: { $in: held.map((id) => new ObjectId(id)) }, nextRunAt: { $ne: null } },
      { $unset: { lockedAt: true } },
    );
    await this.forget(held);
  }

  private async forget(jobIds: string[]): Promise<void> {
    const ids = jobIds.flatMap((jobId) => {
      const marker = this.claims.get(jobId);
      this.claims.delete(jobId);
      return marker ? [marker] : [];
    });
    if (ids.length > 0) await this.markers().deleteMany({ _id: { $in: ids } });
  }
}
