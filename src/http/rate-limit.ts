import { RateLimiterMemory, RateLimiterRes } from "rate-limiter-flexible";
import { errors } from "../errors.js";

export interface RateLimiters {
  signup: RateLimiterMemory;
  incomingWebhook: RateLimiterMemory;
}

/**
 * Per-address limits for the routes that take no key. The counters live in each process;
 * behind several API processes the effective limit is that many times higher (docs say so).
 */
export function createRateLimiters(options: {
  signupMax: number;
  signupWindowMs: number;
  webhookMax?: number | undefined;
  webhookWindowMs?: number | undefined;
}): RateLimiters {
  return {
    signup: new RateLimiterMemory({
      points: options.signupMax,
      duration: Math.ceil(options.signupWindowMs / 1000),
    }),
    incomingWebhook: new RateLimiterMemory({
      points: options.webhookMax ?? 120,
      duration: Math.ceil((options.webhookWindowMs ?? 60_000) / 1000),
    }),
  };
}

/** Consumes one point for `key` or throws 429 `rate_limited` with Retry-After. */
export async function consume(limiter: RateLimiterMemory, key: string): Promise<void> {
  try {
    await limiter.consume(key);
  } catch (error) {
    if (error instanceof RateLimiterRes)
      throw errors.rateLimited(Math.max(1, Math.ceil(error.msBeforeNext / 1000)));
    throw error;
  }
}
