import type { Models } from "../db/models.js";
import { MongoBackend, type MongoJobRepository } from "@agendajs/mongo-backend";
import { Agenda, InMemoryNotificationChannel, type Job } from "agenda";
import type { Db, Document } from "mongodb";
import mongoose from "mongoose";
import { createHash } from "node:crypto";
import { createInsertBatcher, type BatchedInsert } from "../db/insert-batcher.js";
import { isDuplicateKey } from "../util/duplicate-key.js";
import { ExclusiveJobRepository } from "../durable/exclusive-locks.js";
import type { ZodType } from "zod";
import type { Logger } from "../util/logger.js";
import { outsideSecretScopes } from "../util/redact.js";

/**
 * A job kind: a name, a zod schema for its payload and a handler. Payloads are checked when
 * enqueued and again when run, so a malformed job fails loudly instead of half-running.
 */
export interface JobKind<T> {
  name: string;
  schema: ZodType<T>;
  concurrency?: number;
  run(data: T, job: Job<T>): Promise<void>;
}

export interface Scheduler {
  agenda: Agenda;
  define<T>(kind: JobKind<T>): void;
  /**
   * Queues a job to run now, or at `at`. With `unique`, a job matching those fields (e.g.
   * `{"data.task_id": id}`) is created once and never re-queued, so enqueueing is idempotent.
   * Resolves `false` when that job was already queued, `true` otherwise.
   */
  enqueue<T>(
    kind: Pick<JobKind<T>, "name" | "schema">,
    data: T,
    options?: EnqueueOptions,
  ): Promise<boolean>;
  /** Starts processing (worker role only). */
  start(): Promise<void>;
  /** Whether this process runs jobs now: started, and not stopping. */
  readonly running: boolean;
  /**
   * Graceful stop: waits up to `graceMs` for running jobs, then releases the locks of jobs
   * locked here but not started, so another worker picks them up at once. Jobs still running
   * keep their locks until the lock lifetime, as after a crash.
   */
  stop(graceMs: number): Promise<void>;
}

export interface EnqueueOptions {
  unique?: Record<string, unknown>;
  /** When the job is due (default: now). */
  at?: Date;
}

export interface SchedulerOptions {
  db: Db;
  logger: Logger;
  name: string;
  concurrency: number;
  lockLifetimeMs: number;
  processEveryMs?: number;
}

/**
 * Agenda calls `backend.connect()` from its constructor without a catch, so a failure there
 * (database gone, connection closed) would be an unhandled rejection that ends the process.
 * This backend connects once, never rejects to Agenda, and reports the error to our caller.
 */
class GuardedMongoBackend extends MongoBackend {
  private connecting: Promise<void> | undefined;
  connectError: unknown;
  constructor(db: Db) {
    super({ mongo: db, collection: "jobs" });
    // Locks that hold on FerretDB too (see durable/exclusive-locks.ts).
    (this as unknown as { _repository: MongoJobRepository })._repository =
      new ExclusiveJobRepository({ mongo: db, db: { collection: "jobs" } });
  }
  override connect(): Promise<void> {
    this.connecting ??= super.connect().catch((error: unknown) => {
      this.connectError = error;
    });
    return this.connecting;
  }
}

/** Fields Agenda's MongoDB backend stores as null when a job does not set them (saveJob). */
const NULL_FIELDS = [
  "lockedAt",
  "lastFinishedAt",
  "failedAt",
  "failCount",
  "failReason",
  "repeatTimezone",
  "lastRunAt",
  "repeatInterval",
  "repeatAt",
  "disabled",
  "progress",
  "debounceStartedAt",
  "fork",
  "startDate",
  "endDate",
  "skipDays",
] as const;

/** What names a unique job (its `_id` is derived from it): its name and `unique` fields. */
function uniqueJobKey(
  name: string,
  unique: Record<string, unknown> | undefined,
): string | undefined {
  return (
    unique && JSON.stringify([name, Object.entries(unique).sort(([a], [b]) => a.localeCompare(b))])
  );
}

/**
 * Queues a job to run now with one insert. With `unique`, it is queued once for those
 * fields: its `_id` is derived from them.
 * Agenda's own `unique()` is a find-and-upsert on those fields: no database index serves it on
 * FerretDB, which scans the whole jobs collection for it (about 1 ms per 4 stored jobs,
 * holding up other writes meanwhile), and it is not atomic there. A duplicate `_id` is the
 * atomic "already queued" on every backend.
 */
async function enqueueJob(
  agenda: Agenda,
  /** The job store, when this process runs workers (otherwise no hint is ever taken). */
  store: ExclusiveJobRepository | undefined,
  /** The jobs collection's insert, grouped per turn of the event loop (db/insert-batcher.ts). */
  insertJob: BatchedInsert<Document>,
  processName: string,
  name: string,
  data: unknown,
  unique: Record<string, unknown> | undefined,
  at: Date | undefined,
): Promise<boolean> {
  const key = uniqueJobKey(name, unique);
  const id = key
    ? new mongoose.Types.ObjectId(createHash("sha256").update(key).digest("hex").slice(0, 24))
    : new mongoose.Types.ObjectId();
  const now = new Date();
  const job = agenda.create(name, data).schedule(at && at > now ? at : now);
  const {
    _id: _ignored,
    unique: _u,
    uniqueOpts: _o,
    ...props
  } = job.attrs as unknown as Record<string, unknown>;
  const doc: Record<string, unknown> = { ...props, _id: id, lastModifiedBy: processName };
  for (const field of NULL_FIELDS) doc[field] ??= null;
  try {
    await insertJob(doc);
  } catch (error) {
    if (isDuplicateKey(error)) return false;
    throw error;
  }
  // Workers of this process start it at once, as after Agenda's own save, and lock it by
  // its `_id` without scanning for it. A job due later is found by the regular poll.
  (job.attrs as { _id?: unknown })._id = id;
  const nextRunAt = (doc as { nextRunAt?: unknown }).nextRunAt;
  if (nextRunAt instanceof Date && nextRunAt <= now) store?.hint(name, id, nextRunAt);
  else if (nextRunAt instanceof Date) return true;
  const publish = (agenda as unknown as { publishJobNotification?(j: unknown): Promise<void> })
    .publishJobNotification;
  await publish?.call(agenda, job);
  return true;
}

