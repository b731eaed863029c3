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
import { AppError, errors, isDatabaseBusy, isTransientDatabaseError } from "../errors.js";
import { sha256 } from "../util/ids.js";

/**
 * `Idempotency-Key` on creating POSTs (docs/api.md, "Idempotency"). The first request with a
 * key inserts a pending record (a unique `_id` insert: the lock, atomic on FerretDB and
 * MongoDB alike, as durable/once.ts), runs, and stores its answer; a repeat with the same body
 * within 24 h gets that answer again without running; another body is 422.
 *
 * Concurrent repeats wait for the first request's answer. A repeat in the same process waits
 * on the first one in memory (`flights`): no failed insert and no polling per repeat, which
 * under load (FerretDB serialises writes on SQLite) slowed the first request itself past the
 * repeats' wait. A repeat whose first request runs in another process polls the record.
 */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60_000;
/** How long a repeat waits for the first request when the caller gives no deadline. */
const WAIT_FOR_FIRST_MS = 10_000;
/** A pending record older than this was left by a process that died mid-request. */
const PENDING_LEASE_MS = 2 * 60_000;
/** Storing or dropping the first request's record is retried this long through a busy database. */
const SETTLE_RETRY_MS = 5_000;
const POLL_MIN_MS = 20;
const POLL_MAX_MS = 500;

/**
 * The first requests running in this process, by record id, per database: settled when the
 * request stored its answer or dropped its record (or found the record taken).
 */
const flights = new WeakMap<Models, Map<string, Promise<void>>>();

function flightsOf(models: Models): Map<string, Promise<void>> {
  let map = flights.get(models);
  if (!map) {
    map = new Map();
    flights.set(models, map);
  }
  return map;
}

/** True when `flight` settled before `until` (epoch ms). */
async function settledBy(flight: Promise<void>, until: number): Promise<boolean> {
  const left = until - Date.now();
  if (left <= 0) return false;
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), left);
  });
  try {
    return await Promise.race([flight.then(() => true as const), expired]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Runs a database call again while it fails with an error `retry` accepts (the database busy
 * or away for a moment), until `until`; then the last error is thrown (the error middleware
 * answers it with 503 and Retry-After).
 */
async function outlast<T>(
  call: () => Promise<T>,
  until: number,
  retry: (error: unknown) => boolean,
): Promise<T> {
  let pause = 50;
  for (;;) {
    try {
      return await call();
    } catch (error) {
      if (!retry(error) || Date.now() + pause >= until) throw error;
      await delay(pause);
      pause = Math.min(pause * 2, 500);
    }
  }
}

function stillRunning(): AppError {
  return new AppError(
    409,
    "conflict",
    "A request with this Idempotency-Key is still in progress; retry shortly.",
    undefined,
    { "Retry-After": "1" },
  );
}

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
 * `conflict` when the first request is still running at `waitUntil` (epoch ms; the HTTP door
 * passes just before its own handler deadline, by which the first request has answered too).
 */
export async function claimIdempotencyKey(
  models: Models,
  scope: string,
  key: string,
  fingerprint: string,
  waitUntil = Date.now() + WAIT_FOR_FIRST_MS,
): Promise<Claim> {
  const id = sha256(`${scope}\n${key}`);
  const running = flightsOf(models);
  let pause = POLL_MIN_MS;
  for (;;) {
    const flight = running.get(id);
    if (flight) {
      // The first request runs in this process: wait for it, then read what it stored.
      if (!(await settledBy(flight, waitUntil))) throw stillRunning();
    } else {
      const token = randomBytes(12).toString("base64url");
      let settle!: () => void;
      const mine = new Promise<void>((resolve) => (settle = resolve));
      running.set(id, mine);
      const release = () => {
        if (running.get(id) === mine) running.delete(id);
        settle();
      };
      let inserted: boolean;
      try {
        // A busy database (SQLite locked, no free connection) is waited out, not a failure.
        inserted = await outlast(
          () => insertPendingRecord(models, id, token, fingerprint, IDEMPOTENCY_TTL_MS),
          waitUntil,
          isDatabaseBusy,
        );
      } catch (error) {
        release();
        throw error;
      }
      if (inserted) return runClaim(models, id, token, scope, key, release);
      release();
    }
    const row = await outlast(() => findRecord(models, id), waitUntil, isDatabaseBusy);
    const now = Date.now();
    if (!row) {
      // Deleted meanwhile (abandoned or expired): try to take it again.
      if (now >= waitUntil) throw stillRunning();
      continue;
    }
    const stale =
      row.expires_at.getTime() <= now ||
      (row.state === "pending" && now - row.created_at.getTime() > PENDING_LEASE_MS);
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
    if (now >= waitUntil) throw stillRunning();
    // Running in another process (or this one's first request has just settled): poll.
    if (!running.has(id)) {
      await delay(Math.min(pause, Math.max(1, waitUntil - now)));
      pause = Math.min(pause * 2, POLL_MAX_MS);
    }
  }
}

/** The claim of the request that inserted the record: it stores its answer or drops it. */
function runClaim(
  models: Models,
  id: string,
  token: string,
  scope: string,
  key: string,
  release: () => void,
): Claim {
  // Once stored or dropped, a repeat would find a record left pending for the whole lease
  // (2 minutes of 409s, then the request ran again): a busy database is outlasted here.
  const settleBy = () => Date.now() + SETTLE_RETRY_MS;
  return {
    kind: "run",
    async finish(answer) {
      const sealed = seal(scope, key, answer);
      try {
        await outlast(
          () => completeRecord(models, id, token, answer.status, sealed),
          settleBy(),
          isTransientDatabaseError,
        );
      } finally {
        release();
      }
    },
    async abandon() {
      try {
        // A failed first request stored nothing: the client may retry with the same key.
        await outlast(
          () => dropPendingRecord(models, id, token),
          settleBy(),
          isTransientDatabaseError,
        );
      } finally {
        release();
      }
    },
  };
}
