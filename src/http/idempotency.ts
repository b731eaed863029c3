import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from "node:crypto";
import { setTimeout as delay } from "node:timers/promises";
import {
  completeRecord,
  dropPendingRecord,
  dropRecordCreatedAt,
  findRecord,
  insertPendingRecord,
} from "../durable/request-records.js";
import type { Models } from "../db/models.js";
import { AppError, errors } from "../errors.js";
import { sha256 } from "../util/ids.js";

/**
 * `Idempotency-Key` on creating POSTs (docs/api.md, "Idempotency"). The first request with a
 * key inserts a pending record (a unique `_id` insert: the lock, atomic on FerretDB and
 * MongoDB alike, as durable/once.ts), runs, and stores its answer; a repeat with the same body
 * within 24 h gets that answer again without running; another body is 422.
 */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60_000;
/** A repeat that finds the first request still running waits this long, then answers 409. */
const WAIT_FOR_FIRST_MS = 10_000;
/** A pending record older than this was left by a process that died mid-request. */
const PENDING_LEASE_MS = 2 * 60_000;

const KEY_PATTERN = /^[\x20-\x7e]{1,255}$/;

export interface StoredAnswer {
  status: number;
  body: unknown;
  headers: Record<string, string>;
}

export type Claim =
  | { kind: "run"; finish(answer: StoredAnswer): Promise<void>; abandon(): Promise<void> }
  | { kind: "replay"; answer: StoredAnswer };

/** 400 unless the header value is 1–255 printable ASCII characters. */
export function checkIdempotencyKey(value: string): void {
  if (!KEY_PATTERN.test(value)) {
    throw errors.validation([
      {
        path: "header.Idempotency-Key",
        message: "must be 1 to 255 printable ASCII characters",
      },
    ]);
  }
}

/** Object keys sorted at every level, so the same JSON in another key order is the same body. */
function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (value && typeof value === "object") {
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .map((k) => [k, canonical((value as Record<string, unknown>)[k])]),
    );
  }
  return value;
}

export function requestFingerprint(request: {
  method: string;
  path: string;
  query: Record<string, unknown>;
  body: unknown;
}): string {
  return sha256(
    JSON.stringify([
      request.method,
      request.path,
      canonical(request.query),
      canonical(request.body ?? null),
    ]),
  );
}

/**
 * The stored answer is sealed with a key derived from the client's Idempotency-Key, which is
 * stored only hashed: a reader of the database cannot see the answers (for POST /keys/generate
 * the answer holds a new API key's value).
 */
function sealingKey(scope: string, key: string): Buffer {
  return Buffer.from(hkdfSync("sha256", key, scope, "foreman idempotency answer", 32));
}

function seal(scope: string, key: string, answer: StoredAnswer): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv("aes-256-gcm", sealingKey(scope, key), iv);
  const data = Buffer.concat([cipher.update(JSON.stringify(answer), "utf8"), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), data]).toString("base64");
}

function unseal(scope: string, key: string, sealed: string): StoredAnswer {
  const raw = Buffer.from(sealed, "base64");
  const decipher = createDecipheriv("aes-256-gcm", sealingKey(scope, key), raw.subarray(0, 12));
  decipher.setAuthTag(raw.subarray(12, 28));
  const text = Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString();
  return JSON.parse(text) as StoredAnswer;
}

/**
 * Claims `key` in `scope` for a request with `fingerprint`: either this request runs (and
 * must call `finish` or `abandon`), or the stored answer of the first one is returned.
 * Throws 422 `idempotency_key_reused` for another request under the same key, and 409
 * `conflict` when the first request is still running after a wait.
 */
export async function claimIdempotencyKey(
  models: Models,
  scope: string,
  key: string,
  fingerprint: string,
): Promise<Claim> {
  const id = sha256(`${scope}\n${key}`);
  const waitUntil = Date.now() + WAIT_FOR_FIRST_MS;
  let pause = 20;
  for (;;) {
    const now = new Date();
    if (await insertPendingRecord(models, id, fingerprint, IDEMPOTENCY_TTL_MS, now)) {
      return {
        kind: "run",
        async finish(answer) {
          await completeRecord(models, id, answer.status, seal(scope, key, answer));
        },
        async abandon() {
          // A failed first request stored nothing: the client may retry with the same key.
          await dropPendingRecord(models, id);
        },
      };
    }
    const row = await findRecord(models, id);
    if (!row) continue; // deleted meanwhile (abandoned or expired): try to take it again
    const stale =
      row.expires_at.getTime() <= now.getTime() ||
      (row.state === "pending" && now.getTime() - row.created_at.getTime() > PENDING_LEASE_MS);
    if (stale) {
      await dropRecordCreatedAt(models, id, row.created_at);
      continue;
    }
    if (row.fingerprint !== fingerprint) {
      throw new AppError(
        422,
        "idempotency_key_reused",
        "This Idempotency-Key was already used with another request (method, path, query or body); use a new key.",
      );
    }
    if (row.state === "done" && row.sealed) {
      return { kind: "replay", answer: unseal(scope, key, row.sealed) };
    }
    if (Date.now() >= waitUntil) {
      throw new AppError(
        409,
        "conflict",
        "A request with this Idempotency-Key is still in progress; retry shortly.",
        undefined,
        { "Retry-After": "1" },
      );
    }
    await delay(pause);
    pause = Math.min(pause * 2, 250);
  }
}