/** Agenda on the service's own MongoDB connection, created after mongoose has connected. */
export async function createScheduler(options: SchedulerOptions): Promise<Scheduler> {
  const backend = new GuardedMongoBackend(options.db);
  await backend.connect();
  if (backend.connectError) throw backend.connectError;
  // Jobs queued in one turn (a burst of requests to the Slack, Linear and Jira doors) are one insert.
  const insertJob = createInsertBatcher<Document>(options.db.collection("jobs"));
  const agenda = new Agenda({
    backend,
    name: options.name,
    processEvery: options.processEveryMs ?? 1000,
    maxConcurrency: Math.max(options.concurrency * 4, 8),
    defaultConcurrency: options.concurrency,
    defaultLockLifetime: options.lockLifetimeMs,
    // Jobs saved in this process start here at once instead of at the next poll; other
    // processes still find them by polling (FerretDB has no change streams to notify them).
    notificationChannel: new InMemoryNotificationChannel(),
  });
  const logger = options.logger.child({ component: "jobs" });
  agenda.on("error", (error) => logger.error({ err: error }, "scheduler error"));
  let started = false;

  return {
    agenda,
    get running() {
      return started;
    },
    define<T>(kind: JobKind<T>) {
      agenda.define<T>(
        kind.name,
        async (job: Job<T>) => {
          const parsed = kind.schema.safeParse(job.attrs.data);
          if (!parsed.success) {
            logger.error(
              { job: kind.name, issues: parsed.error.issues },
              "job payload invalid; not run",
            );
            return;
          }
          const started = performance.now();
          try {
            // Saved in this process, a job starts in the saver's async context: it must not
            // inherit that task's redaction scope (util/redact.ts); a stage enters its own.
            await outsideSecretScopes(() => kind.run(parsed.data, job));
            logger.debug(
              { job: kind.name, ms: Math.round(performance.now() - started) },
              "job done",
            );
          } catch (error) {
            outsideSecretScopes(() => logger.error({ job: kind.name, err: error }, "job failed"));
            throw error;
          }
        },
        {
          concurrency: kind.concurrency ?? options.concurrency,
          // One lifetime for every job: the job store reads due jobs of all names at once.
          lockLifetime: options.lockLifetimeMs,
        },
      );
    },
    async enqueue<T>(
      kind: Pick<JobKind<T>, "name" | "schema">,
      data: T,
      enqueueOptions?: EnqueueOptions,
    ) {
      const parsed = kind.schema.parse(data);
      return enqueueJob(
        agenda,
        started ? (backend.repository as ExclusiveJobRepository) : undefined,
        insertJob,
        options.name,
        kind.name,
        parsed,
        enqueueOptions?.unique,
        enqueueOptions?.at,
      );
    },
    async start() {
      await agenda.start();
      started = true;
      logger.info({ name: options.name, concurrency: options.concurrency }, "workers started");
    },
    async stop(graceMs: number) {
      if (!started) return;
      started = false;
      const result = await agenda.drain({ timeout: graceMs, closeConnection: false });
      if (result.timedOut)
        logger.warn(
          { running: result.running },
          "jobs still running at shutdown; other workers take them over when their locks expire",
        );
      await agenda.stop(false);
      await (backend.repository as ExclusiveJobRepository).releaseHeld();
    },
  };
}

/** Removes one-off jobs that finished before `before` (jobs/housekeeping.ts says why). */
export async function pruneFinishedJobs(models: Models, before: Date): Promise<void> {
  await models.Once.db.collection("jobs").deleteMany({
    nextRunAt: null,
    lastFinishedAt: { $lt: before },
  });
}

/**
 * Of the jobs named `name` whose `data[field]` is one of `values`, the values of those that
 * will still run: queued, due later, or locked (a dead worker's lock expires and another
 * worker takes the job over). One read; FerretDB scans the jobs for it.
 */
export async function jobsInFlight(
  models: Models,
  name: string,
  field: string,
  values: readonly string[],
): Promise<Set<string>> {
  if (values.length === 0) return new Set();
  const jobs = await models.Once.db
    .collection("jobs")
    .find(
      {
        name,
        [`data.${field}`]: { $in: [...values] },
        $or: [{ nextRunAt: { $ne: null } }, { lockedAt: { $ne: null } }],
      },
      { projection: { [`data.${field}`]: 1 } },
    )
    .toArray();
  return new Set(jobs.map((job) => String((job.data as Record<string, unknown>)[field])));
}
