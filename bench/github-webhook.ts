/*
 * Signed GitHub deliveries at a steady rate (issue #5): time to the 2xx answer of the
 * service's webhook door, against a bare Probot app that only acknowledges, same process.
 *
 * GitHub gives a receiver 10 s before it counts a delivery as failed; the target here is
 * much tighter: the service's p99 within 2× the bare handler's (report only).
 *
 * One embedded database and the real service in-process, web only (no workers): the
 * handlers enqueue Agenda jobs that nobody runs during the benchmark. What is measured is
 * the webhook door: Koa, reading the raw body, the signature check, Probot's dispatch (a
 * Context and an installation Octokit per event), the handlers' filtering and, for commands,
 * the job enqueue (one insert into `jobs`, which also recognises a repeated delivery:
 * src/github/delivery.ts). Deliveries that act on nothing write nothing.
 *   bare probot      `new Probot({appId, privateKey, secret, Octokit})` as src/github-api/app.ts
 *                    builds it (retries and throttling off), behind Probot's
 *                    `createNodeMiddleware(app => app.onAny(async () => {}))` on a node:http
 *                    server: it verifies the signature, builds the same Context and answers 200
 *   service          POST WEBHOOK_PATH (/github/webhooks) of the service, which answers 202
 *
 * Payloads are real ones from @octokit/webhooks-examples, each with `installation: {id}` as
 * an App's deliveries carry it, in a fixed cycle of ten: 2 `issue_comment.created` with a
 * `/task …` body (a command: parsed and enqueued, each with its own comment id so each
 * enqueues a job of its own), 4 `check_run.completed` with conclusion success, 2
 * `issues.labeled` "bug" and 2 `pull_request.closed` of a branch the service did not push
 * (all three filtered out by the handlers). Every delivery has a fresh X-GitHub-Delivery
 * UUID and its own valid X-Hub-Signature-256, signed before the round, outside the time.
 *
 * Load is open-loop: delivery n is due at start + n / BENCH_WEBHOOK_RATE (100/s) and is
 * sent then whatever the earlier ones are doing, for BENCH_DURATION_S per round, over a
 * keep-alive http.Agent from this process (the servers share its event loop; both subjects
 * pay the sender alike). A latency runs from the due time (so a sender held up by a busy
 * event loop counts against the subject that kept it busy) to the response's status line.
 * Each subject is warmed up (BENCH_WARMUP_S at the same rate), then measured in alternating
 * rounds (BENCH_ROUNDS), samples pooled per subject. Any answer other than 2xx, a socket
 * error or no answer within 10 s fails the benchmark, once every round has run and printed.
 * Bounds: at most 20,000 deliveries per round; a round ends at most 15 s after its last send.
 *
 * The jobs collection grows during the run: every command (2 in 10) inserts a `jobs` row,
 * a single insert (~1 ms on FerretDB) with an `_id` derived from its unique fields
 * (src/queue/scheduler.ts; Agenda's own unique upsert scanned the whole collection on
 * FerretDB and grew from ~6 ms to ~240 ms over 1,000 jobs). No job is run or pruned here.
 * The p99 of each round is printed, so any growth shows as a trend. At the defaults the run
 * adds about 340 jobs.
 *
 * BENCH_WEBHOOK_PROFILE=1 also times the service's phases by wrapping, from outside, the
 * delivery claims (`once_markers.insertOne`, installation events only, so none in this
 * cycle), Probot's `receive` and the scheduler's `enqueue`:
 * the rest of a request is Koa, the raw body read, the signature check and JSON.parse.
 */
