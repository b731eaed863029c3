import { getPrivateKey } from "@probot/get-private-key";
import { createPrivateKey } from "node:crypto";
import { readFileSync } from "node:fs";
import path from "node:path";
import ipaddr from "ipaddr.js";
import { z } from "zod";
import { registerSecret } from "../util/redact.js";
import { DEFAULT_SETUP_ALLOW, parseAllowList } from "../sandbox/setup-proxy.js";
import { parseAddressRanges } from "../sandbox/setup-proxy-guard.js";

/**
 * Boolean environment flags accept the usual spellings; anything else is an error. An
 * `undefined` fallback leaves an unset flag undefined (its default depends on other settings).
 */
const flag = <T extends boolean | undefined>(fallback: T) =>
  z
    .string()
    .trim()
    .toLowerCase()
    .optional()
    .transform((v, ctx): boolean | T => {
      if (v === undefined || v === "") return fallback;
      if (["1", "true", "yes", "on"].includes(v)) return true;
      if (["0", "false", "no", "off"].includes(v)) return false;
      ctx.addIssue({ code: "custom", message: `expected true or false, got "${v}"` });
      return z.NEVER;
    });

const positiveInt = (fallback: number, max = 1_000_000) =>
  z.coerce.number().int().min(1).max(max).default(fallback);

const optionalString = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === "" ? undefined : v));

const url = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === "" ? undefined : v.trim()))
  .pipe(z.url({ message: "must be an absolute URL" }).optional());

/**
 * Every environment variable the service reads. Names are kept exactly (README.md,
 * "Configuration").
 */
