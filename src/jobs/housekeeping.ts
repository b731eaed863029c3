import { z } from "zod";
import type { Models } from "../db/models.js";
import { pruneFinishedJobs, type JobKind } from "../queue/scheduler.js";
import { pruneIdempotencyRecords, pruneRateLimits } from "../durable/request-records.js";
import { pruneMarkers } from "../durable/markers.js";
import { jobLock } from "../durable/exclusive-locks.js";
import { pruneTrajectories } from "../domain/tasks/trajectories.js";

/** Markers older than this are dropped; GitHub does not redeliver after a few days. */
export const ONCE_MARKER_RETENTION_DAYS = 14;
/** Job-lock markers are kept this long. */
const JOB_LOCK_RETENTION_MS = 86_400_000;
/** Finished one-off jobs are kept this long (for inspection), then removed. */
const FINISHED_JOB_RETENTION_MS = 60 * 60_000;

export const pruneOnceMarkers = (
  models: Models,
  /** TRAJECTORY_RETENTION_DAYS: model calls older than this are dropped. */
  trajectoryRetentionDays: number,
): JobKind<Record<string, never>> => ({
  name: "housekeeping.prune-once-markers",
  schema: z.object({}).strict() as z.ZodType<Record<string, never>>,
  concurrency: 1,
  async run() {
    const cutoff = new Date(Date.now() - ONCE_MARKER_RETENTION_DAYS * 86_400_000);
    await pruneMarkers(models, cutoff, {
      [jobLock.scope]: new Date(Date.now() - JOB_LOCK_RETENTION_MS),
    });
    // Agenda finds due jobs with a query FerretDB answers by scanning the collection, so
    // finished one-off jobs do not stay. (Agenda's removeOnComplete would do it, but then
    // its drain never hears the last job complete and shutdown waits out the grace time.)
    // Pipeline stages stay once-only through their own markers (pipeline/runner.ts).
    await pruneFinishedJobs(models, new Date(Date.now() - FINISHED_JOB_RETENTION_MS));
    // Idempotency answers (24 h) and rate-limit windows past their end; lookups ignore
    // expired ones already, FerretDB v1 has no TTL indexes to drop them.
    await pruneIdempotencyRecords(models);
    await pruneRateLimits(models);
    await pruneTrajectories(models, new Date(Date.now() - trajectoryRetentionDays * 86_400_000));
  },
});
