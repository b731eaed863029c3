/*
 * Signed Slack, Linear and Jira deliveries at a steady rate (issues #17, #27): time to the
 * 2xx answer of the service's vendor doors, against each vendor's deadline.
 *
 * Slack wants a slash command answered within 3 s (after that the user sees a timeout);
 * Linear and Jira retry deliveries that are not acknowledged (10 s here, as for GitHub).
 * The target: p99 under 100 ms per vendor (far inside every deadline), and under the
 * vendor's deadline as a hard limit.
 *
 * One embedded database and the real service in-process, web only (no workers): every
 * delivery asks for a task, and its answer waits for what makes that request durable (the
 * integration's lookup, cached; the signature and timestamp check; reading what is asked;
 * the insert of the task request job, grouped with the other jobs queued in the same turn
 * into one insertMany by the scheduler, src/db/insert-batcher.ts; its `_id` recognises a
 * repeated delivery). The jobs stay queued (the job that claims the delivery and creates the
 * task runs on workers, tested in test/integration/integrations-*.test.ts). Slack, Linear,
 * Jira and the model are one local fake server (the integrations' API URLs and Jira site
 * point at it); nothing in the request path calls it, and the run reports how many requests
 * it saw. Subjects: POST /integrations/{id}/slack/commands, …/linear/webhook and
 * …/jira/webhook of the service.
 *
 * Every delivery is distinct, so no claim short-circuits it: a slash command
 * `/foreman task <n-th change>` with its own trigger_id, a Linear Issue `create` with the
 * `agent` label and its own issue id and Linear-Delivery, a Jira `jira:issue_created` with
 * the label, its own issue id and X-Atlassian-Webhook-Identifier. Each is signed just before
 * its round (Slack's 5 minutes and Linear's 60 s allow it), outside the time. After the run
 * the service must hold exactly one queued task request per delivery it was sent, by source.
 *
 * Load is open-loop (bench/lib/open-loop.ts): delivery n is due at start + n /
 * BENCH_INTEGRATIONS_RATE (50/s) and sent then; a latency runs from the due time to the
 * status line. Each vendor is warmed up (BENCH_WARMUP_S at the rate), then measured in
 * BENCH_ROUNDS rounds of BENCH_DURATION_S, the vendors in turn; samples are pooled per
 * vendor. Any answer other than 2xx, a socket error or no answer within the vendor's
 * deadline fails the benchmark once every round has run. Bounds: at most 5,000 deliveries
 * per round and vendor; a round ends at most 15 s after its last send.
 * BENCH_INTEGRATIONS_PROFILE=1 also times the service's database writes on the path, by
 * collection.
 */
import { createHmac, randomUUID } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import { performance } from "node:perf_hooks";
import { TASK_REQUEST_JOB } from "../src/integrations/shared/task-request.js";
import { Collection } from "mongodb";
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
import { roundProblem, runRound, type OpenLoopDelivery } from "./lib/open-loop.js";
import { startBenchStack } from "./lib/stack.js";
import { call, setUpAccount } from "./tasks-create.js";

/** The service's p99 time to 2xx, per vendor. */
export const TARGET_P99_MS = 100;
/** Slack's limit for answering a slash command. */
export const SLACK_TIMEOUT_MS = 3_000;
/** Linear and Jira: a delivery not answered in time is retried; 10 s as for GitHub. */
const TRACKER_TIMEOUT_MS = 10_000;

const DATABASE = "bench_integrations";
const MAX_DELIVERIES_PER_ROUND = 5_000;
const SLACK_SECRET = "bench-slack-signing-secret-0123456789";
const LINEAR_SECRET = "bench-linear-webhook-secret-0123456789";
const JIRA_SECRET = "bench-jira-webhook-secret-0123456789";
const CHANNEL = "C0BENCH01";
const SLACK_TEAM = "T0BENCH01";

type Vendor = "slack" | "linear" | "jira";
const VENDORS: Vendor[] = ["slack", "linear", "jira"];

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const ms = (n: number) => n.toFixed(1);

// ---------------------------------------------------------------------------------------
// Deliveries, signed as each vendor signs them.

const CHANGES = [
  "make the upload step retry on 5xx answers",
  "add a health check endpoint that reports the database status",
  "log the request id with every error",
  "cache the exchange rates for an hour",
];

function delivery(headers: Record<string, string>, raw: string): OpenLoopDelivery {
  const body = Buffer.from(raw);
  return { body, headers: { ...headers, "content-length": String(body.length) } };
}