export const envSchema = z.object({
  NODE_ENV: z.enum(["development", "production", "test"]).default("development"),
  PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  HOST: z.string().min(1).default("127.0.0.1"),
  MONGODB_URI: optionalString,
  DATA_DIR: z.string().min(1).default("./.data"),
  DB_ENGINE: z.enum(["auto", "ferretdb", "mongodb-memory-server"]).default("auto"),
  RUN_WORKERS: flag(true),
  /** Unset: on only while HOST is a loopback address (openSignup below). */
  OPEN_SIGNUP: flag(undefined),
  SIGNUP_RATE_LIMIT: positiveInt(10),
  SIGNUP_RATE_WINDOW_S: positiveInt(3600),
  AUTOMATION_WEBHOOK_RATE_LIMIT: positiveInt(120),
  AUTOMATION_WEBHOOK_RATE_WINDOW_S: positiveInt(60, 86_400),
  /** Slack's Web API base: https://slack.com/api/ (GovSlack and tests point elsewhere). */
  SLACK_API_URL: url,
  /** The Slack app's OAuth credentials: installing it through Slack (integrations/slack-install). */
  SLACK_CLIENT_ID: optionalString,
  SLACK_CLIENT_SECRET: optionalString,
  /** The Slack app's signing secret: requests to its own URLs (/integrations/slack/<endpoint>). */
  SLACK_SIGNING_SECRET: optionalString,
  /** Linear's GraphQL endpoint: https://api.linear.app/graphql (tests point elsewhere). */
  LINEAR_API_URL: url,
  ALLOW_LOCAL_REPOS: flag(false),
  /**
   * MCP servers over HTTP a task may use (tools/mcp-tools.ts): comma-separated URLs; a
   * server's URL matches one with the same origin and a path at or below its path.
   */
  MCP_ALLOWED_URLS: z
    .string()
    .default("")
    .transform((value, ctx) => {
      const urls = value
        .split(",")
        .map((u) => u.trim())
        .filter(Boolean);
      for (const u of urls)
        if (!URL.canParse(u) || !/^https?:$/.test(new URL(u).protocol))
          ctx.addIssue({ code: "custom", message: `not an http(s) URL: ${u}` });
      return urls;
    }),
  HTTP_REQUEST_TIMEOUT_S: positiveInt(30, 3600),
  HTTP_HANDLER_TIMEOUT_S: positiveInt(30, 3600),
  /** Proxy hops in front of the service: `false`/0 none, `true` one, or a count. */
  TRUST_PROXY: z
    .string()
    .trim()
    .toLowerCase()
    .optional()
    .transform((v, ctx) => {
      if (v === undefined || v === "" || ["0", "false", "no", "off"].includes(v)) return 0;
      if (["true", "yes", "on"].includes(v)) return 1;
      if (/^[1-9][0-9]?$/.test(v)) return Number(v);
      ctx.addIssue({ code: "custom", message: `expected true, false or a hop count, got "${v}"` });
      return z.NEVER;
    }),
  LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),

  LLM_PROVIDER: z.enum(["anthropic", "openai", "openai-compatible"]).optional(),
  LLM_BASE_URL: url,
  LLM_API_KEY: optionalString,
  ANTHROPIC_API_KEY: optionalString,
  OPENAI_API_KEY: optionalString,
  LLM_MODEL: optionalString,
  MAX_TASK_COST_USD: z.coerce.number().positive().default(5),
  LLM_STREAM: flag(true),
  LLM_TIMEOUT_S: positiveInt(300, 3600),
  LLM_MAX_RETRIES: z.coerce.number().int().min(0).max(10).default(2),
  LLM_PRICE_INPUT_PER_MTOK: z.coerce.number().min(0).optional(),
  LLM_PRICE_OUTPUT_PER_MTOK: z.coerce.number().min(0).optional(),
  LLM_CONTEXT_TOKENS: z.coerce.number().int().min(4096).max(10_000_000).optional(),
  PLAN_MAX_STEPS: positiveInt(30, 500),
  AGENT_MAX_STEPS: positiveInt(60, 1000),
  REVIEW_MAX_STEPS: positiveInt(20, 500),

  APP_ID: optionalString,
  PRIVATE_KEY: optionalString,
  PRIVATE_KEY_PATH: optionalString,
  WEBHOOK_SECRET: optionalString,
  WEBHOOK_PATH: z.string().startsWith("/").default("/github/webhooks"),
  GHE_HOST: optionalString,
  GHE_PROTOCOL: z.enum(["http", "https"]).default("https"),
  GITHUB_CLIENT_ID: optionalString,
  GITHUB_CLIENT_SECRET: optionalString,
  APP_SLUG: optionalString,
  AGENT_LABEL: z.string().trim().min(1).max(50).default("agent"),
  // A check run per GitHub task showing its phase (src/github/progress.ts).
  GITHUB_PROGRESS: flag(true),

  PARALLEL_THRESHOLD: positiveInt(6, 1000),
  MAX_PARALLEL_WORKERS: positiveInt(3, 64),
  MAX_FIX_ATTEMPTS: positiveInt(3, 50),
  // Revisions (feedback at a gate) one task may take (docs/api.md, "Revisions").
  MAX_REVISIONS: positiveInt(5, 100),
  // A finished task's working copy kept for a follow-up of it (docs/operations.md, "Kept
  // working copies"): minutes (0: never kept), and how many one DATA_DIR keeps at most.
  FOLLOW_UP_KEEP_MIN: z.coerce.number().int().min(0).max(10_080).default(60),
  FOLLOW_UP_KEEP_MAX: z.coerce.number().int().min(0).max(1000).default(4),
  TASK_CONCURRENCY: positiveInt(4, 256),
  COMMAND_TIMEOUT_S: positiveInt(600, 86_400),
  // The wall time all sandboxed commands of one task may take together (sandbox/command-time.ts):
  // setup, checks, the model's commands and the base commit's checks, counted as they run.
  TASK_COMMAND_TIME_LIMIT_S: positiveInt(3600, 604_800),
  JOB_LOCK_LIFETIME_S: positiveInt(120, 86_400),
  SHUTDOWN_GRACE_S: positiveInt(30, 3600),
  ACCOUNT_VIEW_POLL_MS: positiveInt(500, 60_000),
  EVENT_POLL_MS: positiveInt(200, 60_000),
  WS_BUFFER_BUDGET_KB: positiveInt(65_536, 4_194_304),
  // What one key and one account may hold open at once per process (util/concurrency-bounds.ts,
  // docs/operations.md "Bounds per key and account"), and the keys an account may have.
  MCP_WAITS_PER_KEY: positiveInt(20, 100_000),
  MCP_WAITS_PER_ACCOUNT: positiveInt(50, 100_000),
  MCP_REQUESTS_PER_KEY: positiveInt(64, 100_000),
  MCP_REQUESTS_PER_ACCOUNT: positiveInt(200, 100_000),
  MCP_SESSIONS_PER_KEY: positiveInt(20, 100_000),
  MCP_SESSIONS_PER_ACCOUNT: positiveInt(100, 100_000),
  MCP_MAX_SESSIONS: positiveInt(2000, 1_000_000),
  WS_STREAMS_PER_KEY: positiveInt(50, 100_000),
  WS_STREAMS_PER_ACCOUNT: positiveInt(200, 100_000),
  KEYS_PER_ACCOUNT: positiveInt(20, 100_000),
  TASK_POLL_MS: positiveInt(1000, 60_000),
  STAGE_MAX_ATTEMPTS: positiveInt(3, 20),
  // How often the task sweep looks for running tasks no job moves (src/pipeline/sweeper.ts).
  TASK_SWEEP_INTERVAL_S: positiveInt(60, 86_400),

  HEALTH_SCAN_TIMEOUT_S: positiveInt(1800, 86_400),
  HEALTH_COVERAGE_TIMEOUT_S: positiveInt(600, 86_400),
  HEALTH_SCAN_CONCURRENCY: positiveInt(1, 64),
  HEALTH_REGISTRY_TIMEOUT_S: positiveInt(10, 600),
  HEALTH_REGISTRY_MAX_REQUESTS: positiveInt(300, 100_000),
  NPM_REGISTRY_URL: url.default("https://registry.npmjs.org"),
  PYPI_URL: url.default("https://pypi.org"),
  GOPROXY_URL: url.default("https://proxy.golang.org"),
  OSV_URL: url.default("https://api.osv.dev"),

  // What repository commands run in (sandbox/run.ts, README "Sandbox").
  SANDBOX: z.enum(["bwrap", "none"]).default("bwrap"),
  // none: own loopback only; public: public hosts only, never the host or private ranges.
  SANDBOX_NETWORK: z.enum(["none", "public"]).default("none"),
  SANDBOX_MEMORY_MB: positiveInt(4096, 1_048_576),
  SANDBOX_MAX_PROCS: positiveInt(1024, 1_000_000),
  SANDBOX_MAX_FILE_MB: positiveInt(1024, 1_048_576),
  // Disk a task's (or scan's) working copy, temporary files and package cache may take while
  // its commands run (sandbox/disk.ts); 0: not watched.
  TASK_DISK_LIMIT_MB: z.coerce.number().int().min(0).max(16_777_216).default(2048),
  // auto: each working copy on a loop-mounted volume of TASK_DISK_LIMIT_MB where the host
  // allows it (root, loop devices), so the kernel enforces the budget; off: the watcher only.
  TASK_DISK_VOLUMES: z.enum(["auto", "off"]).default("auto"),
  // Package caches (per account and repository) unused this long are removed.
  SANDBOX_CACHE_MAX_AGE_DAYS: positiveInt(14, 3650),
  // The setup step's allowlist (verify/setup.ts, sandbox/setup-proxy.ts): comma-separated hosts
  // (`*.domain`, `host:port`); set but empty: the setup step gets SANDBOX_NETWORK's network.
  SANDBOX_SETUP_ALLOW: z
    .string()
    .optional()
    .transform((v, ctx) => {
      const entries = (v ?? DEFAULT_SETUP_ALLOW.join(","))
        .split(",")
        .map((e) => e.trim())
        .filter((e) => e !== "");
      try {
        parseAllowList(entries);
      } catch (error) {
        ctx.addIssue({ code: "custom", message: (error as Error).message });
        return z.NEVER;
      }
      return entries.map((e) => e.toLowerCase());
    }),
  // Address ranges (CIDR) the setup step may reach though not public: loopback, private and
  // link-local addresses are refused otherwise, whatever name led there (setup-proxy-guard.ts).
  SANDBOX_SETUP_ALLOW_ADDRESSES: z
    .string()
    .optional()
    .transform((v, ctx) => {
      const entries = (v ?? "")
        .split(",")
        .map((e) => e.trim())
        .filter((e) => e !== "");
      try {
        parseAddressRanges(entries);
      } catch (error) {
        ctx.addIssue({ code: "custom", message: (error as Error).message });
        return z.NEVER;
      }
      return entries;
    }),
  // The Python package index of the setup step's pip (its PIP_INDEX_URL; ecosystems/python.ts):
  // a private index or mirror, whose host must be on SANDBOX_SETUP_ALLOW. Unset: pip's (PyPI).
  PIP_INDEX_URL: url,
  // What all package cache entries together may take (sandbox/cache.ts).
  SANDBOX_CACHE_MAX_MB: positiveInt(10_240, 16_777_216),
  // How often a long sandboxed command logs "still running …" on its task.
  SANDBOX_HEARTBEAT_S: positiveInt(10, 3600),
  // Free space under DATA_DIR below which new tasks and scans are refused (503); 0: never.
  DATA_DIR_MIN_FREE_MB: z.coerce.number().int().min(0).max(16_777_216).default(1024),
  // GET /metrics (src/metrics/): who may read it; see metricsExposure() below.
  METRICS: z.enum(["auto", "off", "public", "token"]).default("auto"),
  METRICS_TOKEN: optionalString.pipe(
    z.string().min(16, { message: "must be at least 16 characters" }).optional(),
  ),
  METRICS_PORT: z.coerce.number().int().min(0).max(65535).optional(),
  METRICS_HOST: z.string().min(1).default("127.0.0.1"),
  METRICS_DB_READ_S: z.coerce.number().int().min(0).max(3600).default(5),
  // auto: readable lines on a terminal, JSON lines otherwise (util/logger.ts).
  LOG_FORMAT: z.enum(["auto", "json", "pretty"]).default("auto"),
  // Registering the GitHub App from app.yml (src/github/manifest.ts) while APP_ID is unset.
  PUBLIC_URL: url,
  GH_ORG: optionalString,
  ENV_FILE: z.string().min(1).default(".env"),
  // How long a task's model transcript (GET /tasks/{id}/trajectory) is kept after it ends.
  TRAJECTORY_RETENTION_DAYS: positiveInt(30, 3650),
});

