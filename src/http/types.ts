import type Router from "@koa/router";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { GithubClient } from "../github-api/client.js";
import type { ModelClient } from "../llm/provider.js";
import type { Context } from "koa";
import type { Config } from "../config/env.js";
import type { Database } from "../db/connection.js";
import type { Models } from "../db/models.js";
import type { AccountViewCache } from "../domain/accounts/views.js";
import type { CronJobs } from "../domain/automations/automations.js";
import type { HealthScans } from "../domain/health/reports.js";
import type { Principal } from "../domain/accounts/keys.js";
import type { TaskDeps } from "../domain/tasks/model.js";
import type { VendorEndpoint, VendorInstalls } from "../domain/integrations/endpoint.js";
import type { Logger } from "../util/logger.js";
import type { RateLimiterAbstract } from "rate-limiter-flexible";
import type { GithubReceiver } from "../github-api/receiver.js";

export type { GithubReceiver };

/**
 * What the HTTP door needs from the rest of the process: built once by the web role
 * (service.ts) from the service's context (src/context.ts) and frozen. Every member is
 * there; a part that is off is an implementation that says so (`noGithubApp`, `noPages`).
 */
export interface HttpDeps {
  readonly config: Config;
  readonly db: Database;
  readonly models: Models;
  readonly logger: Logger;
  readonly limiters: RateLimiters;
  readonly accountViews: AccountViewCache;
  /** Task operations (creation, gates, cancel); the pipeline's side of them. */
  readonly tasks: TaskDeps;
  /**
   * The vendors' signed endpoints (integrations/registry.ts, bound by src/context.ts):
   * mounted and documented in a loop, no vendor named here.
   */
  readonly vendorRoutes: readonly VendorEndpoint[];
  /** The vendors' OAuth install flows, by type (integrations/registry.ts, via src/context.ts). */
  readonly vendorInstalls: VendorInstalls;
  /** Pages another door mounts on this server (github/manifest.ts before an App exists). */
  mountPages(router: Router): void;
  /** Handles a GitHub webhook delivery (`noGithubApp` when the App is not configured: 404). */
  readonly github: GithubReceiver;
  /** Installation clients of the GitHub App (`noGithubClient` when it is not configured). */
  readonly githubClient: GithubClient;
  /** The configured model (possibly the "missing" client that explains what to set). */
  readonly modelClient: ModelClient;
  /** Arms and disarms the Agenda jobs of cron automations (jobs/cron.ts). */
  readonly cron: CronJobs;
  /** Queues health scans (jobs/health-scan.ts). */
  readonly healthScans: HealthScans;
  /** The MCP door (mcp/door.ts, built by service.ts), answered at /mcp on this server. */
  readonly mcp: NodeDoor;
}

/** A door that answers node:http requests itself (the MCP transport writes its own SSE). */
export interface NodeDoor {
  handle(req: IncomingMessage, res: ServerResponse): Promise<void>;
}

/** The `mountPages` of a server with no pages of another door: nothing to mount. */
export function noPages(): void {}

export interface AppState {
  principal?: Principal;
  rawBody?: string;
  body?: unknown;
  requestId: string;
  /** When the handler deadline answers 503 (epoch ms; http/middleware/deadline.ts). */
  deadline?: number;
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
