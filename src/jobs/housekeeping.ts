import { z } from "zod";
import type { Models } from "../db/models.js";
import type { JobKind } from "./scheduler.js";

/** Markers older than this are dropped; GitHub does not redeliver after a few days. */
export const ONCE_MARKER_RETENTION_DAYS = 14;

export const pruneOnceMarkers = (models: Models): JobKind<Record<string, never>> => ({
  name: "housekeeping.prune-once-markers",
  schema: z.object({}).strict() as z.ZodType<Record<string, never>>,
  concurrency: 1,
  async run() {
    const cutoff = new Date(Date.now() - ONCE_MARKER_RETENTION_DAYS * 86_400_000);
    await models.Once.deleteMany({ created_at: { $lt: cutoff } });
  },
});