export type Env = z.infer<typeof envSchema>;

export type LlmProvider = "anthropic" | "openai" | "openai-compatible";

export interface GithubAppConfig {
  appId: string;
  privateKey: string;
  webhookSecret: string;
  webhookPath: string;
  /** API base URL: https://api.github.com or the GHES `/api/v3` endpoint. */
  baseUrl: string;
  /** Web base URL for OAuth and installation pages. */
  webUrl: string;
  clientId: string | undefined;
  clientSecret: string | undefined;
  slug: string | undefined;
  /** The issue label that turns an issue into a task. */
  agentLabel: string;
  /** Show a task's phase as a check run on its commit (GITHUB_PROGRESS). */
  progress: boolean;
}

export interface Config {
  env: Env["NODE_ENV"];
  port: number;
  host: string;
  mongodbUri: string | undefined;
  dataDir: string;
  dbEngine: Env["DB_ENGINE"];
  runWorkers: boolean;
  /** POST /keys/generate without a key makes an account (OPEN_SIGNUP, else by HOST). */
  openSignup: boolean;
  /** Why openSignup is what it is, for the start log and GET /status. */
  openSignupWhy: string;
  signupRateLimit: { max: number; windowMs: number };
  /** Deliveries to POST /automations/webhook per client address per window, per process. */
  automationWebhookRateLimit: { max: number; windowMs: number };
  slackApiUrl: string | undefined;
  /**
   * The Slack app's OAuth client (SLACK_CLIENT_ID, SLACK_CLIENT_SECRET): installing it into a
   * Slack workspace for an integration. Its redirect URL is PUBLIC_URL +
   * /integrations/slack/oauth/callback.
   */
  slackOAuth: {
    clientId: string | undefined;
    clientSecret: string | undefined;
    /** Checks requests to the app's own URLs, routed by the team they come from. */
    signingSecret: string | undefined;
  };
  linearApiUrl: string | undefined;
  /** Plain-git remotes may be local paths, file:// or non-public hosts (development, tests). */
  allowLocalRepos: boolean;
  /** MCP_ALLOWED_URLS: the HTTP MCP servers tasks may use (tools/mcp-tools.ts). */
  mcpAllowedUrls: string[];
  /** Time a client has to send a whole request (headers and body), then 408 and close. */
  httpRequestTimeoutMs: number;
  /** The time the service has to answer a request once it has it (HTTP_HANDLER_TIMEOUT_S). */
  httpHandlerTimeoutMs: number;
  /**
   * Reverse-proxy hops trusted for `X-Forwarded-For`: the client address is the entry this
   * many places from the right (as Express's `trust proxy` with a number); 0 ignores the header.
   */
  trustProxy: number;
  logLevel: Env["LOG_LEVEL"];
  /** TRAJECTORY_RETENTION_DAYS: model transcripts of tasks that ended earlier are pruned. */
  trajectoryRetentionDays: number;
  llm: {
    provider: LlmProvider | undefined;
    baseUrl: string | undefined;
    apiKey: string | undefined;
    model: string | undefined;
    maxTaskCostUsd: number;
    stream: boolean;
    timeoutMs: number;
    maxRetries: number;
    /** Operator-set price, for models the built-in table does not know. */
    prices: { inputPerMTok: number; outputPerMTok: number } | undefined;
    /** The model's context window in tokens (LLM_CONTEXT_TOKENS); unset: the built-in table. */
    contextTokens: number | undefined;
    planMaxSteps: number;
    /** Model calls one implementing or fixing agent may take. */
    agentMaxSteps: number;
    reviewMaxSteps: number;
  };
  github: GithubAppConfig | undefined;
  pipeline: {
    parallelThreshold: number;
    maxParallelWorkers: number;
    maxFixAttempts: number;
    /** Revisions (feedback at a gate) one task may take. */
    maxRevisions: number;
    /** How long a finished task's working copy is kept for a follow-up (0: not kept). */
    followUpKeepMs: number;
    /** Kept working copies one DATA_DIR holds at most (the oldest goes first). */
    followUpKeepMax: number;
    taskConcurrency: number;
    commandTimeoutS: number;
    /** TASK_COMMAND_TIME_LIMIT_S: all sandboxed commands of one task together. */
    commandTimeLimitS: number;
    /** How often each worker looks for queued tasks made by other processes. */
    taskPollMs: number;
    /** Runs of one stage (a worker stopping mid-stage counts) before the task fails. */
    stageMaxAttempts: number;
    /** How often the task sweep runs (once per interval across all workers). */
    sweepIntervalMs: number;
  };
  /**
   * Health scans (docs/api.md, "Health reports and analytics"): time budgets and the
   * registries asked.
   */
  health: {
    scanTimeoutMs: number;
    coverageTimeoutMs: number;
    concurrency: number;
    registry: {
      npmUrl: string;
      pypiUrl: string;
      /** The Go module proxy; the first entry of a GOPROXY-style list. */
      goproxyUrl: string;
      osvUrl: string;
      timeoutMs: number;
      maxRequests: number;
      concurrency: number;
    };
  };
  jobs: {
    lockLifetimeMs: number;
    shutdownGraceMs: number;
  };
  /** How repository commands are contained (sandbox/run.ts). */
  sandbox: {
    engine: "bwrap" | "none";
    /** `none`: no network; `public`: public hosts only (sandbox/network.ts). */
    network: "none" | "public";
    memoryMb: number;
    maxProcs: number;
    maxFileMb: number;
    /** TASK_DISK_LIMIT_MB; 0: not watched. */
    diskLimitMb: number;
    /** TASK_DISK_VOLUMES: working copies on volumes of that size where possible. */
    diskVolumes: "auto" | "off";
    /** SANDBOX_CACHE_MAX_AGE_DAYS: unused package caches are removed after this. */
    cacheMaxAgeDays: number;
    /** SANDBOX_CACHE_MAX_MB: what all package cache entries together may take. */
    cacheMaxMb: number;
    /** SANDBOX_SETUP_ALLOW: the hosts the setup step may reach (empty: SANDBOX_NETWORK's). */
    setupAllow: string[];
    /** SANDBOX_SETUP_ALLOW_ADDRESSES: non-public ranges the setup step may reach anyway. */
    setupAllowAddresses: string[];
    /** PIP_INDEX_URL: the setup step's Python package index; null: pip's default (PyPI). */
    pipIndexUrl: string | null;
    /** SANDBOX_HEARTBEAT_S in ms: "still running …" lines of long commands. */
    heartbeatMs: number;
  };
  /**
   * DATA_DIR_MIN_FREE_MB: below this much free space under DATA_DIR, task and scan creation
   * answer 503 `insufficient_storage` (domain/storage.ts); 0: never.
   */
  dataDirMinFreeMb: number;
  /** Prometheus metrics: recorded when `enabled`; read on the public port and/or a port of their own. */
  metrics: {
    enabled: boolean;
    /** GET /metrics on the API port: absent (404), behind the Bearer token, or open. */
    publicPort: "absent" | "token" | "open";
    token: string | undefined;
    /** A separate listener serving only /metrics (the token applies there too when set). */
    port: number | undefined;
    host: string;
    /** Tasks and job-queue gauges are read from the database at most this often. */
    dbReadEveryMs: number;
  };
  logFormat: "auto" | "json" | "pretty";
  /** The App registration flow (used while APP_ID is unset): where GitHub and this service are. */
  manifest: {
    /** The service's public base URL; the request's origin when unset. */
    publicUrl: string | undefined;
    /** Register the App under this organization instead of the user. */
    org: string | undefined;
    webUrl: string;
    apiUrl: string;
    webhookPath: string;
    /** ENV_FILE: the dotenv file read at start and written by the registration. */
    envFile: string;
  };
  /** How often each API process looks for task events written by other processes. */
  eventPollMs: number;
  /** Bytes all WebSocket streams of a process may hold unsent, together. */
  wsBufferBudgetBytes: number;
  /** What one key / account may hold open at once in this process (docs/operations.md). */
  bounds: {
    mcpWaits: { perKey: number; perAccount: number };
    mcpRequests: { perKey: number; perAccount: number };
    mcpSessions: { perKey: number; perAccount: number; total: number };
    wsStreams: { perKey: number; perAccount: number };
  };
  /** Unrevoked keys one account may have (POST /keys/generate answers 409 past it). */
  keysPerAccount: number;
  /** How often each API process checks for tier/usage changes made by other processes. */
  accountViewPollMs: number;
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
    this.name = "ConfigError";
  }
}

