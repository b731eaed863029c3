import { MongoJobRepository } from "@agendajs/mongo-backend";
import type { JobParameters, JobRepositoryOptions } from "agenda";
import { isDuplicateKey } from "../db/duplicate-key.js";

/** How many jobs one lookup may try after losing races before it gives up until the next. */
const MAX_LOST_RACES = 3;

/**
 * Agenda's job store with locks that hold on FerretDB.
 *
 * Agenda locks a job with one `findOneAndUpdate` on `lockedAt: null` (or an expired lock).
 * MongoDB applies that atomically; FerretDB does not, so two lookups at once (this process's
 * poll and its in-process notification, or two workers) can both lock the same job and run it
 * twice. Here a lock also takes a marker by unique `_id` insert, which is atomic on every
 * backend: the lookup that inserts it runs the job, the other one skips it.
 *
 * The marker names the job's state as both lookups saw it: its id, `nextRunAt` and
 * `lastRunAt`. Agenda sets `lastRunAt` when a run starts, so when a worker dies and its
 * expired lock is taken again, that is a new state and a new marker: crash recovery still
 * works, while two lookups of one state give one run. Markers are pruned with the others
 * (`housekeeping.prune-once-markers`).
 */
export class ExclusiveJobRepository extends MongoJobRepository {
  override async getNextJobToRun(
    jobName: string,
    nextScanAt: Date,
    lockDeadline: Date,
    now: Date | undefined,
    options: JobRepositoryOptions | undefined,
  ): Promise<JobParameters | undefined> {
    for (let lost = 0; lost < MAX_LOST_RACES; lost += 1) {
      const job = await super.getNextJobToRun(jobName, nextScanAt, lockDeadline, now, options);
      if (!job) return undefined;
      if (await this.claim(job)) return job;
    }
    return undefined;
  }

  private async claim(job: JobParameters): Promise<boolean> {
    const time = (date: Date | null | undefined) => (date ? new Date(date).getTime() : "-");
    const id = `job-lock:${String(job._id)}:${time(job.nextRunAt)}:${time(job.lastRunAt)}`;
    try {
      await this.getDb()
        .collection<{ _id: string; scope: string; created_at: Date }>("once_markers")
        .insertOne({ _id: id, scope: "job-lock", created_at: new Date() });
      return true;
    } catch (error) {
      if (isDuplicateKey(error)) return false;
      throw error;
    }
  }
}