import { randomUUID, createHmac, generateKeyPairSync } from "node:crypto";
import os from "node:os";
import { performance } from "node:perf_hooks";
import examplesModule from "@octokit/webhooks-examples";
import { createNodeMiddleware, Probot, ProbotOctokit } from "probot";
import { ACK_JOB } from "../src/github/commands.js";
import { createLogger } from "../src/util/logger.js";
import {
  activeCleanups,
  BenchError,
  Cleanup,
  envInt,
  summariseLatencies,
  type Benchmark,
  type BenchReport,
  type BenchSettings,
  type Check,
  type LatencySummary,
} from "./lib/harness.js";
import { serveBare } from "./lib/bare-server.js";
import { roundProblem, runRound, type OpenLoopDelivery } from "./lib/open-loop.js";
import { startBenchStack } from "./lib/stack.js";

/** The service's p99 may be at most this many times the bare Probot handler's (report only). */
export const TARGET_P99_RATIO = 2;
/** GitHub's own limit: a delivery not answered within 10 s counts as failed. */
export const GITHUB_TIMEOUT_MS = 10_000;

const DATABASE = "bench_github_webhook";
const SECRET = "bench-webhook-secret";
const APP_ID = "424242";
const APP_SLUG = "foreman-bench";
const INSTALLATION_ID = 4242;
/** Bound: deliveries per round (a round ends at most DRAIN_TIMEOUT_MS after its last send). */
const MAX_DELIVERIES_PER_ROUND = 20_000;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const ms = (n: number) => n.toFixed(1);

// ---------------------------------------------------------------------------------------
// Payloads (test/helpers/github.ts is not imported: it loads nock, which would put its
// interceptor in front of this process's HTTP client).

interface ExampleSet {
  name: string;
  examples: Array<Record<string, unknown>>;
}
// A CommonJS package: its array is the module itself at run time, `.default` in the types.
const examples = ((examplesModule as unknown as { default?: unknown }).default ??
  examplesModule) as unknown as ExampleSet[];

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Payload = Record<string, any>;

function examplePayload(
  event: string,
  action: string,
  where: (example: Payload) => boolean = () => true,
): Payload {
  const payload = examples
    .find((e) => e.name === event)
    ?.examples.find((p) => p.action === action && where(p));
  if (!payload) throw new BenchError(`no example payload for ${event}.${action}`);
  return { ...structuredClone(payload), installation: { id: INSTALLATION_ID } };
}

/** One kind of delivery of the cycle; `body(n)` is the raw JSON of its n-th delivery. */
interface Kind {
  label: string;
  event: string;
  /** Whether the service's handler enqueues a job for it. */
  enqueues: boolean;
  body(n: number): string;
}

