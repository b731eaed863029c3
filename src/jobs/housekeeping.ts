import { z } from "zod";
import type { Models } from "../db/models.js";
import type { JobKind } from "./scheduler.js";

/** Markers older than this are dropped; GitHub does not redeliver after a few days. */
export const ONCE_MARKER_RETENTION_DAYS = 14;
/** Finished one-off jobs are kept this long (for inspection), then removed. */
const FINISHED_JOB_RETENTION_MS = 60 * 60_000;

export const pruneOnceMarkers = (models: Models): JobKind<Record<string, never>> => ({
  name: "housekeeping.prune-once-markers",
  schema: z.object({}).strict() as z.ZodType<Record<string, never>>,
  concurrency: 1,
  async run() {
    const cutoff = new Date(Date.now() - ONCE_MARKER_RETENTION_DAYS * 86_400_000);
    await models.Once.deleteMany({ created_at: { $lt: cutoff } });
    // Agenda finds due jobs with a query FerretDB answers by scanning the collection, so
    // finished one-off jobs do not stay. (Agenda's removeOnComplete would do it, but then
    // its drain never hears the last job complete and shutdown waits out the grace time.)
    // Pipeline stages stay once-only through their own markers (pipeline/runner.ts).
    await models.Once.db.collection("jobs").deleteMany({
      nextRunAt: null,
      lastFinishedAt: { $lt: new Date(Date.now() - FINISHED_JOB_RETENTION_MS) },
    });
  },
});
