import { randomUUID } from "node:crypto";
import {
  closeSync,
  fstatSync,
  ftruncateSync,
  futimesSync,
  openSync,
  writeSync,
  type Stats,
} from "node:fs";
import { mkdir, readdir, readFile, rename, stat, unlink, utimes } from "node:fs/promises";
import { hostname } from "node:os";
import path from "node:path";
import type { Logger } from "../util/logger.js";
import type { ZodType } from "zod";
import { pidRunning } from "./identity.js";
import { uniqueJobKey } from "./scheduler.js";

/*
 * The intake journal: a door that must answer fast (Slack wants 3 s, Linear and Jira retry
 * what is slow) makes a job request durable by appending one line to a file of its own under
 * DATA_DIR/intake, answers, and the journal then inserts the job into the jobs collection
 * (the scheduler's enqueue, idempotent by the job's unique `_id`).
 *
 * What survives what:
 *  - A crash of the process: the line is in the kernel once `write` returns. The next process
 *    of this DATA_DIR on this host takes the file over at its start (the writer's pid is gone),
 *    any process sharing the folder does once the file has not been touched for STALE_MS
 *    (its writer touches it every HEARTBEAT_MS), and inserts what it holds; a line inserted
 *    before is a duplicate `_id` and changes nothing.
 *  - A database outage: lines wait in the file and in memory, inserted with backoff once the
 *    database answers again; a graceful stop waits for them up to its grace, then leaves the
 *    rest in the file for the next process.
 *  - A full disk or a journal too far behind (MAX_PENDING): the request is inserted directly,
 *    and its answer waits for the database as without the journal.
 *  - A power loss or a lost DATA_DIR: lines not inserted yet (milliseconds' worth when the
 *    database answers) are lost, as the embedded database's own last commits would be
 *    (docs/operations.md, "Intake journal"). INTAKE_JOURNAL=off makes answers wait for the
 *    database insert instead.
 *
 * Files are `<host>~<pid>~<instance>~<n>.jsonl`, one line per request:
 * `{"name", "data", "unique"}`. A file is emptied whenever everything in it was inserted, and
 * replaced by the next one past SEGMENT_BYTES.
 */

export const JOURNAL_DIR = "intake";
/** A writer touches its files this often; a file untouched for STALE_MS is taken over. */
export const HEARTBEAT_MS = 10_000;
export const STALE_MS = 60_000;
const SEGMENT_BYTES = 1 << 20;
/** Past this many lines not inserted yet, requests wait for the database (backpressure). */
const MAX_PENDING = 10_000;
/** Lines being inserted at once (the scheduler groups those of one turn into one insertMany). */
const MAX_IN_FLIGHT = 200;
/** How long the first line of a batch waits for others (group commit). */
export const BATCH_WINDOW_MS = 10;
const MAX_BACKOFF_MS = 30_000;
/** Keys recently journaled here: a redelivery to this process is told it was queued before. */
const RECENT_KEYS = 10_000;

/** Journal instances alive in this process: a file of this pid not among them is a predecessor's. */
const liveInstances = new Set<string>();

interface Line {
  name: string;
  data: unknown;
  unique?: Record<string, unknown> | undefined;
}

interface Segment {
  file: string;
  /** Open while lines go to it; a file without one is removed once all of it is inserted. */
  fd: number | undefined;
  bytes: number;
  /** Lines of this file not inserted yet. */
  outstanding: Set<Pending>;
}

interface Pending {
  readonly line: Line;
  /** The file that keeps it (another one when its file was taken over). */
  segment: Segment;
}

/** A job kind the journal may hold: its name and the schema of its data. */
export interface JournalKind<T = unknown> {
  name: string;
  schema: ZodType<T>;
}

export type EnqueueFn = (
  kind: JournalKind,
  data: unknown,
  options?: { unique?: Record<string, unknown> },
) => Promise<boolean>;

export interface IntakeJournalOptions {
  /** DATA_DIR: the journal lives in its `intake` folder. */
  dataDir: string;
  /** The kinds it may hold (a line of another name, from another version, is logged and dropped). */
  kinds: JournalKind[];
  /** The durable insert (the scheduler's enqueue): false when that job exists already. */
  enqueue: EnqueueFn;
  logger: Logger;
  /** Tests: shorter heartbeat and staleness. */
  heartbeatMs?: number;
  staleMs?: number;
}

const safeHost = () => hostname().replace(/[^A-Za-z0-9.-]/g, "_") || "host";

