import http from "node:http";
import { performance } from "node:perf_hooks";
import { BenchError } from "./harness.js";

/*
 * The open-loop sender of the webhook benchmarks: delivery n is due at start + n / rate and
 * is sent then, whatever the earlier ones are doing, over a keep-alive http.Agent from this
 * process. A latency runs from the due time (so a sender held up by a busy event loop counts
 * against the subject that kept it busy) to the response's status line. A delivery without
 * an answer within `timeoutMs` (the vendor's own limit) counts as failed; a round ends at
 * most DRAIN_TIMEOUT_MS after its last send.
 */

/** How long a round may run past its last due time. */
export const DRAIN_TIMEOUT_MS = 15_000;

/** One request to send: signed beforehand, outside the time. */
export interface OpenLoopDelivery {
  headers: Record<string, string>;
  body: Buffer;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export interface RoundResult {
  latencies: Float64Array;
  statuses: Map<number, number>;
  errors: string[];
  /** How late the sender was against the schedule, worst case (ms). */
  maxSendLagMs: number;
  /** Main-thread busy time per delivery (servers, database driver and sender), ms. */
  busyMsPerDelivery: number;
  wallMs: number;
}

export async function runRound(
  url: string,
  deliveries: OpenLoopDelivery[],
  rate: number,
  timeoutMs: number,
): Promise<RoundResult> {
  const target = new URL(url);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 512 });
  const latencies = new Float64Array(deliveries.length).fill(Number.NaN);
  const statuses = new Map<number, number>();
  const errors: string[] = [];
  let maxSendLagMs = 0;
  let pending = deliveries.length;
  let allDone!: () => void;
  const done = new Promise<void>((resolve) => (allDone = resolve));
  const finish = () => {
    pending -= 1;
    if (pending === 0) allDone();
  };

  const send = (i: number, due: number) => {
    const delivery = deliveries[i]!;
    let settled = false;
    const settle = () => {
      if (settled) return;
      settled = true;
      finish();
    };
    const req = http.request(
      {
        agent,
        host: target.hostname,
        port: target.port,
        path: target.pathname,
        method: "POST",
        headers: delivery.headers,
      },
      (res) => {
        latencies[i] = performance.now() - due;
        clearTimeout(timer);
        const status = res.statusCode ?? 0;
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
        res.resume();
        res.once("end", settle);
        res.once("error", (error) => {
          errors.push(error.message);
          settle();
        });
        res.once("close", settle);
      },
    );
    // From the send, not from the socket: a request queued in the agent counts too.
    const timer = setTimeout(
      () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)),
      timeoutMs,
    );
    const failed = (message: string) => {
      if (Number.isNaN(latencies[i]!)) {
        // Counted with the time it failed at (≥ timeoutMs for a timeout), and as an error.
        latencies[i] = performance.now() - due;
        errors.push(message);
      }
      settle();
    };
    req.once("error", (error) => failed(error.message));
    req.once("close", () => {
      clearTimeout(timer);
      failed("closed without an answer");
    });
    req.end(delivery.body);
  };

  const elu = performance.eventLoopUtilization();
  const intervalMs = 1000 / rate;
  const start = performance.now() + 5;
  let next = 0;
  while (next < deliveries.length) {
    const now = performance.now();
    while (next < deliveries.length && start + next * intervalMs <= now) {
      const due = start + next * intervalMs;
      maxSendLagMs = Math.max(maxSendLagMs, now - due);
      send(next, due);
      next += 1;
    }
    if (next < deliveries.length)
      await sleep(Math.max(0, start + next * intervalMs - performance.now()));
  }
  let timer: NodeJS.Timeout | undefined;
  const drained = await Promise.race([
    done.then(() => true),
    new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), DRAIN_TIMEOUT_MS))),
  ]);
  clearTimeout(timer);
  const wallMs = performance.now() - start;
  const busy = performance.eventLoopUtilization(elu);
  agent.destroy();
  if (!drained)
    throw new BenchError(
      `${url}: ${pending} of ${deliveries.length} deliveries unanswered ${DRAIN_TIMEOUT_MS} ms after the last was sent`,
    );
  return {
    latencies,
    statuses,
    errors,
    maxSendLagMs,
    busyMsPerDelivery: busy.active / deliveries.length,
    wallMs,
  };
}

/** What went wrong in a round (answers other than 2xx, socket errors), or undefined. */
export function roundProblem(result: RoundResult): string | undefined {
  const bad = [...result.statuses].filter(([status]) => status < 200 || status > 299);
  if (bad.length === 0 && result.errors.length === 0) return undefined;
  const codes = bad.map(([status, count]) => `${count}× ${status}`).join(", ") || "none";
  const errors = [...new Set(result.errors)].slice(0, 3).join("; ") || "none";
  return `non-2xx ${codes}; ${result.errors.length} socket errors (${errors})`;
}
