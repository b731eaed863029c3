/*
 * What Prometheus metrics cost: GET /keys/me and POST /tasks on a service with metrics off
 * against the same service with metrics on (METRICS_TOKEN: the HTTP middleware on every
 * request) and scraped once a second while it is loaded (Prometheus scrapes every 15 s by
 * default, so this is harsher), in the same run.
 *
 * One embedded database, both services in this process on it (web only, no workers), the
 * load generator in a worker thread; off and on are measured in alternating rounds after a
 * warm-up and the medians compared. Target: metrics on keeps at least 95% of the throughput.
 * BENCH_METRICS_SCRAPE_MS sets the scrape interval (default 1000; 0: no scrapes, which
 * measures the recording alone).
 */
import os from "node:os";
import path from "node:path";
import { loadConfig } from "../src/config/env.js";
import { startService } from "../src/service.js";
import {
  activeCleanups,
  alternatingRounds,
  BenchError,
  Cleanup,
  type Benchmark,
  type BenchReport,
  type BenchSettings,
  type Check,
  type LoadSubject,
  type SubjectSummary,
} from "./lib/harness.js";
import { startBenchStack } from "./lib/stack.js";
import { setUpAccount } from "./tasks-create.js";

export const TARGET_RATIO = 0.95;
const DATABASE = "bench_metrics";
const TOKEN = "bench-metrics-token-0123456789";

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function ratioCheck(name: string, off: SubjectSummary, on: SubjectSummary): Check {
  const ratio = on.requestsPerSec / off.requestsPerSec;
  const pairs = on.rounds.map((r, i) => r.requestsPerSec / off.rounds[i]!.requestsPerSec);
  return {
    name,
    value: ratio,
    target: TARGET_RATIO,
    pass: ratio >= TARGET_RATIO,
    detail:
      `${on.requestsPerSec.toFixed(0)} / ${off.requestsPerSec.toFixed(0)} req/s (medians, on/off); ` +
      `per round ${pairs.map((r) => r.toFixed(3)).join(", ")}`,
  };
}

export const metricsOverhead: Benchmark = {
  name: "metrics-overhead",
  description: "GET /keys/me and POST /tasks with metrics on (and scraped) vs off, same run",
  async run(settings: BenchSettings): Promise<BenchReport> {
    const cleanup = new Cleanup();
    activeCleanups.add(cleanup);
    try {
      const { uri, service: off, engine, tmp } = await startBenchStack(cleanup, DATABASE);
      const on = await startService({
        config: loadConfig({
          NODE_ENV: "production",
          HOST: "127.0.0.1",
          PORT: "0",
          LOG_LEVEL: "silent",
          MONGODB_URI: uri,
          DATA_DIR: path.join(tmp, "data-on"),
          SIGNUP_RATE_LIMIT: "1000000",
          // The benchmarks' repositories are local folders, refused by default (README, "Sandbox").
          ALLOW_LOCAL_REPOS: "true",
          SHUTDOWN_GRACE_S: "5",
          METRICS_TOKEN: TOKEN,
        }),
        web: true,
        workers: false,
      });
      cleanup.defer("stop metrics service", () => on.stop());
      const offUrl = off.http!.url;
      const onUrl = on.http!.url;
      if (off.config.metrics.enabled || !on.config.metrics.enabled)
        throw new BenchError("the off/on services do not have metrics off/on");

      const { key, body } = await setUpAccount(off);
      const scrape = async () => {
        const res = await fetch(`${onUrl}/metrics`, {
          headers: { authorization: `Bearer ${TOKEN}` },
        });
        const text = await res.text();
        if (res.status !== 200) throw new BenchError(`GET /metrics answered ${res.status}`);
        return text;
      };
      // The "on" service must really count: its first scrape is checked after the load.
      const offMetrics = await fetch(`${offUrl}/metrics`);
      if (offMetrics.status !== 404)
        throw new BenchError(`metrics-off service answered ${offMetrics.status} on /metrics`);

      // Scrapes while (and only while) the metrics-on subject is loaded.
      let scrapes = 0;
      const scrapeEveryMs = Number(process.env.BENCH_METRICS_SCRAPE_MS ?? "1000");
      const scrapeWhileLoaded = (subject: LoadSubject) => {
        if (!subject.name.includes("metrics on") || !(scrapeEveryMs > 0)) return undefined;
        const timer = setInterval(() => {
          scrapes += 1;
          void scrape().catch(() => undefined);
        }, scrapeEveryMs);
        return () => {
          clearInterval(timer);
          return "";
        };
      };

      const idle = () => sleep(250);
      const keysMe = await alternatingRounds(
        settings,
        [
          { name: "GET /keys/me, metrics off", url: `${offUrl}/keys/me`, idle },
          { name: "GET /keys/me, metrics on", url: `${onUrl}/keys/me`, idle },
        ],
        { headers: { "x-api-key": key }, expectStatus: 200 },
        scrapeWhileLoaded,
      );
      const tasks = await alternatingRounds(
        settings,
        [
          { name: "POST /tasks, metrics off", url: `${offUrl}/tasks`, idle },
          { name: "POST /tasks, metrics on", url: `${onUrl}/tasks`, idle },
        ],
        {
          method: "POST",
          headers: { "x-api-key": key, "content-type": "application/json" },
          body: JSON.stringify(body),
          expectStatus: 201,
        },
        scrapeWhileLoaded,
      );
      const text = await scrape();
      const counted =
        /foreman_http_requests_total\{method="GET",route="\/keys\/me",status="200"\} (\d+)/.exec(
          text,
        );
      if (!counted || Number(counted[1]) < 1000)
        throw new BenchError("the metrics-on service did not count its GET /keys/me requests");

      return {
        subjects: [...keysMe, ...tasks],
        checks: [
          ratioCheck("GET /keys/me on/off throughput", keysMe[0]!, keysMe[1]!),
          ratioCheck("POST /tasks on/off throughput", tasks[0]!, tasks[1]!),
        ],
        info: {
          engine,
          scrapes,
          scrapeEveryMs,
          connections: settings.connections,
          durationS: settings.durationS,
          warmupS: settings.warmupS,
          rounds: settings.rounds,
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
