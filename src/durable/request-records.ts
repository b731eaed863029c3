import type { Connection } from "mongoose";
import { isDuplicateKey } from "../util/duplicate-key.js";
import { collectionOf, type Models } from "../db/models.js";

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
export async function pruneRateLimits(models: Models, now = new Date()): Promise<void> {
  await models.Once.db.collection(RATE_LIMIT_COLLECTION).deleteMany({ expire: { $lt: now } });
}

/** One idempotency record: a request's fingerprint and, once it is done, its sealed answer. */
export interface IdempotencyRecord {
  /** sha256 of the scope and the client's key. */
  _id: string;
  fingerprint: string;
  state: "pending" | "done";
  /**
   * Random per insert (absent on records written before it existed): the request that
   * inserted the record completes or drops that one only, never a record that replaced it
   * after its lease ended.
   */
  token?: string;
  status: number | null;
  /** The answer, sealed by the HTTP door (only it can read it: http/idempotency.ts). */
  sealed: string | null;
  created_at: Date;
  updated_at: Date;
  expires_at: Date;
}

const recordsOf = (models: Models) => collectionOf<IdempotencyRecord>(models.IdempotencyRecord);

/** Takes the record for a first request: true when inserted, false when one exists. */
export async function insertPendingRecord(
  models: Models,
  id: string,
  token: string,
  fingerprint: string,
  ttlMs: number,
  now = new Date(),
): Promise<boolean> {
  try {
    await recordsOf(models).insertOne({
      _id: id,
      fingerprint,
      state: "pending",
      token,
      status: null,
      sealed: null,
      created_at: now,
      updated_at: now,
      expires_at: new Date(now.getTime() + ttlMs),
    });
    return true;
  } catch (error) {
    if (isDuplicateKey(error)) return false;
    throw error;
  }
}

/** Stores the answer of the request that inserted the record (`token`); false when it is gone. */
export async function completeRecord(
  models: Models,
  id: string,
  token: string,
  status: number,
  sealed: string,
): Promise<boolean> {
  const result = await recordsOf(models).updateOne(
    { _id: id, token, state: "pending" },
    { $set: { state: "done", status, sealed, updated_at: new Date() } },
  );
  return result.matchedCount > 0;
}

/** Drops the pending record of the request that inserted it (it failed and stored nothing). */
export async function dropPendingRecord(models: Models, id: string, token: string): Promise<void> {
  await recordsOf(models).deleteOne({ _id: id, token, state: "pending" });
}

/** Drops the record created at `createdAt` (expired, or its request stopped answering). */
export async function dropRecordCreatedAt(
  models: Models,
  id: string,
  createdAt: Date,
): Promise<void> {
  await recordsOf(models).deleteOne({ _id: id, created_at: createdAt });
}

export function findRecord(models: Models, id: string): Promise<IdempotencyRecord | null> {
  return recordsOf(models).findOne({ _id: id });
}

/** Drops expired idempotency records (lookups also ignore them). */
export async function pruneIdempotencyRecords(models: Models, now = new Date()): Promise<number> {
  const result = await recordsOf(models).deleteMany({ expires_at: { $lt: now } });
  return result.deletedCount;
}
