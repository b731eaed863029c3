#!/usr/bin/env node
import { parseArgs } from "node:util";
import path from "node:path";
import dotenv from "dotenv";
import { ConfigError, loadConfig } from "../config/env.js";
import { startService, type Service } from "../service.js";
import { createLogger } from "../util/logger.js";
import { setTier } from "../domain/accounts/accounts.js";
import { createAccountWithKey } from "../domain/accounts/keys.js";
import { runBacktest } from "./index.js";

/*
 * `npm run backtest -- --repo <path|url> [--cases N] [--since DATE] [--until DATE]
 * [--cases-file F] [--out DIR] [--max-usd X] [--setup CMD]` (README "Backtest"). Runs the
 * cases on its own service instance (embedded database, data under DIR/service) against the
 * model the environment configures, unless BACKTEST_URL names a running service (then
 * BACKTEST_API_KEY is the key of the account to use).
 */

const USAGE =
  "usage: npm run backtest -- --repo <path|url> [--cases N] [--since DATE] [--until DATE] [--cases-file F] [--out DIR] [--max-usd X] [--setup CMD]";

const OPTIONS = {
  repo: { type: "string" },
  cases: { type: "string" },
  since: { type: "string" },
  until: { type: "string" },
  "cases-file": { type: "string" },
  out: { type: "string" },
  "max-usd": { type: "string" },
  setup: { type: "string" },
  help: { type: "boolean" },
} as const;

type Options = ReturnType<typeof parseArgs<{ options: typeof OPTIONS; strict: true }>>["values"];

/** The command line's options, or the exit code when there is nothing to run. */
function readOptions(): (Options & { repo: string }) | number {
  let values: Options;
  try {
    ({ values } = parseArgs({ options: OPTIONS, strict: true }));
  } catch (error) {
    console.error(`${(error as Error).message}\n${USAGE}`);
    return 2;
  }
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  if (!values.repo) {
    console.error(`--repo is required\n${USAGE}`);
    return 2;
  }
  return { ...values, repo: values.repo };
}

/** A numeric option's value (undefined when not given); a ConfigError when it is not one. */
function number(name: string, raw: string | undefined, integer: boolean): number | undefined {
  if (raw === undefined) return undefined;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < 0 || (integer && !Number.isInteger(n)))
    throw new ConfigError([`--${name} must be a ${integer ? "whole " : ""}number ≥ 0`]);
  return n;
}

async function main(): Promise<number> {
  const values = readOptions();
  if (typeof values === "number") return values;
  dotenv.config({ path: process.env.ENV_FILE || ".env", quiet: true });
  const out = path.resolve(values.out ?? `backtest-${new Date().toISOString().slice(0, 10)}`);
  let service: Service | undefined;
  let url = process.env.BACKTEST_URL;
  let key = process.env.BACKTEST_API_KEY;
  try {
    const cases = number("cases", values.cases, true);
    const maxUsd = number("max-usd", values["max-usd"], false);
    const config = loadConfig({
      ...process.env,
      // Its own instance: loopback, any free port, local clones allowed, data apart.
      ...(url
        ? {}
        : {
            PORT: "0",
            HOST: "127.0.0.1",
            ALLOW_LOCAL_REPOS: "true",
            OPEN_SIGNUP: "false",
            DATA_DIR: process.env.BACKTEST_DATA_DIR ?? path.join(out, "service"),
            LOG_LEVEL: process.env.LOG_LEVEL ?? "warn",
            // Nothing left mounted when the run ends: no copy is kept for a follow-up.
            FOLLOW_UP_KEEP_MIN: "0",
          }),
    });
    if (!url) {
      // Ctrl-C stops the service (and its embedded database) before leaving.
      for (const signal of ["SIGINT", "SIGTERM"] as const)
        process.once(signal, () => {
          console.error(`${signal}: stopping the service.`);
          void (service?.stop() ?? Promise.resolve()).finally(() => process.exit(130));
        });
      service = await startService({
        config,
        web: true,
        workers: true,
        logger: createLogger({ level: config.logLevel, format: config.logFormat }),
      });
      url = service.http!.url;
      // Its own account (as the operator CLI makes one), without the free tier's monthly
      // allowance: a run takes one task per case.
      const account = await createAccountWithKey(service.db.models, "backtest");
      await setTier(service.db.models, account.account_id, "pro");
      key = account.key;
      console.error(`Started a service at ${url} (data in ${config.dataDir}).`);
    } else if (!key) {
      console.error("BACKTEST_URL is set: BACKTEST_API_KEY must be the key of the account to use.");
      return 2;
    }
    const { report } = await runBacktest({
      repo: values.repo,
      out,
      cases,
      since: values.since,
      until: values.until,
      casesFile: values["cases-file"],
      maxUsd,
      settings: { timeoutMs: config.pipeline.commandTimeoutS * 1000, setup: values.setup },
      service: { url, key: key! },
      model: config.llm.model ?? "unknown",
      progress: (line) => console.error(line),
      githubApiUrl: process.env.BACKTEST_GITHUB_API_URL || undefined,
      githubToken: process.env.GITHUB_TOKEN || undefined,
    });
    process.stdout.write(
      `Resolved ${report.resolved}/${report.cases.filter((c) => c.status !== "not_run").length} (${(report.rate * 100).toFixed(1)}%, 95% CI ${(report.wilson_low * 100).toFixed(1)}–${(report.wilson_high * 100).toFixed(1)}%), $${report.usd.toFixed(4)}; ${path.join(out, "report.md")}\n`,
    );
    return 0;
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(error.message);
      return 2;
    }
    console.error(`backtest failed: ${(error as Error).message}`);
    return 1;
  } finally {
    await service?.stop();
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