/**
 * True when `host` (HOST) is a loopback address or `localhost`: only this machine can reach
 * the service. `0.0.0.0`, `::`, other addresses and other names count as reachable.
 */
export function isLoopbackHost(host: string): boolean {
  const bare = host.trim().replace(/^\[|\]$/g, "");
  if (/^localhost\.?$/i.test(bare)) return true;
  if (!ipaddr.isValid(bare)) return false;
  const address = ipaddr.process(bare); // ::ffff:127.0.0.1 is 127.0.0.1
  return address.range() === "loopback";
}

/**
 * Whether anyone who reaches the service may make an account: OPEN_SIGNUP when set; unset,
 * only while the service listens on loopback (a service reachable from the network would
 * hand accounts, and the sandbox's compute, to anyone there).
 */
export function openSignup(env: {
  OPEN_SIGNUP?: boolean | string | undefined;
  HOST?: string | undefined;
}): { open: boolean; why: string } {
  const setting = env.OPEN_SIGNUP;
  const explicit = typeof setting === "boolean" ? setting : flag(undefined).safeParse(setting).data;
  if (explicit !== undefined) return { open: explicit, why: `OPEN_SIGNUP=${explicit}` };
  // The address itself stays out: GET /status shows this to every account.
  return isLoopbackHost(env.HOST?.trim() || "127.0.0.1")
    ? { open: true, why: "OPEN_SIGNUP unset and HOST is a loopback address" }
    : { open: false, why: "OPEN_SIGNUP unset and HOST is not a loopback address" };
}

