import type Router from "@koa/router";
import type { GithubClient } from "../github-api/client.js";
import type { ModelClient } from "../llm/provider.js";
import type { Context } from "koa";
import type { Config } from "../config/env.js";
import type { Database } from "../db/connection.js";
import type { Models } from "../db/models.js";
import type { AccountViewCache } from "../domain/account-views.js";
import type { CronJobs } from "../domain/automations.js";
import type { Principal } from "../domain/keys.js";
import type { TaskDeps } from "../domain/tasks.js";
import type { Logger } from "../util/logger.js";
import type { RateLimiterAbstract } from "rate-limiter-flexible";
import type { GithubReceiver } from "../github-api/receiver.js";

export type { GithubReceiver };

/** What the HTTP door needs from the rest of the process. */
export interface HttpDeps {
  config: Config;
  db: Database;
  models: Models;
  logger: Logger;
  limiters: RateLimiters;
  accountViews?: AccountViewCache | undefined;
  /** Task operations (creation, gates, cancel); the pipeline's side of them. */
  tasks?: TaskDeps | undefined;
  /** Slack's door (integrations/slack.ts), composed by service.ts. */
  slack?: VendorDoor | undefined;
  /** Linear's and Jira's webhooks (integrations/linear.ts, jira.ts), composed by service.ts. */
  trackers?: Partial<Record<"linear" | "jira", TrackerDoor>> | undefined;
  /** Pages another door mounts on this server (github/manifest.ts before an App exists). */
  mountPages?: ((router: Router) => void) | undefined;
  /** Handles a GitHub webhook delivery; absent when the GitHub App part is off. */
  github?: GithubReceiver | undefined;
  /** Installation clients of the GitHub App; absent when the App is not configured. */
  githubClient?: GithubClient | undefined;
  /** The configured model (possibly the "missing" client that explains what to set). */
  modelClient?: ModelClient | undefined;
  /** Arms and disarms the Agenda jobs of cron automations (jobs/cron.ts). */
  cron?: CronJobs | undefined;
  /** Queues health scans (jobs/health-scan.ts). */
  healthScans?:
    | {
        enqueue(reportId: string): Promise<void>;
        /** 503 `insufficient_storage` while DATA_DIR is nearly full (domain/storage.ts). */
        checkStorage?: (() => Promise<void>) | undefined;
      }
    | undefined;
}

/** A vendor's signed door (Slack): checks the request's signature itself, takes no key. */
export interface VendorDoor {
  endpoints: readonly string[];
  handle(
    integrationId: string,
    endpoint: string,
    request: { rawBody: string; signature: string; timestamp: string; contentType: string },
  ): Promise<{ status: number; body: unknown }>;
  /** The app's own URLs (no integration id): signed with the app's secret, routed by team. */
  handleApp(
    endpoint: string,
    request: { rawBody: string; signature: string; timestamp: string; contentType: string },
  ): Promise<{ status: number; body: unknown }>;
}

/** An issue tracker's signed webhook (Linear, Jira): checks its own signature, takes no key. */
export interface TrackerDoor {
  handle(
    integrationId: string,
    request: { rawBody: string; signature: string; delivery: string },
  ): Promise<{ status: number; body: unknown }>;
}

export interface AppState {
  principal?: Principal;
  rawBody?: string;
  body?: unknown;
  requestId: string;
}

export type AppContext = Context & { state: AppState };

/** One named limit (http/rate-limit.ts): the name appears in the RateLimit headers. */
export interface NamedLimiter {
  name: string;
  points: number;
  windowS: number;
  limiter: RateLimiterAbstract;
}

export interface RateLimiters {
  signup: NamedLimiter;
  incomingWebhook: NamedLimiter;
}