function deliveryKinds(): Kind[] {
  const comment = examplePayload("issue_comment", "created");
  comment.comment.body = "/task make the upload step retry on 5xx answers\n\nIt fails daily.";
  comment.comment.user.type = "User";
  const commentId = Number(comment.comment.id);
  const check = examplePayload(
    "check_run",
    "completed",
    (p) => p.check_run.conclusion === "success",
  );
  const labeled = examplePayload("issues", "labeled", (p) => p.label?.name === "bug");
  const closed = examplePayload("pull_request", "closed");
  if (/^foreman\//.test(String(closed.pull_request.head.ref)))
    throw new BenchError("the pull_request.closed example is on a service branch");
  const fixed = (payload: Payload) => {
    const raw = JSON.stringify(payload);
    return () => raw;
  };
  return [
    {
      label: "issue_comment.created /task",
      event: "issue_comment",
      enqueues: true,
      // Its own comment id per delivery: the job is unique per comment.
      body: (n) =>
        JSON.stringify({ ...comment, comment: { ...comment.comment, id: commentId + n } }),
    },
    {
      label: "check_run.completed success",
      event: "check_run",
      enqueues: false,
      body: fixed(check),
    },
    { label: "issues.labeled bug", event: "issues", enqueues: false, body: fixed(labeled) },
    {
      label: "pull_request.closed",
      event: "pull_request",
      enqueues: false,
      body: fixed(closed),
    },
  ];
}

/** The cycle of ten: indexes into `deliveryKinds()`. */
const CYCLE = [0, 1, 2, 1, 3, 0, 1, 2, 1, 3];

interface Delivery extends OpenLoopDelivery {
  enqueues: boolean;
}

/** Builds and signs `count` deliveries; `first` numbers them across rounds. */
function signDeliveries(kinds: Kind[], first: number, count: number): Delivery[] {
  const signatures = new Map<string, string>();
  return Array.from({ length: count }, (_, i) => {
    const kind = kinds[CYCLE[(first + i) % CYCLE.length]!]!;
    const raw = kind.body(first + i);
    let signature = signatures.get(raw);
    if (signature === undefined) {
      signature = `sha256=${createHmac("sha256", SECRET).update(raw).digest("hex")}`;
      if (!kind.enqueues) signatures.set(raw, signature);
    }
    const body = Buffer.from(raw);
    return {
      body,
      enqueues: kind.enqueues,
      headers: {
        "content-type": "application/json",
        "content-length": String(body.length),
        "user-agent": "GitHub-Hookshot/bench",
        "x-github-event": kind.event,
        "x-github-delivery": randomUUID(),
        "x-github-hook-id": "1",
        "x-github-hook-installation-target-type": "integration",
        "x-github-hook-installation-target-id": APP_ID,
        "x-hub-signature-256": signature,
      },
    };
  });
}

// ---------------------------------------------------------------------------------------
// The bare subject.

async function startBareProbot(privateKey: string, webhooksPath: string) {
  const probot = new Probot({
    appId: APP_ID,
    privateKey,
    secret: SECRET,
    log: createLogger({ level: "silent" }),
    Octokit: ProbotOctokit.defaults({ retry: { enabled: false }, throttle: { enabled: false } }),
  });
  const middleware = await createNodeMiddleware(
    (app) => {
      app.onAny(async () => {});
    },
    { probot, webhooksPath },
  );
  return serveBare(
    (req, res) =>
      void middleware(req, res, () => {
        res.writeHead(404).end();
      }),
    webhooksPath,
  );
}

// ---------------------------------------------------------------------------------------
// Optional per-phase timing of the service (BENCH_WEBHOOK_PROFILE=1).

interface PhaseTimes {
  claims: number[];
  dispatch: number[];
  enqueue: number[];
}

function wrapTimed<A extends unknown[], R>(
  fn: (...args: A) => Promise<R>,
  into: () => number[],
): (...args: A) => Promise<R> {
  return async (...args: A) => {
    const started = performance.now();
    try {
      return await fn(...args);
    } finally {
      into().push(performance.now() - started);
    }
  };
}

function quantiles(values: number[]): string {
  if (values.length === 0) return "none";
  const sorted = Float64Array.from(values).sort();
  const at = (p: number) => sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)]!;
  const mean = values.reduce((a, b) => a + b, 0) / values.length;
  return `n ${values.length} mean ${ms(mean)} p50 ${ms(at(0.5))} p99 ${ms(at(0.99))} max ${ms(sorted[sorted.length - 1]!)} ms`;
}

// ---------------------------------------------------------------------------------------