function inferProvider(env: Env): LlmProvider | undefined {
  if (env.LLM_PROVIDER) return env.LLM_PROVIDER;
  if (env.LLM_BASE_URL) return "openai-compatible";
  if (env.ANTHROPIC_API_KEY) return "anthropic";
  if (env.OPENAI_API_KEY) return "openai";
  if (env.LLM_API_KEY?.startsWith("sk-ant-")) return "anthropic";
  if (env.LLM_API_KEY?.startsWith("sk-")) return "openai";
  return undefined;
}

function providerKey(env: Env, provider: LlmProvider | undefined): string | undefined {
  if (env.LLM_API_KEY) return env.LLM_API_KEY;
  if (provider === "anthropic") return env.ANTHROPIC_API_KEY;
  if (provider === "openai") return env.OPENAI_API_KEY;
  return undefined;
}

/**
 * The rules between settings, checked on the raw values too (`data` is undefined when the
 * schema refused something), so the operator sees every problem at once.
 */
function crossFieldProblems(source: NodeJS.ProcessEnv, data: Env | undefined): string[] {
  const problems: string[] = [];
  const raw = (name: string) => (source[name] ?? "").trim();
  const providerRaw = raw("LLM_PROVIDER");
  if (providerRaw === "openai-compatible" && !raw("LLM_BASE_URL")) {
    problems.push("LLM_BASE_URL: required when LLM_PROVIDER is openai-compatible");
  }
  if (raw("LLM_PRICE_INPUT_PER_MTOK") !== "" && raw("LLM_PRICE_OUTPUT_PER_MTOK") === "") {
    problems.push("LLM_PRICE_OUTPUT_PER_MTOK: required when LLM_PRICE_INPUT_PER_MTOK is set");
  }
  if (raw("LLM_PRICE_OUTPUT_PER_MTOK") !== "" && raw("LLM_PRICE_INPUT_PER_MTOK") === "") {
    problems.push("LLM_PRICE_INPUT_PER_MTOK: required when LLM_PRICE_OUTPUT_PER_MTOK is set");
  }
  if (raw("APP_ID")) {
    if (!raw("PRIVATE_KEY") && !raw("PRIVATE_KEY_PATH")) {
      problems.push("PRIVATE_KEY or PRIVATE_KEY_PATH: required when APP_ID is set");
    }
    if (!raw("WEBHOOK_SECRET")) problems.push("WEBHOOK_SECRET: required when APP_ID is set");
  }
  if (raw("SANDBOX").toLowerCase() === "none" && openSignup(data ?? source).open) {
    problems.push(
      "SANDBOX: none runs every repository's code with the service's rights, so it is refused while OPEN_SIGNUP is on: install bubblewrap (apt-get install bubblewrap) and unset SANDBOX, or set OPEN_SIGNUP=false",
    );
  }
  if (data && data.MCP_SESSIONS_PER_ACCOUNT >= data.MCP_MAX_SESSIONS) {
    // One account alone must never fill the process's sessions (and so evict another's).
    problems.push("MCP_SESSIONS_PER_ACCOUNT: must be below MCP_MAX_SESSIONS");
  }
  if (raw("METRICS") === "token" && !raw("METRICS_TOKEN")) {
    problems.push("METRICS_TOKEN: required when METRICS is token");
  }
  return problems;
}