function slackCommand(n: number): OpenLoopDelivery {
  const raw = new URLSearchParams({
    token: "legacy-unused",
    team_id: SLACK_TEAM,
    team_domain: "bench",
    channel_id: CHANNEL,
    channel_name: "eng",
    user_id: "U0BENCH01",
    user_name: "bench",
    command: "/foreman",
    text: `task ${CHANGES[n % CHANGES.length]!} (#${n})`,
    api_app_id: "A0BENCH01",
    response_url: "https://hooks.slack.com/commands/T0BENCH01/1/bench",
    trigger_id: `${n}.${Date.now()}.${randomUUID().replaceAll("-", "")}`,
  }).toString();
  const ts = String(Math.floor(Date.now() / 1000));
  const signature = `v0=${createHmac("sha256", SLACK_SECRET).update(`v0:${ts}:${raw}`).digest("hex")}`;
  return delivery(
    {
      "content-type": "application/x-www-form-urlencoded",
      "user-agent": "Slackbot 1.0 (+https://api.slack.com/robots)",
      "x-slack-request-timestamp": ts,
      "x-slack-signature": signature,
    },
    raw,
  );
}

function linearIssue(n: number): OpenLoopDelivery {
  const id = randomUUID();
  const raw = JSON.stringify({
    action: "create",
    type: "Issue",
    createdAt: new Date().toISOString(),
    organizationId: "org-bench",
    url: `https://linear.app/bench/issue/ENG-${n}`,
    webhookId: "wh-bench",
    webhookTimestamp: Date.now(),
    data: {
      id,
      identifier: `ENG-${n}`,
      number: n,
      title: CHANGES[n % CHANGES.length],
      description: `Seen in production since Monday (#${n}).`,
      teamId: "team-bench",
      team: { id: "team-bench", key: "ENG", name: "Engineering" },
      labels: [{ id: "lbl-agent", name: "agent", color: "#000000" }],
      labelIds: ["lbl-agent"],
      assigneeId: null,
      creatorId: "user-bench",
      url: `https://linear.app/bench/issue/ENG-${n}`,
    },
  });
  return delivery(
    {
      "content-type": "application/json; charset=utf-8",
      "user-agent": "Linear-Webhook",
      "linear-delivery": randomUUID(),
      "linear-event": "Issue",
      "linear-signature": createHmac("sha256", LINEAR_SECRET).update(raw).digest("hex"),
    },
    raw,
  );
}

function jiraIssue(n: number): OpenLoopDelivery {
  const raw = JSON.stringify({
    timestamp: Date.now(),
    webhookEvent: "jira:issue_created",
    issue_event_type_name: "issue_created",
    user: { accountId: "acct-bench", displayName: "Bench" },
    issue: {
      id: String(100_000 + n),
      key: `ENG-${n}`,
      fields: {
        summary: CHANGES[n % CHANGES.length],
        description: {
          type: "doc",
          version: 1,
          content: [
            {
              type: "paragraph",
              content: [{ type: "text", text: `Seen in production since Monday (#${n}).` }],
            },
          ],
        },
        labels: ["backend", "agent"],
        project: { id: "10000", key: "ENG", name: "Engineering" },
      },
    },
  });
  return delivery(
    {
      "content-type": "application/json; charset=utf-8",
      "user-agent": "Atlassian Webhook HTTP Client",
      "x-atlassian-webhook-identifier": randomUUID(),
      "x-atlassian-webhook-flow": "Primary",
      "x-hub-signature": `sha256=${createHmac("sha256", JIRA_SECRET).update(raw).digest("hex")}`,
    },
    raw,
  );
}

const SIGN: Record<Vendor, (n: number) => OpenLoopDelivery> = {
  slack: slackCommand,
  linear: linearIssue,
  jira: jiraIssue,
};

const TIMEOUT: Record<Vendor, number> = {
  slack: SLACK_TIMEOUT_MS,
  linear: TRACKER_TIMEOUT_MS,
  jira: TRACKER_TIMEOUT_MS,
};

const PATH: Record<Vendor, string> = {
  slack: "slack/commands",
  linear: "linear/webhook",
  jira: "jira/webhook",
};

