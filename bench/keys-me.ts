/*
 * GET /keys/me against a bare Koa handler doing one indexed lookup on the same database.
 *
 * One embedded database (FerretDB where it can be built, as in development), the real
 * service in-process, and a bare Koa app in the same process on the same database. Both
 * servers share this process's event loop, so they are never loaded at the same time:
 * each is warmed up, then measured in alternating rounds (bare, service, bare, service…),
 * and the median of the rounds is reported. The load generator runs in a worker thread.
 *
 * BENCH_KEYS_ME_PROFILE=1 also measures the bare handler with 2 and 3 sequential lookups
 * (key, account, quota-slot probe: the round-trips GET /keys/me makes), which tells apart
 * database round-trips from HTTP-stack overhead.
 */
import Koa from "koa";
import type mongoose from "mongoose";
import { Schema } from "mongoose";
import os from "node:os";
import { sha256 } from "../src/util/ids.js";
import {
  activeCleanups,
  BenchError,
  alternatingRounds,
  Cleanup,
  throughputRatio,
  type Benchmark,
  type BenchReport,
  type BenchSettings,
  type LoadSubject,
} from "./lib/harness.js";
import { serveBare, type BareServer } from "./lib/bare-server.js";
import { openBareConnection, startBenchStack } from "./lib/stack.js";

/** The service must reach at least this share of the bare handler's throughput. */
export const TARGET_RATIO = 0.7;

const DATABASE = "bench_service";

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A bare Koa app: one handler, `lookups` sequential `_id` lookups, a small JSON body. */
export async function startBareServer(
  connection: mongoose.Connection,
  lookups: 1 | 2 | 3,
): Promise<BareServer> {
  const ApiKey = connection.models.BareApiKey!;
  const Account = connection.models.BareAccount!;
  const QuotaSlot = connection.models.BareQuotaSlot!;
  const app = new Koa();
  app.use((ctx) => handle(ctx));
  async function handle(ctx: Koa.Context): Promise<void> {
    const value = ctx.get("x-api-key");
    const key = await ApiKey.findById(sha256(value), { key_id: 1, account_id: 1, name: 1 })
      .lean<{ key_id: string; account_id: string; name: string } | null>()
      .exec();
    if (!key) {
      ctx.status = 401;
      ctx.body = { error: "unauthorized" };
      return;
    }
    let tier: string | undefined;
    if (lookups >= 2) {
      const account = await Account.findById(key.account_id, { tier: 1, usage: 1 })
        .lean<{ tier: string } | null>()
        .exec();
      tier = account?.tier;
    }
    if (lookups >= 3) {
      const month = new Date().toISOString().slice(0, 7);
      await QuotaSlot.exists({ _id: `${key.account_id}:${month}:000000001` });
    }
    ctx.body = { id: key.key_id, name: key.name, ...(tier ? { tier } : {}) };
  }
  return serveBare(app.callback(), "/keys/me");
}

export function registerBareModels(connection: mongoose.Connection): void {
  const options = { strict: false, versionKey: false } as const;
  connection.model(
    "BareApiKey",
    new Schema({ _id: String, key_id: String, account_id: String, name: String }, options),
    "api_keys",
  );
  connection.model("BareAccount", new Schema({ _id: String, tier: String }, options), "accounts");
  connection.model("BareQuotaSlot", new Schema({ _id: String }, options), "quota_slots");
}

/** One request, checked: both servers must answer 200 with a body before any load. */
async function probe(url: string, key: string): Promise<unknown> {
  const res = await fetch(url, { headers: { "x-api-key": key } });
  const text = await res.text();
  if (res.status !== 200) throw new BenchError(`GET ${url} answered ${res.status}: ${text}`);
  return JSON.parse(text) as unknown;
}

export const keysMe: Benchmark = {
  name: "keys-me",
  description: "GET /keys/me vs a bare Koa handler doing one _id lookup on the same database",
  async run(settings: BenchSettings): Promise<BenchReport> {
    const profile = ["1", "true", "yes"].includes(
      (process.env.BENCH_KEYS_ME_PROFILE ?? "").toLowerCase(),
    );
    const cleanup = new Cleanup();
    activeCleanups.add(cleanup);
    try {
      const { uri, service, engine } = await startBenchStack(cleanup, DATABASE);
      const serviceUrl = service.http!.url;

      const res = await fetch(`${serviceUrl}/keys/generate`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ name: "bench" }),
      });
      const created = (await res.json()) as { key?: string };
      if (res.status !== 201 || !created.key) {
        throw new BenchError(
          `POST /keys/generate answered ${res.status}: ${JSON.stringify(created)}`,
        );
      }
      const key = created.key;

      // The bare side: its own mongoose connection (same pool size as the service) to the same database.
      const connection = await openBareConnection(cleanup, uri, 50);
      registerBareModels(connection);

      const subjects: LoadSubject[] = [];
      const lookups: Array<1 | 2 | 3> = profile ? [1, 2, 3] : [1];
      for (const n of lookups) {
        const bare = await startBareServer(connection, n);
        cleanup.defer(`close bare server (${n})`, () => bare.close());
        subjects.push({
          name: n === 1 ? "bare koa, 1 lookup" : `bare koa, ${n} lookups`,
          url: bare.url,
          idle: bare.idle,
        });
      }
      // The service's in-flight requests cannot be counted from outside: give them a moment.
      subjects.splice(1, 0, {
        name: "service GET /keys/me",
        url: `${serviceUrl}/keys/me`,
        idle: () => sleep(250),
      });

      for (const subject of subjects)
        console.log(`  ${subject.name}: ${JSON.stringify(await probe(subject.url, key))}`);

      const summaries = await alternatingRounds(settings, subjects, {
        headers: { "x-api-key": key },
        expectStatus: 200,
      });
      const { check, pairRatios } = throughputRatio(summaries[0]!, summaries[1]!, TARGET_RATIO);
      return {
        subjects: summaries,
        checks: [check],
        info: {
          engine,
          connections: settings.connections,
          durationS: settings.durationS,
          warmupS: settings.warmupS,
          rounds: settings.rounds,
          profile,
          pairRatios,
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