/** The GitHub App's settings (APP_ID is set); a key that cannot be read is a problem. */
function githubAppConfig(env: Env, appId: string, problems: string[]): GithubAppConfig {
  const privateKey = readPrivateKey(env, problems);
  const host = env.GHE_HOST;
  const baseUrl = host ? `${env.GHE_PROTOCOL}://${host}/api/v3` : "https://api.github.com";
  const webUrl = host ? `${env.GHE_PROTOCOL}://${host}` : "https://github.com";
  return {
    appId,
    privateKey: privateKey ?? "",
    webhookSecret: env.WEBHOOK_SECRET ?? "",
    webhookPath: env.WEBHOOK_PATH,
    baseUrl,
    webUrl,
    clientId: env.GITHUB_CLIENT_ID,
    clientSecret: env.GITHUB_CLIENT_SECRET,
    slug: env.APP_SLUG,
    agentLabel: env.AGENT_LABEL,
    progress: env.GITHUB_PROGRESS,
  };
}

/**
 * Parses and checks the environment once. Every problem is collected so the operator sees
 * all of them at once; the returned object is frozen.
 */
export function loadConfig(source: NodeJS.ProcessEnv = process.env): Config {
  const parsed = envSchema.safeParse(source);
  const problems: string[] = [];
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      problems.push(`${issue.path.join(".") || "(environment)"}: ${issue.message}`);
    }
  }
  problems.push(...crossFieldProblems(source, parsed.data));
  if (!parsed.success || problems.length > 0) throw new ConfigError(problems);
  const env = parsed.data;

  const provider = inferProvider(env);
  const apiKey = providerKey(env, provider);

  const github = env.APP_ID ? githubAppConfig(env, env.APP_ID, problems) : undefined;

  if (problems.length > 0) throw new ConfigError(problems);

  const config: Config = {
    env: env.NODE_ENV,
    port: env.PORT,
    host: env.HOST,
    mongodbUri: env.MONGODB_URI,
    dataDir: path.resolve(env.DATA_DIR),
    dbEngine: env.DB_ENGINE,
    runWorkers: env.RUN_WORKERS,
    openSignup: openSignup(env).open,
    openSignupWhy: openSignup(env).why,
    signupRateLimit: { max: env.SIGNUP_RATE_LIMIT, windowMs: env.SIGNUP_RATE_WINDOW_S * 1000 },
    automationWebhookRateLimit: {
      max: env.AUTOMATION_WEBHOOK_RATE_LIMIT,
      windowMs: env.AUTOMATION_WEBHOOK_RATE_WINDOW_S * 1000,
    },
    trustProxy: env.TRUST_PROXY,
    slackApiUrl: env.SLACK_API_URL,
    slackOAuth: {
      clientId: env.SLACK_CLIENT_ID,
      clientSecret: env.SLACK_CLIENT_SECRET,
      signingSecret: env.SLACK_SIGNING_SECRET,
    },
    linearApiUrl: env.LINEAR_API_URL,
    allowLocalRepos: env.ALLOW_LOCAL_REPOS,
    mcpAllowedUrls: env.MCP_ALLOWED_URLS,
    httpRequestTimeoutMs: env.HTTP_REQUEST_TIMEOUT_S * 1000,
    httpHandlerTimeoutMs: env.HTTP_HANDLER_TIMEOUT_S * 1000,
    logLevel: env.LOG_LEVEL,
    trajectoryRetentionDays: env.TRAJECTORY_RETENTION_DAYS,
    llm: llmConfig(env, provider, apiKey),
    github,
    pipeline: pipelineConfig(env),
    health: healthConfig(env),
    jobs: {
      lockLifetimeMs: env.JOB_LOCK_LIFETIME_S * 1000,
      shutdownGraceMs: env.SHUTDOWN_GRACE_S * 1000,
    },
    sandbox: sandboxConfig(env),
    dataDirMinFreeMb: env.DATA_DIR_MIN_FREE_MB,
    accountViewPollMs: env.ACCOUNT_VIEW_POLL_MS,
    eventPollMs: env.EVENT_POLL_MS,
    metrics: metricsExposure(env),
    logFormat: env.LOG_FORMAT,
    manifest: manifestConfig(env),
    wsBufferBudgetBytes: env.WS_BUFFER_BUDGET_KB * 1024,
    bounds: boundsConfig(env),
    keysPerAccount: env.KEYS_PER_ACCOUNT,
  };
  return deepFreeze(config);
}

