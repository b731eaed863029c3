import http from "node:http";
import type { AddressInfo } from "node:net";
import { Octokit } from "@octokit/rest";
import nock from "nock";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { measureCiPassRate } from "../../src/health/ci.js";
import { readRepoFiles } from "../../src/health/files.js";
import { measureFreshness } from "../../src/health/freshness.js";
import { readManifests } from "../../src/health/manifests.js";
import {
  escapeModulePath,
  goLatestOfList,
  goproxyBase,
  RegistryClient,
  type RegistryConfig,
} from "../../src/health/registry.js";
import { createGitRepo } from "../helpers/git-repo.js";

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
    // The Go proxy's version list first; its @latest when the list names no version.
    expect(seen).toEqual([
      "/@scope%2Fname",
      "/pypi/Flask/json",
      "/github.com/!burnt!sushi/toml/@v/list",
      "/github.com/!burnt!sushi/toml/@latest",
    ]);
    expect(escapeModulePath("golang.org/x/Text")).toBe("golang.org/x/!text");
    expect(goproxyBase("https://goproxy.example/,direct")).toBe("https://goproxy.example");
    expect(goproxyBase("off")).toBeNull();
  });
});

describe("npm's latest, as npm outdated picks it", () => {
  const registry = "https://registry.example";
  const version = (v: string, extra: Record<string, unknown> = {}) => ({
    name: "cookie",
    version: v,
    dist: { tarball: `${registry}/cookie/-/cookie-${v}.tgz` },
    ...extra,
  });
  // An abbreviated packument (application/vnd.npm.install-v1+json), as the registry sends.
  const packument = {
    name: "cookie",
    "dist-tags": { latest: "2.0.2" },
    versions: {
      "1.0.2": version("1.0.2", { engines: { node: ">= 0.6" } }),
      "1.1.1": version("1.1.1", { engines: { node: ">=18" } }),
      "1.2.0": version("1.2.0", { deprecated: "use 1.1.1" }),
      "2.0.2": version("2.0.2", { engines: { node: ">=22" } }),
    },
  };

  it("skips a latest whose engines.node excludes the Node the commands run under", async () => {
    nock.disableNetConnect();
    const scope = nock(registry)
      .get("/cookie")
      .matchHeader("accept", /application\/vnd\.npm\.install-v1\+json/)
      .times(2)
      .reply(200, packument);
    const on20 = new RegistryClient(config({ npmUrl: registry }), undefined, "v20.20.2");
    const on22 = new RegistryClient(config({ npmUrl: registry }), undefined, "v22.12.0");
    // Node 20: 2.0.2 needs >=22, 1.2.0 is deprecated, so npm's latest is 1.1.1.
    expect(await on20.latest("npm", "cookie")).toEqual({ ok: true, value: "1.1.1" });
    expect(await on22.latest("npm", "cookie")).toEqual({ ok: true, value: "2.0.2" });
    scope.done();
  });

  it("counts a ^1 range up to date when the newest installable version is 1.x", async () => {
    nock.disableNetConnect();
    nock(registry).get("/cookie").reply(200, packument);
    const client = new RegistryClient(config({ npmUrl: registry }), undefined, "v20.20.2");
    const metric = await measureFreshness(client, {
      dependencies: [
        {
          ecosystem: "npm",
          name: "cookie",
          declared: "^1.0.2",
          range: "^1.0.2",
          exact: null,
          manifest: "package.json",
          dev: false,
        },
      ],
      npmLocked: null,
      skipped: [],
    });
    expect(metric.details).toMatchObject({ outdated: 0, checked: 1 });
    expect((metric.details.dependencies as Array<{ latest: string }>)[0]!.latest).toBe("1.1.1");
  });
});

describe("Go freshness, as go list -m -u counts it", () => {
  const proxy = "https://goproxy.example";

  it("takes the highest release of the version list", () => {
    expect(goLatestOfList("v1.0.0\nv1.10.0\nv1.9.3\nv2.0.0-rc.1\n")).toBe("v1.10.0");
    expect(goLatestOfList("v0.1.0-alpha\nv0.1.0-beta\n")).toBe("v0.1.0-beta");
    expect(goLatestOfList("v1.2.0\nv3.0.0+incompatible\n")).toBe("v1.2.0");
    expect(goLatestOfList("v2.0.0+incompatible\n")).toBe("v2.0.0+incompatible");
    expect(goLatestOfList("")).toBeNull();
  });

  it("counts the direct requirements with a newer version, not the // indirect ones", async () => {
    const fixture = await createGitRepo({
      "go.mod": [
        "module example.com/app",
        "",
        "go 1.21",
        "",
        "require (",
        "\tgithub.com/spf13/pflag v1.0.9",
        "\tgithub.com/BurntSushi/toml v1.4.0",
        "\tgolang.org/x/sync v0.0.0-20240101000000-abcdefabcdef",
        "\tgithub.com/old/indirect v1.0.0 // indirect",
        ")",
        "",
      ].join("\n"),
      "main.go": "package main\n\nfunc main() {}\n",
    });
    try {
      nock.disableNetConnect();
      const scope = nock(proxy)
        .get("/github.com/spf13/pflag/@v/list")
        .reply(200, "v1.0.8\nv1.0.9\nv1.1.0\n")
        .get("/github.com/!burnt!sushi/toml/@v/list")
        .reply(200, "v1.3.0\nv1.4.0\nv1.5.0-rc.1\n")
        // Pseudo-versions only: the list is empty and @latest names the newest commit.
        .get("/golang.org/x/sync/@v/list")
        .reply(200, "")
        .get("/golang.org/x/sync/@latest")
        .reply(200, { Version: "v0.0.0-20250101000000-123456123456" });
      const manifests = await readManifests(fixture.dir, await readRepoFiles(fixture.dir));
      const metric = await measureFreshness(
        new RegistryClient(config({ goproxyUrl: `${proxy},direct` })),
        manifests,
      );
      scope.done();
      // pflag (1.1.0) and x/sync (a newer commit) are behind; toml's newest is a pre-release.
      expect(metric.details).toMatchObject({ declared: 3, checked: 3, outdated: 2 });
      const outdated = (metric.details.dependencies as Array<{ name: string; status: string }>)
        .filter((d) => d.status === "outdated")
        .map((d) => d.name);
      expect(outdated).toEqual(["github.com/spf13/pflag", "golang.org/x/sync"]);
    } finally {
      await fixture.remove();
    }
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
