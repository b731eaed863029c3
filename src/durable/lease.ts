import type { Models } from "../db/models.js";
import { markerKind, type Marker } from "./once.js";
import { claimMarker, markerFields, markersFields, setMarkerFields } from "./markers.js";
import { processIdentity } from "../queue/identity.js";

/*
 * Leases of long-running work (a pipeline stage, a health scan) that must run once at a time
 * and be taken over when its worker dies: attempt n is the once-marker `attempt(n)` (one of
 * the lease kinds below: `lease:<task>:<stage>:<n>`, `health-lease:<report>:<n>`), whose
 * holder beats `heartbeat_at` while it works and sets `released` when it stops.
 */

/** Attempt `attempt` of a stage's lease (pipeline/runner.ts, pipeline/sweeper.ts). */
export const stageLease = markerKind(
  "lease",
  "lease",
  (taskId: string, stage: string, attempt: number) => [taskId, stage, attempt],
);

/** Attempt `attempt` of a health scan's lease (domain/health/scan.ts). */
export const healthLease = markerKind(
  "health-lease",
  "health-lease",
  (reportId: string, attempt: number) => [reportId, attempt],
);

export type Lease = { id: string; attempt: number } | "busy" | "exhausted";

export interface LeaseOptions {
  /** The once-marker of attempt n (`stageLease`, `healthLease`). */
  attempt: (attempt: number) => Marker;
  /** A holder that has not beaten for this long is dead; its attempt is taken over. */
  ttlMs: number;
  maxAttempts: number;
  holder?: string;
}

/**
 * Takes the first attempt not taken yet; a taken attempt whose holder still beats (within
 * `ttlMs`) and has not released it means the work is running elsewhere ("busy"), and
 * `maxAttempts` taken attempts mean it was given up on ("exhausted").
 */
export async function acquireLease(models: Models, options: LeaseOptions): Promise<Lease> {
  const { ttlMs, maxAttempts, holder } = options;
  for (let attempt = 0; attempt < maxAttempts; attempt += 1) {
    const marker = options.attempt(attempt);
    const id = marker.id;
    // holder_id lets a restarted process of this DATA_DIR release it at once (identity.ts).
    const fields = {
      heartbeat_at: new Date(),
      holder_id: processIdentity(),
      ...(holder ? { holder } : {}),
    };
    if (await claimMarker(models, marker, fields)) return { id, attempt };
    const lease = await markerFields(models, marker);
    const beat = lease?.heartbeat_at instanceof Date ? lease.heartbeat_at.getTime() : 0;
    if (lease?.released !== true && Date.now() - beat < ttlMs) return "busy";
  }
  return "exhausted";
}

/**
 * When the live attempt of a busy lease expires if its holder stops beating now: its last
 * heartbeat plus `ttlMs`. Undefined when no attempt is live any more (released, or its
 * holder stopped beating `ttlMs` ago): the next run can take the next attempt at once.
 */
export async function leaseExpiry(
  models: Models,
  options: Pick<LeaseOptions, "attempt" | "ttlMs" | "maxAttempts">,
  now = Date.now(),
): Promise<{ attempt: number; at: Date } | undefined> {
  const ids = Array.from({ length: options.maxAttempts }, (_, n) => options.attempt(n).id);
  const leases = await markersFields(models, ids, ["_id", "heartbeat_at", "released"]);
  let live: { attempt: number; at: Date } | undefined;
  for (const lease of leases) {
    if (lease.released === true || !(lease.heartbeat_at instanceof Date)) continue;
    const at = lease.heartbeat_at.getTime() + options.ttlMs;
    if (at <= now) continue;
    if (!live || at > live.at.getTime())
      live = { attempt: ids.indexOf(lease._id), at: new Date(at) };
  }
  return live;
}

/** The holder's heartbeat. */
export async function beatLease(models: Models, leaseId: string): Promise<void> {
  await setMarkerFields(models, leaseId, { heartbeat_at: new Date() });
}

/** The holder stopped: the next run may take the next attempt at once. */
export async function releaseLease(models: Models, leaseId: string): Promise<void> {
  await setMarkerFields(models, leaseId, { released: true });
}

/** What a leased run's work gets: its attempt, a signal that stops it, and its controls. */
export interface LeasedRun {
  lease: { id: string; attempt: number };
  signal: AbortSignal;
  /** Stops the work (its signal aborts with `reason`). */
  abort(reason: Error): void;
  /** Keeps the lease taken at the end: the work's outcome is stored, nothing runs it again. */
  keep(): void;
}

/**
 * Runs `work` once at a time across processes, taken over when its worker dies: the one
 * durable-job runner of the pipeline's stages and the health scans. It takes the lease
 * (`busy` and `exhausted` are answered without running anything), beats it every quarter of
 * `ttlMs` (with `beat`, e.g. the job's own touch), aborts the work after `timeoutMs`, and
 * releases the lease when the work stops unless it called `keep()`.
 */
export async function runLeased<T>(
  models: Models,
  options: LeaseOptions & {
    /** Called at every heartbeat after the lease's own. */
    beat?: () => Promise<void>;
    onBeatError(error: unknown): void;
    timeout?: { ms: number; reason: string };
  },
  work: (run: LeasedRun) => Promise<T>,
): Promise<{ value: T } | "busy" | "exhausted"> {
  const lease = await acquireLease(models, options);
  if (lease === "busy" || lease === "exhausted") return lease;
  const controller = new AbortController();
  let kept = false;
  const heartbeat = setInterval(
    () =>
      void (async () => {
        await beatLease(models, lease.id);
        await options.beat?.();
      })().catch(options.onBeatError),
    Math.max(250, Math.floor(options.ttlMs / 4)),
  );
  heartbeat.unref();
  const timer = options.timeout
    ? setTimeout(() => controller.abort(new Error(options.timeout!.reason)), options.timeout.ms)
    : undefined;
  timer?.unref();
  try {
    const value = await work({
      lease,
      signal: controller.signal,
      abort: (reason) => controller.abort(reason),
      keep: () => {
        kept = true;
      },
    });
    return { value };
  } finally {
    clearInterval(heartbeat);
    if (timer) clearTimeout(timer);
    if (!kept) await releaseLease(models, lease.id).catch(() => undefined);
  }
}