/** The model's settings: provider and key (already checked), limits, prices and steps. */
function llmConfig(
  env: Env,
  provider: Config["llm"]["provider"],
  apiKey: string | undefined,
): Config["llm"] {
  return {
    provider,
    baseUrl: env.LLM_BASE_URL,
    apiKey,
    model: env.LLM_MODEL,
    maxTaskCostUsd: env.MAX_TASK_COST_USD,
    stream: env.LLM_STREAM,
    timeoutMs: env.LLM_TIMEOUT_S * 1000,
    maxRetries: env.LLM_MAX_RETRIES,
    prices:
      env.LLM_PRICE_INPUT_PER_MTOK !== undefined && env.LLM_PRICE_OUTPUT_PER_MTOK !== undefined
        ? {
            inputPerMTok: env.LLM_PRICE_INPUT_PER_MTOK,
            outputPerMTok: env.LLM_PRICE_OUTPUT_PER_MTOK,
          }
        : undefined,
    contextTokens: env.LLM_CONTEXT_TOKENS,
    planMaxSteps: env.PLAN_MAX_STEPS,
    agentMaxSteps: env.AGENT_MAX_STEPS,
    reviewMaxSteps: env.REVIEW_MAX_STEPS,
  };
}

/** How tasks run: parallel workers, attempts, follow-ups, command time, polling. */
function pipelineConfig(env: Env): Config["pipeline"] {
  return {
    parallelThreshold: env.PARALLEL_THRESHOLD,
    maxParallelWorkers: env.MAX_PARALLEL_WORKERS,
    maxFixAttempts: env.MAX_FIX_ATTEMPTS,
    maxRevisions: env.MAX_REVISIONS,
    followUpKeepMs: env.FOLLOW_UP_KEEP_MIN * 60_000,
    followUpKeepMax: env.FOLLOW_UP_KEEP_MAX,
    taskConcurrency: env.TASK_CONCURRENCY,
    commandTimeoutS: env.COMMAND_TIMEOUT_S,
    commandTimeLimitS: env.TASK_COMMAND_TIME_LIMIT_S,
    taskPollMs: env.TASK_POLL_MS,
    stageMaxAttempts: env.STAGE_MAX_ATTEMPTS,
    sweepIntervalMs: env.TASK_SWEEP_INTERVAL_S * 1000,
  };
}

/** Health scans and the registries they ask. */
function healthConfig(env: Env): Config["health"] {
  return {
    scanTimeoutMs: env.HEALTH_SCAN_TIMEOUT_S * 1000,
    coverageTimeoutMs: env.HEALTH_COVERAGE_TIMEOUT_S * 1000,
    concurrency: env.HEALTH_SCAN_CONCURRENCY,
    registry: {
      npmUrl: env.NPM_REGISTRY_URL ?? "https://registry.npmjs.org",
      pypiUrl: env.PYPI_URL ?? "https://pypi.org",
      goproxyUrl: env.GOPROXY_URL ?? "https://proxy.golang.org",
      osvUrl: env.OSV_URL ?? "https://api.osv.dev",
      timeoutMs: env.HEALTH_REGISTRY_TIMEOUT_S * 1000,
      maxRequests: env.HEALTH_REGISTRY_MAX_REQUESTS,
      concurrency: 8,
    },
  };
}

/** The sandbox repository code runs in: engine, network, limits, disk, caches, setup access. */
function sandboxConfig(env: Env): Config["sandbox"] {
  return {
    engine: env.SANDBOX,
    network: env.SANDBOX_NETWORK,
    memoryMb: env.SANDBOX_MEMORY_MB,
    maxProcs: env.SANDBOX_MAX_PROCS,
    maxFileMb: env.SANDBOX_MAX_FILE_MB,
    diskLimitMb: env.TASK_DISK_LIMIT_MB,
    diskVolumes: env.TASK_DISK_VOLUMES,
    cacheMaxAgeDays: env.SANDBOX_CACHE_MAX_AGE_DAYS,
    cacheMaxMb: env.SANDBOX_CACHE_MAX_MB,
    setupAllow: env.SANDBOX_SETUP_ALLOW,
    setupAllowAddresses: env.SANDBOX_SETUP_ALLOW_ADDRESSES,
    pipIndexUrl: env.PIP_INDEX_URL ?? null,
    heartbeatMs: env.SANDBOX_HEARTBEAT_S * 1000,
  };
}

