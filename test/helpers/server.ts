import { randomBytes } from "node:crypto";
import os from "node:os";
import path from "node:path";
import { inject } from "vitest";
import { loadConfig, type Config } from "../../src/config/env.js";
import { withDatabaseName } from "../../src/db/connection.js";
import { startService, type Service } from "../../src/service.js";
import { createLogger } from "../../src/util/logger.js";

/** A database name of its own for each test file, on the run's shared server. */
export function testDatabaseUri(label = "t"): string {
  const name = `${label.replace(/[^a-z0-9]/gi, "").slice(0, 20)}_${randomBytes(4).toString("hex")}`;
  return withDatabaseName(inject("mongoUri"), name);
}

export function testConfig(env: Record<string, string | undefined> = {}): Config {
  return loadConfig({
    NODE_ENV: "test",
    PORT: "0",
    HOST: "127.0.0.1",
    LOG_LEVEL: "silent",
    MONGODB_URI: testDatabaseUri(),
    SIGNUP_RATE_LIMIT: "100000",
    // The tests clone and push local repositories (see ALLOW_LOCAL_REPOS in the README).
    ALLOW_LOCAL_REPOS: "true",
    // Working copies of tasks go to the system's temp folder, never into the checkout.
    DATA_DIR: path.join(os.tmpdir(), `foreman-test-${process.pid}`),
    // Check runs of GitHub tasks are tested on their own (github-progress.test.ts); the
    // other GitHub tests list GitHub's requests exactly and turn them off.
    GITHUB_PROGRESS: "false",
    // Working copies as plain folders: a test's temporary DATA_DIR must be removable even
    // when a task was left mid-way. The volumes are tested on their own (workdir-volume).
    TASK_DISK_VOLUMES: "off",
    ...env,
  });
}

export interface TestServer {
  url: string;
  service: Service;
  /** Calls the API with fetch; `key` sets X-API-Key, `body` is sent as JSON. */
  api(
    method: string,
    path: string,
    options?: { key?: string; body?: unknown; raw?: string; headers?: Record<string, string> },
  ): Promise<ApiResponse>;
  /** Creates an account with its first key through the API. */
  signup(name?: string): Promise<{ id: string; key: string }>;
  stop(): Promise<void>;
}

export interface ApiResponse {
  status: number;
  headers: Headers;
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/**
 * Creates a plain-git workspace `name` for the account of `key`, holding one repository named
 * `repo.name` cloned from the local folder `repo.dir`; gives the workspace's id.
 */
export async function addLocalWorkspace(
  server: TestServer,
  key: string,
  repo: { name: string; dir: string },
  name = "local",
): Promise<string> {
  const ws = await server.api("POST", "/workspaces", {
    key,
    body: { name, repos: [{ name: repo.name, clone_url: repo.dir }] },
  });
  if (ws.status !== 201)
    throw new Error(`POST /workspaces answered ${ws.status}: ${JSON.stringify(ws.body)}`);
  return ws.body.id as string;
}

/** Starts the real service (HTTP on a free port, real database) for one test file. */
export async function startTestServer(
  options: {
    env?: Record<string, string | undefined>;
    workers?: boolean;
    /** Collects every log line (debug and up) here, for tests that scan logs for secrets. */
    logLines?: string[];
  } = {},
): Promise<TestServer> {
  const config = testConfig(options.env);
  const lines = options.logLines;
  const service = await startService({
    config,
    web: true,
    workers: options.workers ?? false,
    testing: true,
    ...(lines
      ? {
          logger: createLogger({
            level: "debug",
            destination: { write: (line: string) => void lines.push(line) },
          }),
        }
      : {}),
  });
  const url = service.http!.url;
  const api: TestServer["api"] = async (method, path, opts = {}) => {
    const headers: Record<string, string> = { ...opts.headers };
    if (opts.key !== undefined) headers["x-api-key"] = opts.key;
    let body: string | undefined;
    if (opts.raw !== undefined) body = opts.raw;
    else if (opts.body !== undefined) {
      body = JSON.stringify(opts.body);
      headers["content-type"] ??= "application/json";
    }
    const res = await fetch(`${url}${path}`, { method, headers, body });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      // not JSON; keep the text for the assertion message
    }
    return { status: res.status, headers: res.headers, body: parsed };
  };
  return {
    url,
    service,
    api,
    async signup(name = "test") {
      const res = await api("POST", "/keys/generate", { body: { name } });
      if (res.status !== 201)
        throw new Error(`signup failed: ${res.status} ${JSON.stringify(res.body)}`);
      return { id: res.body.id, key: res.body.key };
    },
    async stop() {
      await service.db.connection.dropDatabase().catch(() => undefined);
      await service.stop();
    },
  };
}