/** Slack, Linear, Jira and the model as one local server: 200 `{ok: true}`, counted. */
async function startVendorFake() {
  let requests = 0;
  const server = http.createServer((req, res) => {
    requests += 1;
    req.resume();
    req.once("end", () =>
      res.writeHead(200, { "content-type": "application/json" }).end('{"ok":true,"data":{}}'),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests: () => requests,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

// ---------------------------------------------------------------------------------------

export const integrationsBench: Benchmark = {
  name: "integrations",
  description:
    "signed Slack commands, Linear and Jira webhooks at a steady rate: p99 time to 2xx against the vendors' deadlines",
  async run(settings: BenchSettings): Promise<BenchReport> {
    const rate = envInt("BENCH_INTEGRATIONS_RATE", 50, 1, 1000);
    const profile = ["1", "true", "yes"].includes(
      (process.env.BENCH_INTEGRATIONS_PROFILE ?? "").toLowerCase(),
    );
    const perRound = Math.round(rate * settings.durationS);
    const perWarmup = Math.round(rate * settings.warmupS);
    if (perRound > MAX_DELIVERIES_PER_ROUND)
      throw new BenchError(
        `BENCH_INTEGRATIONS_RATE × BENCH_DURATION_S = ${perRound} deliveries per round; ` +
          `at most ${MAX_DELIVERIES_PER_ROUND}`,
      );

    const cleanup = new Cleanup();
    activeCleanups.add(cleanup);
    try {
      const fake = await startVendorFake();
      cleanup.defer("close vendor fake", () => fake.close());
      const { service, engine } = await startBenchStack(
        cleanup,
        DATABASE,
        {
          SLACK_API_URL: `${fake.url}/slack/api/`,
          LINEAR_API_URL: `${fake.url}/linear/graphql`,
          LLM_BASE_URL: `${fake.url}/v1`,
          LLM_API_KEY: "bench-model-key-0123456789",
        },
        { workers: false },
      );
      const { key, body: target } = await setUpAccount(service);
      const repo = { workspace_id: target.workspace_id, repo_id: target.repo_id };
      const url = service.http!.url;
      const create = (body: Record<string, unknown>) =>
        call(`${url}/integrations`, { method: "POST", key, body }, 201);
      const ids: Record<Vendor, string> = {
        slack: String(
          (
            await create({
              type: "slack",
              name: "bench",
              settings: { team_id: SLACK_TEAM, channels: { [CHANNEL]: repo } },
              secrets: { signing_secret: SLACK_SECRET, bot_token: "xoxb-bench-0123456789" },
            })
          ).id,
        ),
        linear: String(
          (
            await create({
              type: "linear",
              name: "bench",
              settings: { teams: { ENG: repo } },
              secrets: { webhook_secret: LINEAR_SECRET, api_key: "lin_api_bench_0123456789" },
            })
          ).id,
        ),
        jira: String(
          (
            await create({
              type: "jira",
              name: "bench",
              settings: {
                site_url: `${fake.url}/jira`,
                email: "bench@example.com",
                projects: { ENG: repo },
                transitions: { started: "Start", done: "Done" },
              },
              secrets: { webhook_secret: JIRA_SECRET, api_token: "ATATT-bench-0123456789" },
            })
          ).id,
        ),
      };
      // BENCH_INTEGRATIONS_PROFILE=1: the service's database writes on the path, timed by
      // collection (every insertOne / insertMany of the driver, wrapped from outside).
      const phases = new Map<string, number[]>();
      if (profile) {
        const proto = Collection.prototype as unknown as Record<
          "insertOne" | "insertMany",
          (this: Collection, ...args: unknown[]) => Promise<unknown>
        >;
        for (const method of ["insertOne", "insertMany"] as const) {
          const original = proto[method];
          proto[method] = async function (this: Collection, ...args: unknown[]) {
            const started = performance.now();
            try {
              return await original.apply(this, args);
            } finally {
              const name = `${this.collectionName}.${method}`;
              if (!phases.has(name)) phases.set(name, []);
              phases.get(name)!.push(performance.now() - started);
            }
          };
          cleanup.defer(`restore ${method}`, () => {
            proto[method] = original;
          });
        }
      }
      interface Subject {
        name: string;
        vendor: Vendor;
        url: string;
      }
      const subjects: Subject[] = VENDORS.map((vendor) => ({
        name: vendor,
        vendor,
        url: `${url}/integrations/${ids[vendor]}/${PATH[vendor]}`,
      }));
      let numbered = 0;
      const sent: Record<Vendor, number> = { slack: 0, linear: 0, jira: 0 };
      const problems: string[] = [];
      const measure = async (subject: Subject, count: number, phase: string) => {
        const batch = Array.from({ length: count }, () => SIGN[subject.vendor](numbered++));
        const result = await runRound(subject.url, batch, rate, TIMEOUT[subject.vendor]);
        const problem = roundProblem(result);
        if (problem) {
          problems.push(`${subject.name}, ${phase}: ${problem}`);
          console.log(`  ${subject.name}, ${phase}: NOT ALL ACKNOWLEDGED: ${problem}`);
        }
        sent[subject.vendor] += count;
        // Let sockets close and the database settle before the next subject.
        await sleep(200);
        return result;
      };

      if (perWarmup > 0)
        for (const subject of subjects) {
          const result = await measure(subject, perWarmup, "warm-up");
          const { p99Ms } = summariseLatencies(subject.name, [result.latencies]);
          console.log(
            `  warm-up ${subject.name}: ${perWarmup} deliveries at ${rate}/s, p99 ${ms(p99Ms)} ms`,
          );
        }

      const width = Math.max(...subjects.map((s) => s.name.length));
      const samples = new Map<string, Float64Array[]>(subjects.map((s) => [s.name, []]));
      const busy = new Map<string, number[]>(subjects.map((s) => [s.name, []]));
      for (let round = 1; round <= settings.rounds; round++) {
        for (const subject of subjects) {
          phases.clear();
          const result = await measure(subject, perRound, `round ${round}`);
          samples.get(subject.name)!.push(result.latencies);
          busy.get(subject.name)!.push(result.busyMsPerDelivery);
          const s = summariseLatencies(subject.name, [result.latencies]);
          console.log(
            `  round ${round}/${settings.rounds} ${subject.name.padEnd(width)}  ` +
              `p50 ${ms(s.p50Ms).padStart(6)} ms  p99 ${ms(s.p99Ms).padStart(6)} ms  ` +
              `max ${ms(s.maxMs).padStart(6)} ms  ${perRound} deliveries, ` +
              `main thread ${ms(result.busyMsPerDelivery)} ms/delivery, ` +
              `sender late ≤ ${ms(result.maxSendLagMs)} ms`,
          );
          if (profile)
            for (const [phase, times] of phases) {
              const t = summariseLatencies(phase, [Float64Array.from(times)]);
              console.log(
                `    ${phase.padEnd(12)} n ${times.length} p50 ${ms(t.p50Ms)} p99 ${ms(t.p99Ms)} max ${ms(t.maxMs)} ms`,
              );
            }
        }
      }

      const summaries: LatencySummary[] = subjects.map((s) =>
        summariseLatencies(s.name, samples.get(s.name)!),
      );
      if (problems.length > 0)
        throw new BenchError(`deliveries not acknowledged with a 2xx: ${problems.join(" | ")}`);

      // What the service stored proves each delivery went the whole way: one queued task
      // request each (the job that creates the task; workers are off here, so it waits).
      const jobs = service.db.connection.db!.collection("jobs");
      const count = async () =>
        Object.fromEntries(
          await Promise.all(
            VENDORS.map(
              async (v) =>
                [
                  v,
                  await jobs.countDocuments({ name: TASK_REQUEST_JOB.name, "data.type": v }),
                ] as const,
            ),
          ),
        ) as Record<Vendor, number>;
      // Each request was answered after its job's insert: all are there now.
      const stored = await count();
      for (const v of VENDORS)
        if (stored[v] !== sent[v])
          throw new BenchError(
            `the service queued ${stored[v]} ${v} task requests for ${sent[v]} deliveries`,
          );

      const checks: Check[] = [];
      for (const vendor of VENDORS) {
        const svc = summaries.find((s) => s.subject === vendor)!;
        const deadline = TIMEOUT[vendor];
        checks.push({
          name: `${vendor}: p99 time to 2xx (ms)`,
          value: svc.p99Ms,
          target: TARGET_P99_MS,
          atMost: true,
          pass: svc.p99Ms <= TARGET_P99_MS,
          detail:
            `p50 ${ms(svc.p50Ms)} ms, max ${ms(svc.maxMs)} ms at ${rate} deliveries/s; ` +
            `the vendor's deadline is ${deadline} ms (${((svc.p99Ms / deadline) * 100).toFixed(1)}% of it at p99); ` +
            `per round p99 ${svc.roundP99Ms.map((p) => ms(p)).join(", ")} ms`,
        });
        checks.push({
          name: `${vendor}: p99 time to 2xx within the vendor's deadline (ms)`,
          value: svc.p99Ms,
          target: deadline,
          atMost: true,
          pass: svc.p99Ms <= deadline,
          detail: vendor === "slack" ? "Slack's limit for a slash command" : "retried when later",
        });
      }
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
          taskRequestsQueued: stored,
          vendorFakeRequests: fake.requests(),
          mainThreadMsPerDelivery: Object.fromEntries(busy),
          loadAverage: os.loadavg(),
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