/** Where the GitHub App manifest flow sends the operator and writes the App's settings. */
function manifestConfig(env: Env): Config["manifest"] {
  return {
    publicUrl: env.PUBLIC_URL,
    org: env.GH_ORG,
    webUrl: env.GHE_HOST ? `${env.GHE_PROTOCOL}://${env.GHE_HOST}` : "https://github.com",
    apiUrl: env.GHE_HOST
      ? `${env.GHE_PROTOCOL}://${env.GHE_HOST}/api/v3`
      : "https://api.github.com",
    webhookPath: env.WEBHOOK_PATH,
    envFile: path.resolve(env.ENV_FILE),
  };
}

/** How many MCP waits, requests and sessions and WebSocket streams a key or account may hold. */
function boundsConfig(env: Env): Config["bounds"] {
  return {
    mcpWaits: { perKey: env.MCP_WAITS_PER_KEY, perAccount: env.MCP_WAITS_PER_ACCOUNT },
    mcpRequests: {
      perKey: env.MCP_REQUESTS_PER_KEY,
      perAccount: env.MCP_REQUESTS_PER_ACCOUNT,
    },
    mcpSessions: {
      perKey: env.MCP_SESSIONS_PER_KEY,
      perAccount: env.MCP_SESSIONS_PER_ACCOUNT,
      total: env.MCP_MAX_SESSIONS,
    },
    wsStreams: { perKey: env.WS_STREAMS_PER_KEY, perAccount: env.WS_STREAMS_PER_ACCOUNT },
  };
}

/**
 * The App's private key from PRIVATE_KEY (PEM, PEM with `\\n` escapes, or base64 of the PEM:
 * Probot's own reader, @probot/get-private-key) or PRIVATE_KEY_PATH, then parsed, so a junk
 * key stops the start with a clear message instead of failing at the first GitHub call.
 * The key's text never goes into a message.
 */
function readPrivateKey(env: Env, problems: string[]): string | undefined {
  const name = env.PRIVATE_KEY ? "PRIVATE_KEY" : "PRIVATE_KEY_PATH";
  let pem: string | null;
  try {
    if (env.PRIVATE_KEY) pem = getPrivateKey({ env: { PRIVATE_KEY: env.PRIVATE_KEY } });
    else if (env.PRIVATE_KEY_PATH) pem = readFileSync(env.PRIVATE_KEY_PATH, "utf8");
    else return undefined;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    problems.push(
      code
        ? `PRIVATE_KEY_PATH: cannot read ${env.PRIVATE_KEY_PATH} (${code})`
        : "PRIVATE_KEY: not a PEM private key (expected the .pem file's text, with real or \\n-escaped line breaks, or its base64)",
    );
    return undefined;
  }
  try {
    createPrivateKey(pem ?? "");
  } catch {
    problems.push(
      `${name}: the key does not parse as a private key (download a new one from the GitHub App's settings)`,
    );
    return undefined;
  }
  return pem ?? undefined;
}

/**
 * Safe by default: with METRICS unset ("auto") metrics exist only when the operator gave a
 * way to read them privately, a METRICS_TOKEN (Bearer, on the API port) and/or a
 * METRICS_PORT (a listener of its own, on METRICS_HOST = 127.0.0.1 by default). "public"
 * opens /metrics on the API port to anyone; "off" records and serves nothing.
 */
function metricsExposure(env: Env): Config["metrics"] {
  const token = env.METRICS_TOKEN;
  const port = env.METRICS === "off" ? undefined : env.METRICS_PORT;
  const publicPort: Config["metrics"]["publicPort"] =
    env.METRICS === "off"
      ? "absent"
      : env.METRICS === "public"
        ? "open"
        : token
          ? "token"
          : "absent";
  return {
    enabled: publicPort !== "absent" || port !== undefined,
    publicPort,
    token: env.METRICS === "off" ? undefined : token,
    port,
    host: env.METRICS_HOST,
    dbReadEveryMs: env.METRICS_DB_READ_S * 1000,
  };
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === "object") {
    for (const inner of Object.values(value)) deepFreeze(inner);
    Object.freeze(value);
  }
  return value;
}

/** Registers the configuration's secrets with the central redaction (util/redact.ts). */
export function registerConfigSecrets(config: Config): void {
  for (const secret of configSecrets(config)) registerSecret(secret);
}

/** The secret values of a configuration, for central log and error redaction. */
export function configSecrets(config: Config): string[] {
  const values = [
    config.llm.apiKey,
    config.github?.privateKey,
    config.github?.webhookSecret,
    config.github?.clientSecret,
    config.slackOAuth.clientSecret,
    config.slackOAuth.signingSecret,
    config.metrics.token,
  ];
  if (config.mongodbUri) {
    try {
      const password = new URL(config.mongodbUri).password;
      if (password) values.push(decodeURIComponent(password));
    } catch {
      // not a URL the WHATWG parser understands; nothing to extract
    }
  }
  return values.filter((v): v is string => typeof v === "string" && v.length >= 6);
}