export class IntakeJournal {
  readonly dir: string;
  private readonly instance = randomUUID().slice(0, 8);
  private readonly host = safeHost();
  private readonly kinds: Map<string, JournalKind>;
  private readonly logger: Logger;
  private readonly heartbeatMs: number;
  private readonly staleMs: number;
  private readonly insert: EnqueueFn;
  private active: Segment | undefined;
  private readonly segments = new Set<Segment>();
  private sequence = 0;
  private readonly queue: Pending[] = [];
  private inFlight = 0;
  private pending = 0;
  private backoffMs = 0;
  private pausedUntil = 0;
  private resumeTimer: NodeJS.Timeout | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private readonly recent = new Map<string, true>();
  private readonly idle = new Set<() => void>();
  private closing = false;
  private stopped = false;
  private pumpTimer: NodeJS.Timeout | undefined;

  private constructor(options: IntakeJournalOptions) {
    this.dir = path.join(options.dataDir, JOURNAL_DIR);
    this.kinds = new Map(options.kinds.map((k) => [k.name, k]));
    this.logger = options.logger.child({ component: "intake-journal" });
    this.heartbeatMs = options.heartbeatMs ?? HEARTBEAT_MS;
    this.staleMs = options.staleMs ?? STALE_MS;
    this.insert = options.enqueue;
  }

  /** Opens this process's journal after taking over (and inserting) what dead writers left. */
  static async open(options: IntakeJournalOptions): Promise<IntakeJournal> {
    const journal = new IntakeJournal(options);
    await mkdir(journal.dir, { recursive: true, mode: 0o700 });
    liveInstances.add(journal.instance);
    await journal.takeOverDead();
    journal.heartbeat = setInterval(() => void journal.beat(), journal.heartbeatMs);
    journal.heartbeat.unref();
    return journal;
  }

  /** Lines written and not inserted yet. */
  get backlog(): number {
    return this.pending;
  }

  /**
   * Queues a job durably: appended to the journal (inserted soon after), or inserted now when
   * the journal cannot take it. Resolves false when this process journaled the same unique
   * job recently (a redelivery); a redelivery elsewhere is a duplicate `_id` at insert.
   */
  async enqueue<T>(
    kind: JournalKind<T>,
    data: T,
    options: { unique?: Record<string, unknown> } = {},
  ): Promise<boolean> {
    const parsed = kind.schema.parse(data);
    const key = uniqueJobKey(kind.name, options.unique);
    if (key !== undefined && this.recent.has(key)) return false;
    const line: Line = { name: kind.name, data: parsed, unique: options.unique };
    if (this.closing || this.pending >= MAX_PENDING || !this.append(line)) {
      // Straight to the database: the answer waits for it, and its failure is the caller's.
      return this.insert(kind, parsed, options);
    }
    if (key !== undefined) this.remember(key);
    return true;
  }

  /**
   * Takes over the files of writers that are gone: this host's processes whose pid no longer
   * runs (or a predecessor that had this pid), and any file untouched for STALE_MS. Each is
   * renamed to this process first (one taker wins), then its lines are inserted as this
   * process's own. Answers how many lines were taken.
   */
  async takeOverDead(): Promise<number> {
    let names: string[];
    try {
      names = await readdir(this.dir);
    } catch (error) {
      this.logger.warn({ err: error }, "reading the intake journal folder failed");
      return 0;
    }
    const mine = new Set([...this.segments].map((s) => path.basename(s.file)));
    let taken = 0;
    for (const name of names) {
      if (!name.endsWith(".jsonl") || mine.has(name)) continue;
      const file = path.join(this.dir, name);
      const [host, pidText, instance] = name.split("~");
      const pid = Number(pidText);
      let info: Stats;
      try {
        info = await stat(file);
      } catch {
        continue; // taken by another process meanwhile
      }
      const stale = Date.now() - info.mtimeMs > this.staleMs;
      const deadHere =
        host === this.host &&
        Number.isInteger(pid) &&
        (pid === process.pid ? !liveInstances.has(instance ?? "") : !pidRunning(pid));
      if (!stale && !deadHere) continue;
      const claimed = path.join(this.dir, this.fileName(`taken-${randomUUID().slice(0, 8)}`));
      try {
        await rename(file, claimed);
      } catch {
        continue; // another process took it first
      }
      taken += await this.replay(claimed);
    }
    if (taken > 0)
      this.logger.info({ requests: taken }, "took over a dead writer's intake journal");
    return taken;
  }

