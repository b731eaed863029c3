/*
 * One task's events delivered to many WebSocket subscribers (/tasks/{id}/ws), against a bare
 * `ws` server broadcasting the same messages to as many clients.
 *
 * One embedded database, the real service in-process without workers and one queued task;
 * BENCH_WS_CLIENTS (1000) clients watch it, opened in batches, and each first receives the
 * replayed creation event (seq 1). A round then appends BENCH_WS_EVENTS (100) `log` events,
 * one every BENCH_WS_INTERVAL_MS (5) at the earliest, each awaited like a worker awaits its
 * appends and each after a turn of the event loop. Every message carries the
 * `performance.now()` taken just before its append (or broadcast); the clients live in this
 * process, so each (event, subscriber) pair gives one delivery latency.
 * Subjects, measured in alternating rounds (BENCH_ROUNDS), all samples pooled per subject:
 *   bare ws              a WebSocketServer on another port: `for (c of wss.clients) c.send()`
 *   service in-process   appends through the service's own TaskEventLog: its hub hears them
 *                        at once (in-process emitter)
 *   service cross-process appends through a second TaskEventLog on a second connection, as a
 *                        worker process does: the service finds them by polling every
 *                        EVENT_POLL_MS (its default, 200 ms)
 * Servers and clients share one event loop, so a latency includes writing every socket and
 * reading every client; both sides pay that alike. One event to 1,000 clients costs this loop
 * ~20 ms on a 2-CPU machine, so events are sent at one per 40 ms (BENCH_WS_INTERVAL_MS), a
 * rate every subject can sustain: faster, the cross-process sender (whose append does not
 * wait for the fan-out) outruns the fan-out and the figure measures a growing queue. The
 * rate each subject reached is printed. 100 events keep the run near a minute.
 *
 * BENCH_WS_HISTORY (0) first stores that many events of another task, as a database that has
 * served for a while holds: the cross-process path reads by `_id`, whose cost may grow with
 * the collection (it does on FerretDB's SQLite backend, which scans). Each subscriber's replay
 * reads the log too, so opening the clients slows down as much: lower BENCH_WS_CLIENTS then.
 */
import { readFile } from "node:fs/promises";
import type { AddressInfo } from "node:net";
import os from "node:os";
import { performance } from "node:perf_hooks";
import WebSocket, { WebSocketServer } from "ws";
import { registerModels } from "../src/db/models.js";
import { eventId, TaskEventLog } from "../src/domain/tasks/events.js";
import {
  activeCleanups,
  BenchError,
  Cleanup,
  envInt,
  summariseLatencies,
  type Benchmark,
  type BenchReport,
  type BenchSettings,
  type LatencySummary,
} from "./lib/harness.js";
import { placeholderRepo } from "../test/helpers/git-repo.js";
import { openBareConnection, startBenchStack } from "./lib/stack.js";

/**
 * In-process delivery may take at most this many times the bare broadcast's p99. Both pay
 * the same socket writes and client reads; the service adds one insert per event and its
 * hub's per-subscriber dispatch. 3× leaves room for that, and catches a per-subscriber cost
 * (a read, a serialisation per socket) that would grow with the subscribers. Report only.
 */
export const TARGET_P99_RATIO = 3;
/** Cross-process delivery: p99 within the poll interval plus this much (read and fan-out). */
export const CROSS_PROCESS_MARGIN_MS = 50;

const DATABASE = "bench_ws";
const OPEN_BATCH = 50;
/** Events of the warm-up round of each subject (not measured). */
const WARMUP_EVENTS = 50;
const DELIVERY_TIMEOUT_MS = 15_000;
/** Makes a message as long as a short log line of a real task (~250 bytes on the wire). */
const PAD = "compiling src/http/routes/tasks/routes.ts and 41 other files; ".repeat(2);

