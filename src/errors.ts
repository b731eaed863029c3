/**
 * The one place that names error codes. Domain code throws these; the HTTP error
 * middleware renders them as error bodies (docs/api.md, "Errors"); anything else becomes a 500
 * `internal`.
 */
export type ErrorCode =
  | "invalid_json"
  | "validation_failed"
  | "unsupported_media_type"
  | "unauthorized"
  | "forbidden"
  | "not_found"
  | "method_not_allowed"
  | "request_timeout"
  | "invalid_state"
  | "conflict"
  | "idempotency_key_reused"
  | "payload_too_large"
  | "monthly_limit_reached"
  | "rate_limited"
  | "internal"
  | "upstream_unavailable"
  | "insufficient_storage"
  | "not_ready"
  | "gone";

export interface FieldProblem {
  path: string;
  message: string;
}

export class AppError extends Error {
  constructor(
    readonly status: number,
    readonly code: ErrorCode,
    message: string,
    readonly details?: unknown,
    readonly headers?: Record<string, string>,
  ) {
    super(message);
    this.name = "AppError";
  }
}

export const errors = {
  invalidJson: (message = "The request body is not valid JSON.") =>
    new AppError(400, "invalid_json", message),
  validation: (details: FieldProblem[], message = "The request is not valid.") =>
    new AppError(400, "validation_failed", message, details),
  unsupportedMediaType: () =>
    new AppError(
      415,
      "unsupported_media_type",
      "Send the body as JSON with Content-Type: application/json.",
    ),
  unauthorized: (message = "A valid API key is required in the X-API-Key header.") =>
    new AppError(401, "unauthorized", message),
  forbidden: (message: string) => new AppError(403, "forbidden", message),
  notFound: (what = "resource") => new AppError(404, "not_found", `No such ${what}.`),
  methodNotAllowed: () =>
    new AppError(
      405,
      "method_not_allowed",
      "This method is not allowed on this path; the Allow header lists the ones that are.",
    ),
  invalidState: (message: string) => new AppError(409, "invalid_state", message),
  conflict: (message: string) => new AppError(409, "conflict", message),
  payloadTooLarge: (limit: number) =>
    new AppError(413, "payload_too_large", `The request body is larger than ${limit} bytes.`),
  monthlyLimit: (limit: number) =>
    new AppError(
      429,
      "monthly_limit_reached",
      `This account has used its ${limit} tasks for this month; the allowance resets on the first day of next month (UTC), or an operator can move the account to the pro tier.`,
    ),
  rateLimited: (retryAfterS: number) =>
    new AppError(
      429,
      "rate_limited",
      `Too many requests; retry in ${retryAfterS} seconds.`,
      undefined,
      {
        "Retry-After": String(retryAfterS),
      },
    ),
  upstream: (message: string, status = 502) =>
    new AppError(status, "upstream_unavailable", message),
  notReady: (message: string) => new AppError(503, "not_ready", message),
  /** Existed, but is no longer kept (a trajectory past TRAJECTORY_RETENTION_DAYS). */
  gone: (message: string) => new AppError(410, "gone", message),
  /** The worker's disk is nearly full (DATA_DIR_MIN_FREE_MB): nothing new is started. */
  insufficientStorage: (message: string, retryAfterS: number) =>
    new AppError(503, "insufficient_storage", message, undefined, {
      "Retry-After": String(retryAfterS),
    }),
  databaseUnavailable: (retryAfterS = DATABASE_RETRY_AFTER_S) =>
    new AppError(
      503,
      "upstream_unavailable",
      `The database is unavailable for a moment; retry in ${retryAfterS} seconds.`,
      undefined,
      { "Retry-After": String(retryAfterS) },
    ),
  /** The database is up but could not serve the call now (busy, locked, out of connections). */
  databaseBusy: (retryAfterS = DATABASE_BUSY_RETRY_AFTER_S) =>
    new AppError(
      503,
      "upstream_unavailable",
      `The database is too busy to answer right now; retry in ${retryAfterS} second${retryAfterS === 1 ? "" : "s"}.`,
      undefined,
      { "Retry-After": String(retryAfterS) },
    ),
};

/** What a client is told to wait while the database is away (it restarts within seconds). */
export const DATABASE_RETRY_AFTER_S = 5;
/** What a client is told to wait when the database was too busy for its request. */
export const DATABASE_BUSY_RETRY_AFTER_S = 1;