  /** Resolves once every line written so far is inserted, or after `timeoutMs`. */
  async flush(timeoutMs: number): Promise<boolean> {
    if (this.pending === 0) return true;
    this.wake();
    return new Promise<boolean>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.idle.delete(done);
        resolve(this.pending === 0);
      };
      const timer = setTimeout(done, timeoutMs);
      this.idle.add(done);
    });
  }

  /**
   * Stops: new requests go straight to the database, lines are inserted for up to `graceMs`,
   * and what is left stays in the files for the next process.
   */
  async close(graceMs: number): Promise<void> {
    this.closing = true;
    clearInterval(this.heartbeat);
    const drained = await this.flush(graceMs);
    this.stopped = true;
    clearTimeout(this.resumeTimer);
    clearTimeout(this.pumpTimer);
    for (const segment of this.segments) this.closeFd(segment);
    if (drained) {
      for (const segment of this.segments) await unlink(segment.file).catch(() => undefined);
    } else {
      this.logger.warn(
        { requests: this.pending, dir: this.dir },
        "stopped with requests not yet in the database; the next start of this DATA_DIR inserts them",
      );
    }
    this.segments.clear();
    this.active = undefined;
    liveInstances.delete(this.instance);
  }

  // -------------------------------------------------------------------------------------

  private fileName(suffix: string | number): string {
    return `${this.host}~${process.pid}~${this.instance}~${suffix}.jsonl`;
  }

  private openSegment(): Segment | undefined {
    const file = path.join(this.dir, this.fileName(this.sequence++));
    try {
      const fd = openSync(file, "a", 0o600);
      const segment: Segment = { file, fd, bytes: 0, outstanding: new Set() };
      this.segments.add(segment);
      return segment;
    } catch (error) {
      this.logger.error({ err: error, file }, "opening an intake journal file failed");
      return undefined;
    }
  }

  /** One line, one write: in the kernel when it returns. False when it could not be written. */
  private append(line: Line): boolean {
    const segment = this.write(line);
    if (!segment) return false;
    this.track({ line, segment });
    return true;
  }

  /** Writes a line to the active file (a new one past SEGMENT_BYTES): the file, or undefined. */
  private write(line: Line): Segment | undefined {
    if (!this.active || this.active.bytes >= SEGMENT_BYTES) {
      if (this.active) this.retire(this.active);
      this.active = this.openSegment();
      if (!this.active) return undefined;
    }
    const segment = this.active;
    try {
      const buffer = Buffer.from(`${JSON.stringify(line)}\n`);
      let written = 0;
      while (written < buffer.length)
        written += writeSync(segment.fd!, buffer, written, buffer.length - written);
      segment.bytes += buffer.length;
      return segment;
    } catch (error) {
      this.logger.error({ err: error, file: segment.file }, "writing to the intake journal failed");
      // What may have been half written is harmless: a replay skips a line it cannot read.
      this.retire(segment);
      this.active = undefined;
      return undefined;
    }
  }

  private track(entry: Pending): void {
    entry.segment.outstanding.add(entry);
    this.queue.push(entry);
    this.pending += 1;
    this.schedulePump();
  }

  /**
   * Group commit: the first line not yet on its way waits BATCH_WINDOW_MS for others, then
   * they go together (the scheduler sends the lines of one turn as one insertMany). So the
   * answers the appends made possible are written before the database work starts, and a
   * burst costs one insert instead of one per request.
   */
  private schedulePump(): void {
    if (this.pumpTimer) return;
    this.pumpTimer = setTimeout(() => {
      this.pumpTimer = undefined;
      this.pump();
    }, BATCH_WINDOW_MS);
  }

  private remember(key: string): void {
    this.recent.set(key, true);
    if (this.recent.size > RECENT_KEYS) this.recent.delete(this.recent.keys().next().value!);
  }

  private async replay(file: string): Promise<number> {
    let text: string;
    try {
      text = await readFile(file, "utf8");
    } catch (error) {
      this.logger.error({ err: error, file }, "reading a taken intake journal failed");
      return 0;
    }
    const segment: Segment = { file, fd: undefined, bytes: 0, outstanding: new Set() };
    this.segments.add(segment);
    let count = 0;
    for (const raw of text.split("\n")) {
      if (raw.trim() === "") continue;
      let line: Line;
      try {
        line = JSON.parse(raw) as Line;
        if (typeof line.name !== "string") throw new Error("no job name");
      } catch {
        // A line cut short by a crash mid-write (never answered, so never acknowledged).
        this.logger.warn({ file }, "skipped an unreadable intake journal line");
        continue;
      }
      const key = uniqueJobKey(line.name, line.unique);
      if (key !== undefined) this.remember(key);
      segment.outstanding.add({ line, segment });
      count += 1;
    }
    for (const entry of segment.outstanding) {
      this.queue.push(entry);
      this.pending += 1;
    }
    if (count === 0) await this.settle(segment);
    this.pump();
    return count;
  }

  /** Inserts queued lines, MAX_IN_FLIGHT at a time, pausing with backoff while inserts fail. */
  private pump(): void {
    if (this.stopped || Date.now() < this.pausedUntil) return;
    while (this.inFlight < MAX_IN_FLIGHT && this.queue.length > 0) {
      const entry = this.queue.shift()!;
      this.inFlight += 1;
      void this.insertLine(entry);
    }
  }

  private async insertLine(entry: Pending): Promise<void> {
    const { line } = entry;
    const kind = this.kinds.get(line.name);
    let retry = false;
    try {
      if (kind) await this.insert(kind, line.data, line.unique ? { unique: line.unique } : {});
      else
        this.logger.error({ job: line.name }, "dropped an intake journal line of an unknown job");
      this.backoffMs = 0;
    } catch (error) {
      if (isInvalid(error)) {
        this.logger.error({ err: error, job: line.name }, "dropped an invalid intake journal line");
      } else {
        retry = true;
        this.backoffMs = Math.min(MAX_BACKOFF_MS, Math.max(100, this.backoffMs * 2));
        this.logger.warn(
          { err: error, job: line.name, retryInMs: this.backoffMs, backlog: this.pending },
          "inserting a journaled request failed; retrying",
        );
      }
    }
    this.inFlight -= 1;
    if (retry) {
      this.queue.unshift(entry);
      this.pause(this.backoffMs);
      return;
    }
    const { segment } = entry;
    segment.outstanding.delete(entry);
    this.pending -= 1;
    if (segment.outstanding.size === 0) await this.settle(segment);
    if (this.pending === 0) for (const done of [...this.idle]) done();
    this.pump();
  }

  private pause(ms: number): void {
    this.pausedUntil = Date.now() + ms;
    clearTimeout(this.resumeTimer);
    this.resumeTimer = setTimeout(() => this.wake(), ms);
    this.resumeTimer.unref();
  }

  private wake(): void {
    this.pausedUntil = 0;
    this.pump();
  }

  /** Everything in the segment is inserted: empty it (the active one) or remove it. */
  private async settle(segment: Segment): Promise<void> {
    if (segment.fd !== undefined) {
      // Nothing was written between the last insert and here (same tick): safe to empty.
      try {
        ftruncateSync(segment.fd, 0);
        segment.bytes = 0;
      } catch (error) {
        this.logger.warn({ err: error, file: segment.file }, "emptying the intake journal failed");
      }
      return;
    }
    this.segments.delete(segment);
    await unlink(segment.file).catch(() => undefined);
  }

  /** No more lines go to the segment: removed now if everything in it is inserted. */
  private retire(segment: Segment): void {
    this.closeFd(segment);
    if (segment.outstanding.size === 0) void this.settle(segment);
  }

  private closeFd(segment: Segment): void {
    if (segment.fd === undefined) return;
    try {
      closeSync(segment.fd);
    } catch {
      // already closed
    }
    segment.fd = undefined;
  }

  /**
   * Touches this process's files (so no one takes them as stale) and checks they are still
   * here: a file another process took (after a long pause of this one) has its lines
   * written again to a new file, so they stay durable until inserted.
   */
  private async beat(): Promise<void> {
    const now = new Date();
    for (const segment of [...this.segments]) {
      let here = true;
      try {
        if (segment.fd !== undefined) {
          const [open, named] = [fstatSync(segment.fd), await stat(segment.file)];
          here = open.ino === named.ino && open.dev === named.dev;
          if (here) futimesSync(segment.fd, now, now);
        } else {
          await utimes(segment.file, now, now);
        }
      } catch {
        here = false;
      }
      if (here || segment.outstanding.size === 0) continue;
      this.logger.warn(
        { file: segment.file },
        "an intake journal file was taken over; writing its lines again",
      );
      this.segments.delete(segment);
      this.closeFd(segment);
      if (segment === this.active) this.active = undefined;
      // The lines stay queued as they are; only the file that keeps them changes.
      for (const entry of [...segment.outstanding]) {
        const moved = this.write(entry.line);
        if (!moved) continue; // no file to hold it: memory only, the inserts go on
        segment.outstanding.delete(entry);
        entry.segment = moved;
        moved.outstanding.add(entry);
      }
    }
  }
}

/** A line the job's schema refuses will never insert: retrying it would block the rest. */
function isInvalid(error: unknown): boolean {
  return error instanceof Error && error.name === "ZodError";
}