/** The soft open-files limit of this process (Linux), or undefined where it cannot be read. */
async function openFilesLimit(): Promise<number | undefined> {
  try {
    const limits = await readFile("/proc/self/limits", "utf8");
    const soft = /^Max open files\s+(\S+)/m.exec(limits)?.[1];
    if (!soft || soft === "unlimited") return undefined;
    return Number(soft);
  } catch {
    return undefined;
  }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Latencies of the current round of one set of clients. */
class Recorder {
  private samples = new Float64Array(0);
  private count = 0;
  private expected = 0;
  private done: (() => void) | undefined;

  /** Starts a round that expects `expected` deliveries. */
  begin(expected: number): Promise<void> {
    this.samples = new Float64Array(expected);
    this.count = 0;
    this.expected = expected;
    return new Promise((resolve) => (this.done = resolve));
  }

  record(latencyMs: number): void {
    if (this.count < this.samples.length) this.samples[this.count] = latencyMs;
    this.count += 1;
    if (this.count === this.expected) this.done?.();
  }

  get received(): number {
    return this.count;
  }

  finish(): Float64Array {
    if (this.count !== this.expected)
      throw new BenchError(`received ${this.count} deliveries, expected ${this.expected}`);
    return this.samples;
  }
}

interface Fleet {
  recorder: Recorder;
  /** Sockets closed before the end, with their close codes. */
  dropped: number[];
  close(): Promise<void>;
}

/**
 * Opens `count` clients in batches and resolves once every one has received seq 1. Each
 * later `log` message is recorded with its latency from the `sentAt` it carries.
 */
async function openFleet(
  url: string,
  headers: Record<string, string>,
  count: number,
): Promise<Fleet> {
  const recorder = new Recorder();
  const dropped: number[] = [];
  const sockets: WebSocket[] = [];
  let closing = false;
  const onMessage = (data: WebSocket.RawData) => {
    const at = performance.now();
    const event = JSON.parse(String(data)) as { event_type: string; message?: string };
    if (event.event_type !== "log" || typeof event.message !== "string") return;
    const { sentAt } = JSON.parse(event.message) as { sentAt: number };
    recorder.record(at - sentAt);
  };
  const open = () =>
    new Promise<WebSocket>((resolve, reject) => {
      const socket = new WebSocket(url, { headers });
      sockets.push(socket);
      socket.once("unexpected-response", (_req, res) =>
        reject(new BenchError(`upgrade on ${url} answered ${res.statusCode}`)),
      );
      // Kept for the socket's life: a later error must not go unhandled (reject is then a no-op).
      socket.on("error", reject);
      // The first message is the replayed creation event (seq 1): subscribed from here on.
      socket.once("message", (data) => {
        const first = JSON.parse(String(data)) as { seq?: unknown };
        if (first.seq !== 1)
          return reject(new BenchError(`first message on ${url} was ${String(data)}`));
        socket.on("message", onMessage);
        resolve(socket);
      });
      socket.on("close", (code) => {
        if (!closing) dropped.push(code);
      });
    });
  const fleet: Fleet = {
    recorder,
    dropped,
    async close() {
      closing = true;
      await Promise.all(
        sockets.map(
          (socket) =>
            new Promise<void>((resolve) => {
              if (socket.readyState === WebSocket.CLOSED) return resolve();
              const timer = setTimeout(() => {
                socket.terminate();
                resolve();
              }, 3_000);
              socket.once("close", () => {
                clearTimeout(timer);
                resolve();
              });
              socket.close(1000);
            }),
        ),
      );
    },
  };
  try {
    for (let opened = 0; opened < count; opened += OPEN_BATCH) {
      const batch = Math.min(OPEN_BATCH, count - opened);
      await Promise.all(Array.from({ length: batch }, open));
    }
  } catch (error) {
    await fleet.close();
    throw error;
  }
  return fleet;
}

/** A bare `ws` server: replays a creation event on connect and broadcasts what it is given. */
async function startBareWs(): Promise<{
  url: string;
  broadcast(message: string, seq: number): void;
  close(): Promise<void>;
}> {
  const wss = new WebSocketServer({ host: "127.0.0.1", port: 0, maxPayload: 64 * 1024 });
  await new Promise<void>((resolve, reject) => {
    wss.once("listening", resolve);
    wss.once("error", reject);
  });
  const created = new Date().toISOString();
  wss.on("connection", (socket) => {
    socket.on("message", () => undefined);
    socket.send(
      JSON.stringify({
        event_type: "phase",
        phase: "QUEUED",
        status: "queued",
        seq: 1,
        ts: created,
      }),
    );
  });
  const { port } = wss.address() as AddressInfo;
  return {
    url: `ws://127.0.0.1:${port}/tasks/bare/ws`,
    broadcast(message, seq) {
      // The shape and size of the service's messages: {event_type, ...payload, seq, ts}.
      const text = JSON.stringify({
        event_type: "log",
        message,
        seq,
        ts: new Date().toISOString(),
      });
      for (const client of wss.clients) client.send(text);
    },
    close: () =>
      new Promise<void>((resolve, reject) => {
        for (const client of wss.clients) client.terminate();
        wss.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}

interface Subject {
  name: string;
  fleet: Fleet;
  /** Gets the subject ready for a round (not measured). */
  prepare(): Promise<unknown>;
  /** Sends one event whose message is `message`; resolves when the sender may go on. */
  send(message: string): Promise<unknown>;
}

/**
 * Sends `events` events on a fixed schedule, one every `intervalMs` (late when a send takes
 * longer: the next one waits for it, as a worker's appends do), and waits for every delivery.
 */
async function runRound(
  subject: Subject,
  clients: number,
  events: number,
  intervalMs: number,
): Promise<{ latencies: Float64Array; sendMs: number }> {
  await subject.prepare();
  const delivered = subject.fleet.recorder.begin(clients * events);
  const start = performance.now();
  for (let n = 0; n < events; n++) {
    // Always through a timer: a synchronous sender (the bare broadcast) must let the clients
    // read between events, as the service's awaited insert does.
    await sleep(Math.max(0, start + n * intervalMs - performance.now()));
    await subject.send(JSON.stringify({ sentAt: performance.now(), n, pad: PAD }));
  }
  const sendMs = performance.now() - start;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<"timeout">((resolve) => {
    timer = setTimeout(() => resolve("timeout"), DELIVERY_TIMEOUT_MS);
  });
  const outcome = await Promise.race([delivered, timeout]);
  clearTimeout(timer);
  if (outcome === "timeout") {
    const { received } = subject.fleet.recorder;
    const dropped = subject.fleet.dropped;
    throw new BenchError(
      `${subject.name}: ${received} of ${clients * events} deliveries after ` +
        `${DELIVERY_TIMEOUT_MS} ms; ${dropped.length} sockets closed early ` +
        `(codes ${[...new Set(dropped)].join(", ") || "none"})`,
    );
  }
  return { latencies: subject.fleet.recorder.finish(), sendMs };
}

interface ReadStats {
  /** Polls that found events, the events found and the time they took. */
  calls: number;
  events: number;
  ms: number;
  maxMs: number;
  /** Polls that found nothing (one `_id` lookup that misses). */
  emptyCalls: number;
  emptyMs: number;
}

/**
 * Times the hub's polls: it reads what other processes appended through `readNext` of the
 * service's event log, so wrapping that one instance method measures the cross-process read.
 */
function timeReadNext(log: TaskEventLog): ReadStats {
  const stats: ReadStats = { calls: 0, events: 0, ms: 0, maxMs: 0, emptyCalls: 0, emptyMs: 0 };
  const original = log.readNext.bind(log);
  log.readNext = async (...args: Parameters<TaskEventLog["readNext"]>) => {
    const started = performance.now();
    const found = await original(...args);
    const took = performance.now() - started;
    if (found.length > 0) {
      stats.calls += 1;
      stats.events += found.length;
      stats.ms += took;
      stats.maxMs = Math.max(stats.maxMs, took);
    } else {
      stats.emptyCalls += 1;
      stats.emptyMs += took;
    }
    return found;
  };
  return stats;
}

const ms = (n: number) => n.toFixed(1);

export const wsFanout: Benchmark = {
  name: "ws-fanout",
  description: "one task's events to many /tasks/{id}/ws subscribers vs a bare ws broadcast",
  async run(settings: BenchSettings): Promise<BenchReport> {
    const clients = envInt("BENCH_WS_CLIENTS", 1000, 1, 5000);
    const events = envInt("BENCH_WS_EVENTS", 100, 1, 10_000);
    const intervalMs = envInt("BENCH_WS_INTERVAL_MS", 40, 0, 1000);
    const history = envInt("BENCH_WS_HISTORY", 0, 0, 1_000_000);

    // Each client costs two descriptors per server (its end and the server's): check first,
    // so a low limit reads as such rather than as EMFILE halfway through.
    const needed = clients * 4 + 256;
    const limit = await openFilesLimit();
    if (limit !== undefined && limit < needed) {
      throw new BenchError(
        `ws-fanout needs about ${needed} open files (${clients} clients × 2 servers × 2 ends), ` +
          `but this process may open ${limit} (ulimit -n). Run it from a shell with a higher ` +
          `limit, or set BENCH_WS_CLIENTS=${Math.max(1, Math.floor((limit - 256) / 4))} or less.`,
      );
    }

    const cleanup = new Cleanup();
    activeCleanups.add(cleanup);
    try {
      // EVENT_POLL_MS is left at its default: the cross-process subject measures it.
      const { uri, service, engine } = await startBenchStack(cleanup, DATABASE);
      const base = service.http!.url;
      const pollMs = service.config.eventPollMs;

      const post = async (route: string, body: unknown, key?: string) => {
        const res = await fetch(`${base}${route}`, {
          method: "POST",
          headers: { "content-type": "application/json", ...(key ? { "x-api-key": key } : {}) },
          body: JSON.stringify(body),
        });
        const text = await res.text();
        if (res.status !== 201)
          throw new BenchError(`POST ${route} answered ${res.status}: ${text}`);
        return JSON.parse(text) as Record<string, unknown>;
      };
      const key = String((await post("/keys/generate", { name: "bench" })).key);
      const workspace = await post(
        "/workspaces",
        { name: "bench", repos: [{ name: "acme/app", clone_url: await placeholderRepo() }] },
        key,
      );
      const task = await post(
        "/tasks",
        { workspace_id: workspace.id, repo_id: "acme/app", description: "Watched by many." },
        key,
      );
      const taskId = String(task.id);

      // A second event log on its own connection: what a worker process appends through.
      const connection = await openBareConnection(cleanup, uri, 10);
      const otherModels = registerModels(connection);
      const otherLog = new TaskEventLog(otherModels);
      if (history > 0) {
        const started = performance.now();
        for (let stored = 0; stored < history; stored += 1000) {
          const docs = Array.from({ length: Math.min(1000, history - stored) }, (_, i) => ({
            _id: eventId("task_history", stored + i + 2),
            task_id: "task_history",
            seq: stored + i + 2,
            ts: new Date(),
            type: "log",
            payload: { message: JSON.stringify({ sentAt: 0, n: i, pad: PAD }) },
          }));
          await otherModels.TaskEvent.collection.insertMany(docs as never[]);
        }
        console.log(
          `  ${history} events of another task stored in ${ms(performance.now() - started)} ms`,
        );
      }
      const reads = timeReadNext(service.events);

      const bare = await startBareWs();
      cleanup.defer("close bare ws server", () => bare.close());

      let opened = performance.now();
      const bareFleet = await openFleet(bare.url, {}, clients);
      cleanup.defer("close bare clients", () => bareFleet.close());
      const bareOpenMs = performance.now() - opened;
      console.log(`  ${clients} bare clients ready in ${ms(bareOpenMs)} ms`);
      opened = performance.now();
      const serviceFleet = await openFleet(
        `${base.replace(/^http/, "ws")}/tasks/${taskId}/ws`,
        { "x-api-key": key },
        clients,
      );
      cleanup.defer("close service clients", () => serviceFleet.close());
      const serviceOpenMs = performance.now() - opened;
      console.log(`  ${clients} service clients ready in ${ms(serviceOpenMs)} ms`);

      let bareSeq = 1;
      const subjects: Subject[] = [
        {
          name: "bare ws broadcast",
          fleet: bareFleet,
          prepare: () => Promise.resolve(),
          send: (message) => {
            bareSeq += 1;
            bare.broadcast(message, bareSeq);
            return Promise.resolve();
          },
        },
        {
          name: "service in-process",
          fleet: serviceFleet,
          // The other log's appends left this log's cached top behind: catch up unmeasured.
          prepare: () => service.events.lastSeq(taskId),
          send: (message) => service.events.append(taskId, { event_type: "log", message }),
        },
        {
          name: "service cross-process",
          fleet: serviceFleet,
          prepare: () => otherLog.lastSeq(taskId),
          send: (message) => otherLog.append(taskId, { event_type: "log", message }),
        },
      ];

      if (settings.warmupS > 0) {
        for (const subject of subjects) {
          await runRound(subject, clients, WARMUP_EVENTS, intervalMs);
          await sleep(100);
        }
        console.log(`  warm-up: ${WARMUP_EVENTS} events per subject`);
      }

      const samples = new Map<string, Float64Array[]>(subjects.map((s) => [s.name, []]));
      const sentPerSec = new Map<string, number[]>(subjects.map((s) => [s.name, []]));
      // The hub's reads during the measured cross-process rounds only.
      const crossReads = { calls: 0, events: 0, ms: 0, maxMs: 0 };
      for (let round = 1; round <= settings.rounds; round++) {
        for (const subject of subjects) {
          reads.maxMs = 0;
          const before = { ...reads };
          const { latencies, sendMs } = await runRound(subject, clients, events, intervalMs);
          samples.get(subject.name)!.push(latencies);
          const rate = events / (sendMs / 1000);
          sentPerSec.get(subject.name)!.push(rate);
          const summary = summariseLatencies(subject.name, [latencies]);
          let polled = "";
          if (subject.name === "service cross-process" && reads.calls > before.calls) {
            const calls = reads.calls - before.calls;
            const found = reads.events - before.events;
            const took = reads.ms - before.ms;
            crossReads.calls += calls;
            crossReads.events += found;
            crossReads.ms += took;
            crossReads.maxMs = Math.max(crossReads.maxMs, reads.maxMs);
            polled = `; hub read ${found} events in ${calls} polls, ${ms(took / calls)} ms/poll`;
          }
          console.log(
            `  round ${round}/${settings.rounds} ${subject.name.padEnd(22)} ` +
              `p50 ${ms(summary.p50Ms).padStart(6)} ms  p99 ${ms(summary.p99Ms).padStart(6)} ms  ` +
              `max ${ms(summary.maxMs).padStart(6)} ms  (${rate.toFixed(0)} events/s sent${polled})`,
          );
          await sleep(100);
        }
      }
      const dropped = [...bareFleet.dropped, ...serviceFleet.dropped];
      if (dropped.length > 0)
        throw new BenchError(`${dropped.length} sockets closed during the run (${dropped.join()})`);

      const summaries: LatencySummary[] = subjects.map((s) =>
        summariseLatencies(s.name, samples.get(s.name)!),
      );
      const [bareSummary, local, cross] = summaries as [
        LatencySummary,
        LatencySummary,
        LatencySummary,
      ];
      const ratio = local.p99Ms / bareSummary.p99Ms;
      const crossTarget = pollMs + CROSS_PROCESS_MARGIN_MS;
      return {
        subjects: [],
        latencies: summaries,
        checks: [
          {
            name: "in-process/bare p99 delivery latency",
            value: ratio,
            target: TARGET_P99_RATIO,
            atMost: true,
            pass: ratio <= TARGET_P99_RATIO,
            detail:
              `report only; p99 ${ms(local.p99Ms)} / ${ms(bareSummary.p99Ms)} ms, ` +
              `p50 ${ms(local.p50Ms)} / ${ms(bareSummary.p50Ms)} ms, ${clients} subscribers`,
          },
          {
            name: "cross-process p99 delivery latency (ms)",
            value: cross.p99Ms,
            target: crossTarget,
            atMost: true,
            pass: cross.p99Ms <= crossTarget,
            detail:
              `report only; events found by polling every EVENT_POLL_MS=${pollMs} ms, ` +
              `target the interval + ${CROSS_PROCESS_MARGIN_MS} ms; p50 ${ms(cross.p50Ms)} ms`,
          },
        ],
        info: {
          engine,
          clients,
          events,
          intervalMs,
          history,
          openMs: { bare: bareOpenMs, service: serviceOpenMs },
          eventsSentPerSec: Object.fromEntries(sentPerSec),
          crossProcessReads: {
            ...crossReads,
            msPerPoll: crossReads.ms / crossReads.calls,
            msPerEvent: crossReads.ms / crossReads.events,
            emptyPolls: reads.emptyCalls,
            msPerEmptyPoll: reads.emptyMs / reads.emptyCalls,
          },
          rounds: settings.rounds,
          eventPollMs: pollMs,
          messageBytes: Buffer.byteLength(
            JSON.stringify({
              event_type: "log",
              message: JSON.stringify({ sentAt: performance.now(), n: 0, pad: PAD }),
              seq: 100,
              ts: new Date().toISOString(),
            }),
          ),
          cpus: os.availableParallelism(),
          node: process.version,
        },
      };
    } finally {
      await cleanup.run();
      activeCleanups.delete(cleanup);
    }
  },
};