/** Driver errors that mean "no database right now", not a bug: network, selection, shutdown. */
const DATABASE_OUTAGE_NAMES = new Set([
  "MongoServerSelectionError",
  "MongooseServerSelectionError",
  "MongoNetworkError",
  "MongoNetworkTimeoutError",
  "MongoNotConnectedError",
  "MongoPoolClearedError",
  "MongoTopologyClosedError",
  "MongoServerClosedError",
]);
/*
 * Mongoose's own refusal while the connection is down (bufferCommands is off, db/connection.ts):
 * "Cannot call `tasks.findOne()` before initial connection is complete ..." after a reconnect
 * started, and "Connection was force closed".
 */
const MONGOOSE_OUTAGE = /before initial connection is complete|Connection was force closed/;
/*
 * A socket error the driver let through unwrapped (mongodb 7 rethrows a write's EPIPE on a
 * connection whose server was killed): a network errno raised inside the driver.
 */
const SOCKET_ERRNOS = new Set(["EPIPE", "ECONNRESET", "ECONNREFUSED", "ENOENT", "ETIMEDOUT"]);
const DRIVER_FRAME = /[\\/]node_modules[\\/]mongodb[\\/]lib[\\/]/;
/** Server answers of a server going down: InterruptedAtShutdown, ShutdownInProgress, ... */
const DATABASE_OUTAGE_CODES = new Set([91, 11600, 11602, 189, 10107, 13436]);

/** True when `error` (or its cause) says the database cannot be reached right now. */
export function isDatabaseOutage(error: unknown): boolean {
  for (let e = error, depth = 0; e && typeof e === "object" && depth < 5; depth += 1) {
    const { name, code, cause } = e as { name?: unknown; code?: unknown; cause?: unknown };
    if (typeof name === "string" && DATABASE_OUTAGE_NAMES.has(name)) return true;
    const message = (e as { message?: unknown }).message;
    if (name === "MongooseError" && typeof message === "string" && MONGOOSE_OUTAGE.test(message))
      return true;
    if (typeof code === "number" && name === "MongoServerError" && DATABASE_OUTAGE_CODES.has(code))
      return true;
    const stack = (e as { stack?: unknown }).stack;
    if (
      typeof code === "string" &&
      SOCKET_ERRNOS.has(code) &&
      typeof stack === "string" &&
      DRIVER_FRAME.test(stack)
    )
      return true;
    e = cause;
  }
  return false;
}

/*
 * A database that is there but could not serve one call now: the same call a moment later
 * works. Not a bug of the request, so never a 500: 503 with Retry-After
 * (docs/api.md, "Errors").
 * - the driver's pool had no free connection within waitQueueTimeoutMS (db/connection.ts:
 *   every connection busy with slow calls under load), or a call's own timeoutMS ran out;
 * - MongoDB's transient server answers: WriteConflict (112), LockTimeout (24), LockBusy (46),
 *   MaxTimeMSExpired (50), ExceededTimeLimit (262), and anything labelled
 *   TransientTransactionError;
 * - FerretDB v1 on SQLite (the embedded database) answers a write that found the database
 *   locked past its busy_timeout as InternalError (code 1) with SQLite's text,
 *   "database is locked (5) (SQLITE_BUSY)" (or SQLITE_LOCKED, "database table is locked").
 */
const DATABASE_BUSY_NAMES = new Set(["MongoWaitQueueTimeoutError", "MongoOperationTimeoutError"]);
const DATABASE_BUSY_CODES = new Set([24, 46, 50, 112, 262]);
const SQLITE_BUSY = /database (table )?is locked|SQLITE_(BUSY|LOCKED)/;

/** True when `error` (or its cause) says the database was too busy for this call. */
export function isDatabaseBusy(error: unknown): boolean {
  for (let e = error, depth = 0; e && typeof e === "object" && depth < 5; depth += 1) {
    const { name, code, cause, message } = e as {
      name?: unknown;
      code?: unknown;
      cause?: unknown;
      message?: unknown;
    };
    if (typeof name === "string" && DATABASE_BUSY_NAMES.has(name)) return true;
    if (name === "MongoServerError" || name === "MongoBulkWriteError") {
      if (typeof code === "number" && DATABASE_BUSY_CODES.has(code)) return true;
      if (code === 1 && typeof message === "string" && SQLITE_BUSY.test(message)) return true;
      const labels = (e as { errorLabels?: unknown }).errorLabels;
      if (Array.isArray(labels) && labels.includes("TransientTransactionError")) return true;
    }
    e = cause;
  }
  return false;
}

/** The database is away or too busy: the call can succeed a moment later, unchanged. */
export function isTransientDatabaseError(error: unknown): boolean {
  return isDatabaseOutage(error) || isDatabaseBusy(error);
}

export function isAppError(error: unknown): error is AppError {
  return error instanceof AppError;
}
