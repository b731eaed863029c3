import http from "node:http";
import type { AddressInfo } from "node:net";
import { Octokit } from "@octokit/rest";
import nock from "nock";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { measureCiPassRate } from "../../src/health/ci.js";
import {
  escapeModulePath,
  goproxyBase,
  RegistryClient,
  type RegistryConfig,
} from "../../src/health/registry.js";

/*
 * The bounds on registry requests (count, concurrency, time) against a local HTTP server,
 * and the CI metric's sources and failures against GitHub faked with nock.
 */

let server: http.Server;
let base: string;
const seen: string[] = [];
let inFlight = 0;
let maxInFlight = 0;

beforeAll(async () => {
  server = http.createServer((req, res) => {
    seen.push(req.url ?? "");
    if (req.url === "/slow") return; // never answers
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    setTimeout(() => {
      inFlight--;
      if (req.url === "/broken") {
        res.writeHead(500).end("{}");
        return;
      }
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ "dist-tags": { latest: "1.0.0" }, Version: "v1.2.3" }));
    }, 30);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

afterEach(() => {
  nock.cleanAll();
  nock.enableNetConnect();
});

function config(overrides: Partial<RegistryConfig> = {}): RegistryConfig {
  return {
    npmUrl: base,
    pypiUrl: base,
    goproxyUrl: base,
    osvUrl: base,
    timeoutMs: 2000,
    maxRequests: 100,
    concurrency: 4,
    ...overrides,
  };
}

describe("registry client", () => {
  it("stops at the request limit of a scan", async () => {
    const client = new RegistryClient(config({ maxRequests: 2 }));
    const answers = [
      await client.latest("npm", "a"),
      await client.latest("npm", "b"),
      await client.latest("npm", "c"),
    ];
    expect(answers).toEqual([
      { ok: true, value: "1.0.0" },
      { ok: true, value: "1.0.0" },
      { ok: false, error: "the limit of 2 registry requests per scan was reached" },
    ]);
    expect(client.requests).toBe(2);
  });

  it("keeps at most `concurrency` requests in flight", async () => {
    maxInFlight = 0;
    const client = new RegistryClient(config({ concurrency: 2 }));
    await Promise.all(Array.from({ length: 6 }, (_, i) => client.json(`${base}/p${i}`)));
    expect(maxInFlight).toBe(2);
  });

  it("gives up on a registry that does not answer in time, and reports errors", async () => {
    const client = new RegistryClient(config({ timeoutMs: 200 }));
    const host = new URL(base).host;
    expect(await client.json(`${base}/slow`)).toEqual({
      ok: false,
      error: `${host} did not answer within 200 ms`,
    });
    expect(await client.json(`${base}/broken`)).toEqual({
      ok: false,
      error: `${host} answered 500`,
    });
    const closed = new RegistryClient(config({ npmUrl: "http://127.0.0.1:9" }));
    const answer = await closed.latest("npm", "x");
    expect(answer.ok).toBe(false);
    expect(!answer.ok && answer.error).toMatch(/^127\.0\.0\.1:9 is unreachable/);
  });

  it("asks each registry at its own path", async () => {
    seen.length = 0;
    const client = new RegistryClient(config());
    await client.latest("npm", "@scope/name");
    await client.latest("PyPI", "Flask");
    expect(await client.latest("Go", "github.com/BurntSushi/toml")).toEqual({
      ok: true,
      value: "v1.2.3",
    });
    expect(seen).toEqual([
      "/@scope%2Fname",
      "/pypi/Flask/json",
      "/github.com/!burnt!sushi/toml/@latest",
    ]);
    expect(escapeModulePath("golang.org/x/Text")).toBe("golang.org/x/!text");
    expect(goproxyBase("https://goproxy.example/,direct")).toBe("https://goproxy.example");
    expect(goproxyBase("off")).toBeNull();
  });
});

describe("CI pass rate", () => {
  const quiet = { debug() {}, info() {}, warn() {}, error() {} };
  const octokit = () => Promise.resolve(new Octokit({ auth: "test-token", log: quiet }));
  const source = { kind: "github" as const, octokit, fullName: "acme/app", branch: "trunk" };

  it("falls back to the head commit's check runs when there are no workflow runs", async () => {
    nock.disableNetConnect();
    const api = nock("https://api.github.com")
      .get("/repos/acme/app/actions/runs")
      .query({ branch: "trunk", status: "completed", per_page: "50" })
      .reply(200, { total_count: 0, workflow_runs: [] })
      .get("/repos/acme/app/commits/trunk/check-runs")
      .query({ status: "completed", per_page: "100" })
      .reply(200, {
        total_count: 4,
        check_runs: [
          { name: "build", conclusion: "success" },
          { name: "lint", conclusion: "failure" },
          { name: "e2e", conclusion: "timed_out" },
          { name: "docs", conclusion: "skipped" },
        ],
      });
    const result = await measureCiPassRate(source);
    expect(result.score).toBe(33.3);
    expect(result.measured).toBe(true);
    expect(result.details).toMatchObject({
      source: "check_runs",
      passed: 1,
      failed: 2,
      runs_considered: 4,
    });
    expect(api.isDone()).toBe(true);
  });

  it("has no score when GitHub fails or no run passed or failed", async () => {
    nock.disableNetConnect();
    const failing = nock("https://api.github.com")
      .get("/repos/acme/app/actions/runs")
      .query(true)
      .reply(500, { message: "boom" });
    expect(await measureCiPassRate(source)).toEqual({
      score: null,
      summary: "CI history could not be read.",
      details: { reason: "GitHub answered 500 when listing CI runs" },
      measured: false,
    });
    expect(failing.isDone()).toBe(true);

    const cancelled = nock("https://api.github.com")
      .get("/repos/acme/app/actions/runs")
      .query(true)
      .reply(200, { workflow_runs: [{ name: "ci", conclusion: "cancelled" }] });
    const result = await measureCiPassRate(source);
    expect(result).toMatchObject({ score: null, measured: false });
    expect(result.details.reason).toBe(
      "the 1 completed runs on trunk were all cancelled, skipped or neutral",
    );
    expect(cancelled.isDone()).toBe(true);
  });
});
