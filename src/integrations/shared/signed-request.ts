import { createHmac, timingSafeEqual } from "node:crypto";
import { z, type ZodType } from "zod";
import { errors } from "../../errors.js";

/*
 * What the Slack, Linear and Jira doors check, in this order, before they act on a request:
 *  1. the signature (401 `unauthorized`; nothing is read before it holds);
 *  2. the signed time, against the vendor's replay window in both directions (401: a request
 *     dated ahead is as suspect as a stale one, since a captured request could be replayed
 *     until its future date passes);
 *  3. the body, read as JSON and checked against the door's schema (400 `invalid_json` or
 *     `validation_failed`, with each problem listed): a signed body the door cannot read is
 *     the sender's mistake, never a 500.
 */

/** A vendor's replay window: how old a signed time may be, and how far ahead of this clock. */
export interface ReplayWindow {
  pastMs: number;
  futureMs: number;
  /** The window in words, for the refusal ("the 5-minute window"). */
  words: string;
}

/** Whether `hex` is HMAC-SHA256 of `data` under `secret`, compared in constant time. */
export function hmacHexValid(secret: string, data: string, hex: string): boolean {
  if (!/^[0-9a-f]{64}$/i.test(hex)) return false;
  const expected = createHmac("sha256", secret).update(data).digest();
  return timingSafeEqual(expected, Buffer.from(hex, "hex"));
}

/**
 * Refuses (401) a signed time (ms since the epoch) outside the window around this clock;
 * `what` names the request and its time field ("The Slack request's timestamp").
 */
export function checkReplayWindow(sentMs: number, window: ReplayWindow, what: string): void {
  const age = Date.now() - sentMs;
  if (Number.isFinite(age) && age <= window.pastMs && age >= -window.futureMs) return;
  throw errors.unauthorized(
    `${what} is outside ${window.words} around this server's clock: a replayed request, or a clock out of step.`,
  );
}

/** A signed body's JSON; 400 `invalid_json` when it is not JSON. */
export function signedJson(text: string, what: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw errors.invalidJson(`The ${what} is not valid JSON.`);
  }
}

/** A signed value read with its schema; 400 `validation_failed` listing each problem. */
export function signedShape<T>(schema: ZodType<T>, value: unknown, where: string, what: string): T {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  throw errors.validation(
    parsed.error.issues.map((issue) => ({
      path: [where, ...issue.path.map(String)].join("."),
      message: issue.message,
    })),
    `The ${what} does not have the shape this door reads.`,
  );
}

/** A signed body that must be a JSON object (its time is read from it next). */
export function signedObject(text: string, what: string): Record<string, unknown> {
  return signedShape(z.looseObject({}), signedJson(text, what), "body", what);
}
