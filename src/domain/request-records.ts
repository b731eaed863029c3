import type { Connection } from "mongoose";
import type { Models } from "../db/models.js";

/*
 * What the API keeps about requests for a while: rate-limit counters (http/rate-limit.ts) and
 * idempotent answers (http/idempotency.ts). The HTTP door writes them; housekeeping
 * (jobs/housekeeping.ts) drops them here, without reaching into the HTTP door.
 */

/** Counters of every limiter, one document per counted request (housekeeping prunes them). */
export const RATE_LIMIT_COLLECTION = "rate_limits";

/** The index the slot count reads by. */
export async function ensureRateLimitIndexes(connection: Connection): Promise<void> {
  await connection.collection(RATE_LIMIT_COLLECTION).createIndex({ key: 1, window: 1 });
}

/** Drops counters whose window has ended (they are ignored already; this keeps the store small). */
export async function pruneRateLimits(connection: Connection, now = new Date()): Promise<void> {
  await connection.collection(RATE_LIMIT_COLLECTION).deleteMany({ expire: { $lt: now } });
}

/** Drops expired idempotency records (lookups also ignore them). */
export async function pruneIdempotencyRecords(models: Models, now = new Date()): Promise<number> {
  const result = await models.IdempotencyRecord.collection.deleteMany({
    expires_at: { $lt: now },
  });
  return result.deletedCount;
}
