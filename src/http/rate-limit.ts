import type { Collection } from "mongodb";
import type { Connection } from "mongoose";
import { isDuplicateKey } from "../util/duplicate-key.js";
import { RateLimiterMemory, RateLimiterMongo, RateLimiterRes } from "rate-limiter-flexible";
import { AppError, errors } from "../errors.js";
import { RATE_LIMIT_COLLECTION } from "../durable/request-records.js";
import type { AppContext, NamedLimiter, RateLimiters } from "./types.js";

export type { NamedLimiter, RateLimiters };

/**
 * RateLimiterMongo with a store operation that is atomic on FerretDB too. The library counts
 * with findOneAndUpdate + `$inc`, which FerretDB v1 (the embedded database) runs as a read
 * and a rewrite: 20 concurrent sign-ups against a limit of 5 all passed. Here each counted
 * request inserts one slot document `<key>:<window>:<n>` for the first free n (a unique
 * `_id` insert, atomic everywhere, as domain/accounts/quota.ts claims the monthly allowance), in
 * fixed windows of `duration` seconds; the library does the rest (results, headers' data).
 */
/** One counted request of a window: `<key>:<window>:<n>`, unique by `_id`. */
interface SlotRecord {
  _id: string;
  key: string;
  window: number;
  expire: Date;
}

class RateLimiterSlots extends RateLimiterMongo {
  declare _collection: Collection<SlotRecord>;

  async _upsert(key: string, points: number, msDuration: number): Promise<unknown> {
    const now = Date.now();
    const window = Math.floor(now / msDuration) * msDuration;
    const expire = new Date(window + msDuration);
    const max = this.points;
    // The count is a hint (it trails concurrent inserts); the unique insert decides.
    let slot = await this._collection.countDocuments({ key, window });
    for (let taken = 0; taken < points; slot++) {
      if (slot >= max) return { points: max + points, expire };
      try {
        await this._collection.insertOne({
          _id: `${key}:${window}:${slot}`,
          key,
          window,
          expire,
        });
        taken++;
      } catch (error) {
        if (!isDuplicateKey(error)) throw error;
      }
    }
    return { points: slot, expire };
  }
}

/**
 * Per-address limits for the routes that take no key. With a database connection the
 * counters live in it (rate-limiter-flexible's Mongo store), so every process of the service
 * counts against the same limit; without one (unit use) they live in this process.
 */
export function createRateLimiters(options: {
  signupMax: number;
  signupWindowMs: number;
  webhookMax?: number | undefined;
  webhookWindowMs?: number | undefined;
  connection?: Connection | undefined;
}): RateLimiters {
  const make = (name: string, points: number, windowMs: number): NamedLimiter => {
    const duration = Math.ceil(windowMs / 1000);
    const limiter = options.connection
      ? new RateLimiterSlots({
          storeClient: options.connection.getClient(),
          dbName: options.connection.name,
          tableName: RATE_LIMIT_COLLECTION,
          keyPrefix: name,
          points,
          duration,
          // The index is made by ensureRateLimitIndexes: the library's unique `key` index
          // does not fit one document per request, and FerretDB v1 has no TTL indexes.
          disableIndexesCreation: true,
        })
      : new RateLimiterMemory({ keyPrefix: name, points, duration });
    return { name, points, windowS: duration, limiter };
  };
  return {
    signup: make("signup", options.signupMax, options.signupWindowMs),
    incomingWebhook: make(
      "automation-webhook",
      options.webhookMax ?? 120,
      options.webhookWindowMs ?? 60_000,
    ),
  };
}

/**
 * `RateLimit-Policy` and `RateLimit` as draft-ietf-httpapi-ratelimit-headers-10 writes them
 * (Structured Fields lists: `"name";q=<quota>;w=<window s>` and
 * `"name";r=<remaining>;t=<seconds until reset>`).
 */
function setRateLimitHeaders(ctx: AppContext, named: NamedLimiter, res: RateLimiterRes): void {
  const reset = Math.max(0, Math.ceil(res.msBeforeNext / 1000));
  ctx.set("RateLimit-Policy", `"${named.name}";q=${named.points};w=${named.windowS}`);
  ctx.set("RateLimit", `"${named.name}";r=${Math.max(0, res.remainingPoints)};t=${reset}`);
}

/**
 * Consumes one point for `key`; sets the RateLimit headers either way, and throws 429
 * `rate_limited` with Retry-After when the limit is used up.
 */
export async function consume(ctx: AppContext, named: NamedLimiter, key: string): Promise<void> {
  let res: RateLimiterRes;
  try {
    res = await named.limiter.consume(key);
  } catch (error) {
    if (!(error instanceof RateLimiterRes)) throw error;
    setRateLimitHeaders(ctx, named, error);
    const retry = Math.max(1, Math.ceil(error.msBeforeNext / 1000));
    const limited = errors.rateLimited(retry);
    // The error middleware answers with the error's own headers: carry the RateLimit ones.
    throw new AppError(limited.status, limited.code, limited.message, undefined, {
      ...limited.headers,
      "RateLimit-Policy": String(ctx.response.get("RateLimit-Policy")),
      RateLimit: String(ctx.response.get("RateLimit")),
    });
  }
  setRateLimitHeaders(ctx, named, res);
}