export const githubWebhook: Benchmark = {
  name: "github-webhook",
  description: "signed GitHub deliveries at a steady rate: time to 2xx vs a bare Probot handler",
  async run(settings: BenchSettings): Promise<BenchReport> {
    const rate = envInt("BENCH_WEBHOOK_RATE", 100, 1, 2000);
    const profile = ["1", "true", "yes"].includes(
      (process.env.BENCH_WEBHOOK_PROFILE ?? "").toLowerCase(),
    );
    const perRound = Math.round(rate * settings.durationS);
    const perWarmup = Math.round(rate * settings.warmupS);
    if (perRound > MAX_DELIVERIES_PER_ROUND)
      throw new BenchError(
        `BENCH_WEBHOOK_RATE × BENCH_DURATION_S = ${perRound} deliveries per round; ` +
          `at most ${MAX_DELIVERIES_PER_ROUND}`,
      );

    const privateKey = generateKeyPairSync("rsa", { modulusLength: 2048 })
      .privateKey.export({ type: "pkcs1", format: "pem" })
      .toString();
    const kinds = deliveryKinds();

    const cleanup = new Cleanup();
    activeCleanups.add(cleanup);
    try {
      const { service, engine } = await startBenchStack(
        cleanup,
        DATABASE,
        { APP_ID, PRIVATE_KEY: privateKey, WEBHOOK_SECRET: SECRET, APP_SLUG },
        { workers: false },
      );
      const webhookPath = service.config.github!.webhookPath;
      const bare = await startBareProbot(privateKey, webhookPath);
      cleanup.defer("close bare probot server", () => bare.close());

      const phases: PhaseTimes = { claims: [], dispatch: [], enqueue: [] };
      if (profile) {
        // Web only: delivery claims are the only inserts into once_markers.
        const markers = service.db.models.Once.collection;
        markers.insertOne = wrapTimed(
          markers.insertOne.bind(markers),
          () => phases.claims,
        ) as typeof markers.insertOne;
        const { scheduler } = service;
        scheduler.enqueue = wrapTimed(scheduler.enqueue.bind(scheduler), () => phases.enqueue);
        // Only the service calls Probot#receive: the bare middleware goes through
        // webhooks.verifyAndReceive.
        const receive = Probot.prototype.receive;
        cleanup.defer("restore Probot#receive", () => (Probot.prototype.receive = receive));
        Probot.prototype.receive = function timedReceive(this: Probot, event) {
          return wrapTimed(receive.bind(this), () => phases.dispatch)(event);
        };
      }

      const subjects = [
        { name: "bare probot", url: bare.url },
        { name: "service", url: `${service.http!.url}${webhookPath}` },
      ];
      let numbered = 0;
      const deliveriesFor = (count: number) => {
        const batch = signDeliveries(kinds, numbered, count);
        numbered += count;
        return batch;
      };
      const serviceSent = { deliveries: 0, commands: 0 };
      // Deliveries not acknowledged fail the benchmark, after every round has run and
      // been printed: a service that falls behind still shows by how much.
      const problems: string[] = [];
      const measure = async (subject: (typeof subjects)[number], count: number, phase: string) => {
        const batch = deliveriesFor(count);
        for (const times of Object.values(phases)) times.length = 0;
        const result = await runRound(subject.url, batch, rate, GITHUB_TIMEOUT_MS);
        const problem = roundProblem(result);
        if (problem) {
          problems.push(`${subject.name}, ${phase}: ${problem}`);
          console.log(`  ${subject.name}, ${phase}: NOT ALL ACKNOWLEDGED: ${problem}`);
        }
        if (subject.name === "service") {
          serviceSent.deliveries += batch.length;
          serviceSent.commands += batch.filter((d) => d.enqueues).length;
        }
        // Let sockets close and the database settle before the next subject.
        await sleep(200);
        return result;
      };

      if (perWarmup > 0) {
        for (const subject of subjects) {
          const result = await measure(subject, perWarmup, "warm-up");
          const { p99Ms } = summariseLatencies(subject.name, [result.latencies]);
          console.log(
            `  warm-up ${subject.name}: ${perWarmup} deliveries at ${rate}/s, p99 ${ms(p99Ms)} ms`,
          );
        }
      }

      const width = Math.max(...subjects.map((s) => s.name.length));
      const samples = new Map<string, Float64Array[]>(subjects.map((s) => [s.name, []]));
      const busy = new Map<string, number[]>(subjects.map((s) => [s.name, []]));
      const lags = new Map<string, number[]>(subjects.map((s) => [s.name, []]));
      for (let round = 1; round <= settings.rounds; round++) {
        for (const subject of subjects) {
          const result = await measure(subject, perRound, `round ${round}`);
          samples.get(subject.name)!.push(result.latencies);
          busy.get(subject.name)!.push(result.busyMsPerDelivery);
          lags.get(subject.name)!.push(result.maxSendLagMs);
          const s = summariseLatencies(subject.name, [result.latencies]);
          console.log(
            `  round ${round}/${settings.rounds} ${subject.name.padEnd(width)}  ` +
              `p50 ${ms(s.p50Ms).padStart(6)} ms  p99 ${ms(s.p99Ms).padStart(6)} ms  ` +
              `max ${ms(s.maxMs).padStart(6)} ms  ${perRound} deliveries, ` +
              `main thread ${ms(result.busyMsPerDelivery)} ms/delivery, ` +
              `sender late ≤ ${ms(result.maxSendLagMs)} ms`,
          );
          if (profile && subject.name === "service") {
            console.log(`    claim insert    ${quantiles(phases.claims)}`);
            console.log(`    probot.receive  ${quantiles(phases.dispatch)}`);
            console.log(`    enqueue         ${quantiles(phases.enqueue)}`);
          }
        }
      }

      const summaries: LatencySummary[] = subjects.map((s) =>
        summariseLatencies(s.name, samples.get(s.name)!),
      );
      const [bareSummary, svc] = summaries as [LatencySummary, LatencySummary];
      if (problems.length > 0)
        throw new BenchError(
          `deliveries not acknowledged with a 2xx: ${problems.join(" | ")} ` +
            `(pooled p99: service ${ms(svc.p99Ms)} ms, bare ${ms(bareSummary.p99Ms)} ms)`,
        );

      // What the service stored proves the deliveries went the whole way through: each
      // command queued its acknowledgement job (which, with workers, checks the author's
      // access and queues the command's own job), and no delivery wrote a marker.
      const connection = service.db.models.Once.db;
      const markers = await service.db.models.Once.countDocuments({ scope: "github-delivery" });
      const jobs = await connection.collection("jobs").countDocuments({ name: ACK_JOB.name });
      if (markers !== 0 || jobs !== serviceSent.commands)
        throw new BenchError(
          `the service stored ${markers} delivery markers and ${jobs} command acknowledgement jobs; ` +
            `expected 0 and ${serviceSent.commands}`,
        );

      const ratio = svc.p99Ms / bareSummary.p99Ms;
      const pairRatios = svc.roundP99Ms.map((p, i) => p / bareSummary.roundP99Ms[i]!);
      const checks: Check[] = [
        {
          name: "service/bare p99 time to 2xx",
          value: ratio,
          target: TARGET_P99_RATIO,
          atMost: true,
          pass: ratio <= TARGET_P99_RATIO,
          detail:
            `report only; p99 ${ms(svc.p99Ms)} / ${ms(bareSummary.p99Ms)} ms, ` +
            `p50 ${ms(svc.p50Ms)} / ${ms(bareSummary.p50Ms)} ms at ${rate} deliveries/s; ` +
            `per round ${pairRatios.map((r) => r.toFixed(2)).join(", ")}`,
        },
        {
          name: "service p99 time to 2xx (ms)",
          value: svc.p99Ms,
          target: GITHUB_TIMEOUT_MS,
          atMost: true,
          pass: svc.p99Ms <= GITHUB_TIMEOUT_MS,
          detail: `GitHub's delivery timeout; max ${ms(svc.maxMs)} ms`,
        },
      ];
      return {
        subjects: [],
        latencies: summaries,
        checks,
        info: {
          engine,
          rate,
          deliveriesPerRound: perRound,
          warmupDeliveries: perWarmup,
          rounds: settings.rounds,
          mix: CYCLE.map((i) => kinds[i]!.label),
          pairRatios,
          mainThreadMsPerDelivery: Object.fromEntries(busy),
          maxSendLagMs: Object.fromEntries(lags),
          stored: { deliveryMarkers: markers, commandJobs: jobs },
          profile,
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
