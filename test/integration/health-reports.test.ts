import { execFile } from "node:child_process";
import { rm } from "node:fs/promises";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { promisify } from "node:util";
import nock from "nock";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { sweepHealthReports } from "../../src/domain/health/reports.js";
import { createGitRepo, type GitFixture } from "../helpers/git-repo.js";
import { mockInstallationToken, testPrivateKey } from "../helpers/github.js";
import { startTestServer, type ApiResponse, type TestServer } from "../helpers/server.js";

/*
 * Health scans end to end: fixture repositories with known properties are scanned by the
 * real worker (clone, sandboxed test runs with coverage, file metrics), against a fake
 * package registry on 127.0.0.1 and, for the GitHub repository, GitHub's API faked with
 * nock (every mock used).
 */

// Built at run time so no secret scanner flags this test file itself.
const PLANTED_KEY = "AKIA" + "Z7Q3EXAMPLE4KEY2";
const INSTALLATION_TOKEN = "ghs_" + "H3alth".repeat(6) + "x";

/** `n` distinct words. */
function words(n: number): string {
  return Array.from({ length: n }, (_, i) => `word${i}`).join(" ");
}

// README: Fixture + 54 words + Usage + js + add, 1, 2 → 60 words, two headings, a code
// block: 20 + 50·60/300 + 15 + 15 = 60 points.
const JS_FILES: Record<string, string> = {
  "package.json": JSON.stringify(
    {
      name: "fixture",
      version: "1.0.0",
      type: "module",
      scripts: { test: "node --test" },
      dependencies: { "left-pad": "^1.0.0" },
      devDependencies: { "old-lib": "^1.2.0" },
    },
    null,
    2,
  ),
  // Installed already, so the scan runs the tests without installing anything.
  "node_modules/left-pad/package.json": '{"name":"left-pad","version":"1.3.0"}\n',
  "README.md": `# Fixture\n\n${words(54)}\n\n## Usage\n\n\`\`\`js\nadd(1, 2);\n\`\`\`\n`,
  // 23 lines; the tests run add and multiply: lines 13-18 and 21-23 stay uncovered (14/23).
  "src/math.js": [
    "/** Adds two numbers. */",
    "export function add(a, b) {",
    "  return a + b;",
    "}",
    "",
    "/** Multiplies two numbers. */",
    "export function multiply(a, b) {",
    "  // TODO: handle big integers",
    "  return a * b;",
    "}",
    "",
    "export function divide(a, b) {",
    "  // FIXME: division by zero",
    "  if (b === 0) {",
    "    return null;",
    "  }",
    "  return a / b;",
    "}",
    "",
    "export function negate(a) {",
    "  // HACK: unary minus",
    "  return -a;",
    "}",
    "",
  ].join("\n"),
  "src/config.js": `const region = "eu-west-1";\nconst accessKey = "${PLANTED_KEY}";\n\nexport default { region, accessKey };\n`,
  "test/math.test.js": [
    'import { test } from "node:test";',
    'import assert from "node:assert/strict";',
    'import { add, multiply } from "../src/math.js";',
    "",
    'test("add", () => {',
    "  assert.equal(add(1, 2), 3);",
    "});",
    "",
    'test("multiply", () => {',
    "  assert.equal(multiply(2, 3), 6);",
    "});",
    "",
  ].join("\n"),
};

const GO_FILES: Record<string, string> = {
  "go.mod": "module example.com/fixture\n\ngo 1.21\n",
  "calc/calc.go":
    "package calc\n\n// Add adds.\nfunc Add(a, b int) int {\n\treturn a + b\n}\n\nfunc Sub(a, b int) int {\n\treturn a - b\n}\n",
  "calc/calc_test.go":
    'package calc\n\nimport "testing"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(1, 2) != 3 {\n\t\tt.Fatal("bad")\n\t}\n}\n',
};

const PY_FILES: Record<string, string> = {
  "pkg/__init__.py": "",
  // 5 code lines
  "pkg/calc.py":
    'def add(a, b):\n    """Add."""\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n',
  // 3 code lines
  "tests/test_calc.py":
    "from pkg.calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n",
  "requirements.txt": "requests==2.0.0\n",
};

// A repository whose only branch is `master`, added without a default branch.
const MASTER_FILES: Record<string, string> = {
  "README.md": "# Old\n",
  "lib/index.js": "/** Hello. */\nexports.hello = function hello() {};\n",
};

const FLAKY_FILES: Record<string, string> = {
  "package.json": JSON.stringify({ name: "flaky", dependencies: { "flaky-advisories": "^1.0.0" } }),
  "src/index.js": "export const x = 1;\n",
};

interface RegistryRequest {
  method: string;
  url: string;
  body: string;
}

/** A fake npm registry, PyPI and OSV on 127.0.0.1, recording what it is asked. */
async function startRegistry(): Promise<{
  url: string;
  requests: RegistryRequest[];
  close(): Promise<void>;
}> {
  const requests: RegistryRequest[] = [];
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (chunk) => (body += chunk));
    req.on("end", () => {
      requests.push({ method: req.method ?? "", url: req.url ?? "", body });
      const json = (status: number, value: unknown) => {
        res.writeHead(status, { "content-type": "application/json" });
        res.end(JSON.stringify(value));
      };
      if (req.method === "GET" && req.url === "/left-pad")
        return json(200, { name: "left-pad", "dist-tags": { latest: "1.3.0" } });
      if (req.method === "GET" && req.url === "/old-lib")
        return json(200, { name: "old-lib", "dist-tags": { latest: "3.1.0" } });
      if (req.method === "GET" && req.url === "/flaky-advisories")
        return json(200, { name: "flaky-advisories", "dist-tags": { latest: "1.0.0" } });
      if (req.method === "POST" && req.url === "/-/npm/v1/security/advisories/bulk")
        return body.includes("flaky-advisories")
          ? json(503, { error: "unavailable" })
          : json(200, {});
      if (req.method === "GET" && req.url === "/pypi/requests/json")
        return json(200, { info: { name: "requests", version: "2.31.0" } });
      if (req.method === "POST" && req.url === "/v1/querybatch")
        return json(200, {
          results: [{ vulns: [{ id: "GHSA-j8r2-6x86-q33q", modified: "2024-01-01T00:00:00Z" }] }],
        });
      json(404, { error: "not found" });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

let registry: Awaited<ReturnType<typeof startRegistry>>;
let server: TestServer;
let key: string;
let otherKey: string;
let accountId: string;
const fixtures: GitFixture[] = [];
const repos: Record<string, { workspace: string; id: string }> = {};

async function fixture(files: Record<string, string>): Promise<GitFixture> {
  const repo = await createGitRepo(files);
  // node_modules is committed on purpose (git would add it anyway without a .gitignore).
  fixtures.push(repo);
  return repo;
}

/** A report as the API answers it (the helper's JSON body type). */
type Report = ApiResponse["body"];

async function scan(repoId: string, query = ""): Promise<ApiResponse> {
  return server.api("POST", `/health-reports/${repoId}/scan${query}`, { key });
}

/** Polls the report until it has finished (completed or failed), for at most `ms`. */
async function finished(repoId: string, reportId: string, ms = 120_000): Promise<Report> {
  const deadline = Date.now() + ms;
  for (;;) {
    const res = await server.api("GET", `/health-reports/${repoId}/scans/${reportId}`, { key });
    expect(res.status).toBe(200);
    if (res.body.status === "completed" || res.body.status === "failed") return res.body;
    if (Date.now() > deadline) throw new Error(`report ${reportId} still ${res.body.status}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** True when some Python the scan tries has coverage.py and pytest (Debian's packages). */
async function pythonCoverage(): Promise<boolean> {
  for (const python of ["python3", "/usr/bin/python3"])
    if (
      await promisify(execFile)(python, ["-c", "import coverage, pytest"]).then(
        () => true,
        () => false,
      )
    )
      return true;
  return false;
}
const coveragePy = await pythonCoverage();

beforeAll(async () => {
  registry = await startRegistry();
  server = await startTestServer({
    workers: true,
    env: {
      NPM_REGISTRY_URL: registry.url,
      PYPI_URL: registry.url,
      GOPROXY_URL: registry.url,
      OSV_URL: registry.url,
      HEALTH_COVERAGE_TIMEOUT_S: "240",
      APP_ID: "4242",
      PRIVATE_KEY: testPrivateKey(),
      WEBHOOK_SECRET: "whsec-health-0123456789",
    },
  });
  const signup = await server.signup();
  key = signup.key;
  otherKey = (await server.signup("other")).key;
  const keyDoc = await server.service.db.models.ApiKey.findOne({ key_id: signup.id }).lean();
  accountId = keyDoc!.account_id;

  const js = await fixture(JS_FILES);
  const go = await fixture(GO_FILES);
  const py = await fixture(PY_FILES);
  const flaky = await fixture(FLAKY_FILES);
  const master = await createGitRepo(MASTER_FILES, "master");
  fixtures.push(master);
  // A repository that goes away after the workspace is made (a local path must exist then).
  const gone = await createGitRepo({ "README.md": "gone\n" });
  const ws = await server.api("POST", "/workspaces", {
    key,
    body: {
      name: "fixtures",
      repos: [
        { name: "acme/js", clone_url: js.dir },
        { name: "acme/go", clone_url: go.dir },
        { name: "acme/py", clone_url: py.dir },
        { name: "acme/flaky", clone_url: flaky.dir },
        { name: "acme/master", clone_url: master.dir },
        { name: "acme/gone", clone_url: gone.dir },
      ],
    },
  });
  expect(ws.status).toBe(201);
  await rm(gone.dir, { recursive: true, force: true });
  // Branches were not given: each is the remote's HEAD.
  expect(
    (ws.body.repos as Array<{ full_name: string; default_branch: string | null }>).map((r) => [
      r.full_name,
      r.default_branch,
    ]),
  ).toEqual([
    ["acme/js", "main"],
    ["acme/go", "main"],
    ["acme/py", "main"],
    ["acme/flaky", "main"],
    ["acme/master", "master"],
    ["acme/gone", "main"],
  ]);
  for (const repo of ws.body.repos as Array<{ id: string; full_name: string }>)
    repos[repo.full_name] = { workspace: ws.body.id, id: repo.id };
  // A linked GitHub installation whose repository clones from the local JS fixture.
  await server.service.db.models.Workspace.create({
    _id: "ws_gh_health",
    kind: "github",
    account_id: accountId,
    name: "acme-gh",
    repos: [
      {
        repo_id: "7001",
        name: "app",
        full_name: "acme/app",
        clone_url: `file://${js.dir}`,
        default_branch: "main",
        private: true,
      },
    ],
    github: { installation_id: 777, account_login: "acme", account_type: "Organization" },
  });
  nock.disableNetConnect();
  nock.enableNetConnect("127.0.0.1");
}, 120_000);

afterEach(() => {
  nock.cleanAll();
});

afterAll(async () => {
  nock.enableNetConnect();
  await server?.stop();
  await registry?.close();
  for (const repo of fixtures) await repo.remove();
});

describe("a JavaScript repository", () => {
  let report: Report;

  it("answers 202 with a pending report, then completes it", async () => {
    const res = await scan(repos["acme/js"]!.id);
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({
      repo_id: repos["acme/js"]!.id,
      status: "pending",
      score: null,
      grade: null,
      metrics: null,
    });
    expect(typeof res.body.id).toBe("string");
    expect(new Date(res.body.created_at).toISOString()).toBe(res.body.created_at);
    report = await finished(repos["acme/js"]!.id, res.body.id);
    expect(report.error).toBeNull();
    expect(report.status).toBe("completed");
    expect(report.commit_sha).toMatch(/^[0-9a-f]{40}$/);
  }, 150_000);

  it("measures coverage by running the tests", () => {
    const coverage = report.metrics.test_coverage;
    expect(coverage.measured).toBe(true);
    // src/math.js under c8 (V8): 14 of 23 lines; the test file itself does not count.
    expect(coverage.score).toBe(60.9);
    expect(coverage.details.languages[0]).toMatchObject({
      language: "javascript",
      covered: 14,
      total: 23,
      method: "c8 around npm test",
      tests_passed: true,
    });
  });

  it("counts the three debt markers", () => {
    const debt = report.metrics.tech_debt;
    expect(debt.measured).toBe(true);
    expect(debt.details.markers.total).toBe(3);
    expect(debt.details.markers.by_kind).toEqual({ TODO: 1, FIXME: 1, HACK: 1, XXX: 0 });
    // Over 15 markers per 1,000 lines: the marker penalty is at its cap of 30.
    expect(debt.score).toBe(70);
  });

  it("finds the planted key without storing it", () => {
    const security = report.metrics.security;
    expect(security.measured).toBe(true);
    expect(security.details.secrets.findings).toEqual([
      {
        path: "src/config.js",
        line: 2,
        kind: "aws_access_key_id",
        preview: "AKIA… (20 characters)",
      },
    ]);
    expect(security.details.vulnerabilities.count).toBe(0);
    expect(security.score).toBe(75);
    expect(JSON.stringify(report)).not.toContain(PLANTED_KEY);
  });

  it("sees two of five public symbols documented, and the README", () => {
    const docs = report.metrics.documentation;
    // add, multiply (documented), divide, negate, and config.js's default export.
    expect(docs.details.exports).toMatchObject({ total: 5, documented: 2, percent: 40 });
    expect(docs.details.readers).toEqual({ javascript: "TypeScript compiler API (JSDoc)" });
    expect(docs.details.readme).toMatchObject({ path: "README.md", words: 60, score: 60 });
    expect(docs.score).toBe(46); // 0.3 · 60 + 0.7 · 40
  });

  it("finds the outdated dependency against the registry", () => {
    const freshness = report.metrics.dependency_freshness;
    expect(freshness.measured).toBe(true);
    expect(freshness.details.dependencies).toEqual([
      {
        ecosystem: "npm",
        name: "left-pad",
        declared: "^1.0.0",
        latest: "1.3.0",
        status: "up_to_date",
        majors_behind: 0,
        score: 100,
      },
      {
        ecosystem: "npm",
        name: "old-lib",
        declared: "^1.2.0",
        latest: "3.1.0",
        status: "outdated",
        majors_behind: 2,
        score: 25,
      },
    ]);
    expect(freshness.score).toBe(62.5);
    const bulk = registry.requests.find(
      (r) => r.url === "/-/npm/v1/security/advisories/bulk" && r.body.includes("old-lib"),
    );
    // No lockfile: the lowest versions the ranges admit are checked.
    expect(JSON.parse(bulk!.body)).toEqual({ "left-pad": ["1.0.0"], "old-lib": ["1.2.0"] });
  });

  it("has no CI figure for a plain git repository, and weighs the rest", () => {
    expect(report.metrics.ci_pass_rate).toEqual({
      score: null,
      summary: "No CI history.",
      details: { reason: "not a GitHub repository" },
      measured: false,
    });
    // (60.9·25 + 70·15 + 75·25 + 46·10 + 62.5·10) / 85 = 65.1
    expect(report.score).toBe(65);
    expect(report.grade).toBe("D");
  });

  it("serves it as the latest report and in the history", async () => {
    const latest = await server.api("GET", `/health-reports/${repos["acme/js"]!.id}`, { key });
    expect(latest.status).toBe(200);
    expect(latest.body).toEqual(report);
    const byName = await server.api("GET", "/health-reports/acme%2Fjs/", { key });
    expect(byName.body.id).toBe(report.id);
    const history = await server.api("GET", `/health-reports/${repos["acme/js"]!.id}/history`, {
      key,
    });
    expect(history.status).toBe(200);
    expect(history.body.map((r: { id: string }) => r.id)).toEqual([report.id]);
  });

  it("is the account's own: another account gets 404 everywhere", async () => {
    const id = repos["acme/js"]!.id;
    for (const [method, path] of [
      ["POST", `/health-reports/${id}/scan`],
      ["GET", `/health-reports/${id}`],
      ["GET", `/health-reports/${id}/history`],
      ["GET", `/health-reports/${id}/scans/${report.id}`],
    ] as const) {
      const res = await server.api(method, path, { key: otherKey });
      expect([path, res.status, res.body.error?.code]).toEqual([path, 404, "not_found"]);
    }
    expect((await server.api("GET", "/health-reports/repo_unknown", { key })).status).toBe(404);
    expect((await server.api("GET", `/health-reports/${id}`)).status).toBe(401);
  });
});

describe("a GitHub repository", () => {
  it("takes the CI pass rate from the default branch's workflow runs", async () => {
    const token = mockInstallationToken(777, INSTALLATION_TOKEN);
    const runs = [
      ...Array.from({ length: 9 }, (_, i) => ({
        id: i,
        name: "ci",
        conclusion: "success",
        head_sha: `s${i}`,
      })),
      { id: 10, name: "ci", conclusion: "failure", head_sha: "f1" },
      { id: 11, name: "ci", conclusion: "cancelled", head_sha: "c1" },
      { id: 12, name: "ci", conclusion: "cancelled", head_sha: "c2" },
    ];
    const github = nock("https://api.github.com", {
      reqheaders: { authorization: `token ${INSTALLATION_TOKEN}` },
    })
      .get("/repos/acme/app/actions/runs")
      .query({ branch: "main", status: "completed", per_page: "50" })
      .reply(200, { total_count: runs.length, workflow_runs: runs });

    const res = await scan("7001");
    expect(res.status).toBe(202);
    const report = await finished("7001", res.body.id);
    expect(report.status).toBe("completed");
    expect(report.metrics.ci_pass_rate).toMatchObject({
      score: 90,
      measured: true,
      details: {
        source: "workflow_runs",
        branch: "main",
        passed: 9,
        failed: 1,
        runs_considered: 12,
      },
    });
    // (65.1 · 85 + 90 · 15) / 100 = 68.8
    expect(report.score).toBe(69);
    expect(report.grade).toBe("D");
    expect(github.isDone()).toBe(true);
    expect(token.isDone()).toBe(true);
    expect(JSON.stringify(report)).not.toContain(INSTALLATION_TOKEN);
  }, 150_000);
});

describe("a repository whose default branch is master", () => {
  it("scans the remote's HEAD branch, never an assumed main", async () => {
    const id = repos["acme/master"]!.id;
    const res = await scan(id);
    expect(res.status).toBe(202);
    const report = await finished(id, res.body.id);
    expect(report.error).toBeNull();
    expect(report.status).toBe("completed");
    expect(report.metrics.documentation.details.exports).toMatchObject({
      total: 1,
      documented: 1,
    });
  }, 150_000);
});

describe("a Go repository", () => {
  it("measures statement coverage with go test", async () => {
    const res = await scan(repos["acme/go"]!.id);
    const report = await finished(repos["acme/go"]!.id, res.body.id, 300_000);
    expect(report.status).toBe("completed");
    expect(report.metrics.test_coverage).toMatchObject({ score: 50, measured: true });
    expect(report.metrics.test_coverage.details.languages[0]).toMatchObject({
      language: "go",
      covered: 1,
      total: 2,
      unit: "statements",
    });
    expect(report.metrics.documentation.details.exports).toMatchObject({ total: 2, documented: 1 });
    expect(report.metrics.documentation.score).toBe(35); // no README: 0.3 · 0 + 0.7 · 50
    expect(report.metrics.dependency_freshness).toMatchObject({ score: null, measured: true });
    expect(report.metrics.security).toMatchObject({ score: 100, measured: true });
    expect(report.metrics.tech_debt.score).toBe(100);
    // (50·25 + 100·25 + 100·15 + 35·10) / 75 = 74.7
    expect(report.score).toBe(75);
    expect(report.grade).toBe("C");
  }, 320_000);
});

describe("a Python repository", () => {
  it("measures coverage with coverage.py around pytest (estimates, and says so, without it)", async () => {
    const res = await scan(repos["acme/py"]!.id);
    const report = await finished(repos["acme/py"]!.id, res.body.id);
    expect(report.status).toBe("completed");
    const coverage = report.metrics.test_coverage;
    if (coveragePy) {
      // pkg/calc.py: 4 statements (the docstring is not one); the test runs add: 3.
      expect(coverage).toMatchObject({ measured: true, score: 75 });
      expect(coverage.details.languages[0]).toMatchObject({
        method: "coverage.py around pytest",
        covered: 3,
        total: 4,
        unit: "statements",
        tests_passed: true,
      });
    } else {
      expect(coverage.measured).toBe(false);
      expect(coverage.score).toBe(60); // 3 test lines for 5 source lines
      expect(coverage.details.reason).toBe(
        "python: coverage.py and pytest are not installed on this worker (tried python3, /usr/bin/python3)",
      );
    }
    expect(report.metrics.dependency_freshness).toMatchObject({ score: 80, measured: true });
    expect(report.metrics.dependency_freshness.details.dependencies[0]).toMatchObject({
      ecosystem: "PyPI",
      name: "requests",
      latest: "2.31.0",
      status: "outdated",
      majors_behind: 0,
    });
    // One advisory from OSV; its severity is not in the batch answer (counted as unknown: 8).
    expect(report.metrics.security).toMatchObject({ score: 92, measured: true });
    expect(report.metrics.security.details.vulnerabilities.findings).toEqual([
      {
        ecosystem: "PyPI",
        package: "requests",
        version: "2.0.0",
        id: "GHSA-j8r2-6x86-q33q",
        severity: "unknown",
        title: "",
        url: "https://osv.dev/vulnerability/GHSA-j8r2-6x86-q33q",
      },
    ]);
    const osv = registry.requests.find((r) => r.url === "/v1/querybatch");
    expect(JSON.parse(osv!.body)).toEqual({
      queries: [{ package: { name: "requests", ecosystem: "PyPI" }, version: "2.0.0" }],
    });
  }, 150_000);
});

describe("unavailable sources and failures", () => {
  it("marks security unmeasured when the advisory source fails", async () => {
    const res = await scan(repos["acme/flaky"]!.id);
    const report = await finished(repos["acme/flaky"]!.id, res.body.id);
    expect(report.status).toBe("completed");
    expect(report.metrics.security.measured).toBe(false);
    expect(report.metrics.security.details.reason).toMatch(
      /^advisories unavailable: npm: 127\.0\.0\.1:\d+ answered 503$/,
    );
    expect(report.metrics.security.score).toBe(100);
    // No test script: coverage is an estimate (no test files at all: 0).
    expect(report.metrics.test_coverage).toMatchObject({ score: 0, measured: false });
    expect(report.metrics.test_coverage.details.reason).toBe(
      "javascript: package.json has no test script",
    );
  }, 150_000);

  it("fails a scan whose clone fails, with a readable error", async () => {
    const id = repos["acme/gone"]!.id;
    const res = await scan(id);
    expect(res.status).toBe(202);
    const report = await finished(id, res.body.id);
    expect(report).toMatchObject({ status: "failed", score: null, grade: null, metrics: null });
    expect(report.error).toMatch(/^git failed while cloning the repository: /);
    expect((await server.api("GET", `/health-reports/${id}`, { key })).status).toBe(404);
    const history = await server.api("GET", `/health-reports/${id}/history`, { key });
    expect(history.body.map((r: { id: string; status: string }) => [r.id, r.status])).toEqual([
      [report.id, "failed"],
    ]);
  }, 150_000);

  it("fails scans whose worker went away, and queues pending ones again", async () => {
    const { HealthReport } = server.service.db.models;
    const now = new Date();
    const base = {
      account_id: accountId,
      workspace_id: repos["acme/js"]!.workspace,
      repo_id: repos["acme/js"]!.id,
      attempts: 1,
      updated_at: now,
    };
    await HealthReport.collection.insertMany([
      {
        ...base,
        _id: "hr_stale_running",
        status: "running",
        created_at: new Date(now.getTime() - 3_600_000),
        heartbeat_at: new Date(now.getTime() - 600_000),
      },
      { ...base, _id: "hr_live_running", status: "running", created_at: now, heartbeat_at: now },
      {
        ...base,
        _id: "hr_old_pending",
        status: "pending",
        created_at: new Date(now.getTime() - 7_200_000),
        heartbeat_at: null,
      },
      { ...base, _id: "hr_new_pending", status: "pending", created_at: now, heartbeat_at: null },
    ] as never[]);
    const requeued: string[] = [];
    const outcome = await sweepHealthReports(server.service.db.models, {
      staleMs: 360_000,
      pendingMaxMs: 3_600_000,
      requeue: async (id) => void requeued.push(id),
      now,
    });
    expect(outcome.failed.sort()).toEqual(["hr_old_pending", "hr_stale_running"]);
    expect(requeued).toEqual(["hr_new_pending"]);
    const stale = await server.api(
      "GET",
      `/health-reports/${repos["acme/js"]!.id}/scans/hr_stale_running`,
      { key },
    );
    expect(stale.body.status).toBe("failed");
    expect(stale.body.error).toMatch(/^The worker running this scan stopped/);
    const live = await HealthReport.collection.findOne({ _id: "hr_live_running" as never });
    expect(live?.status).toBe("running");
    await HealthReport.collection.deleteMany({
      _id: { $in: ["hr_live_running", "hr_new_pending"] } as never,
    });

    // The history pages through finished reports, newest first.
    const history = `/health-reports/${repos["acme/js"]!.id}/history`;
    const all = await server.api("GET", history, { key });
    const ids = all.body.map((r: { id: string }) => r.id);
    expect(ids.slice(1)).toEqual(["hr_stale_running", "hr_old_pending"]);
    const first = await server.api("GET", `${history}?limit=1`, { key });
    expect(first.body.map((r: { id: string }) => r.id)).toEqual([ids[0]]);
    const next = await server.api("GET", `${history}?limit=1&before=${ids[0]}`, { key });
    expect(next.body.map((r: { id: string }) => r.id)).toEqual(["hr_stale_running"]);
    const unknown = await server.api("GET", `${history}?before=hr_nope`, { key });
    expect([unknown.status, unknown.body.error.details[0].path]).toEqual([400, "query.before"]);
  });
});

describe("requests", () => {
  it("asks for workspace_id when a repository name is in two workspaces", async () => {
    const made: string[] = [];
    for (const name of ["one", "two"]) {
      const ws = await server.api("POST", "/workspaces", {
        key,
        body: { name, repos: [{ name: "acme/twin", clone_url: fixtures[0]!.dir }] },
      });
      made.push(ws.body.id);
    }
    const ambiguous = await server.api("GET", "/health-reports/acme%2Ftwin", { key });
    expect(ambiguous.status).toBe(400);
    expect(ambiguous.body.error.details[0].path).toBe("query.workspace_id");
    const chosen = await server.api("GET", `/health-reports/acme%2Ftwin?workspace_id=${made[0]}`, {
      key,
    });
    expect([chosen.status, chosen.body.error.message]).toEqual([
      404,
      "No such finished health report for this repository.",
    ]);
  });

  it("documents the routes in the OpenAPI document", async () => {
    const doc = (await server.api("GET", "/openapi.json")).body;
    expect(Object.keys(doc.paths["/health-reports/{repo_id}/scan"].post.responses)).toContain(
      "202",
    );
    expect(doc.paths["/health-reports/{repo_id}/history"].get.responses["200"]).toBeDefined();
    expect(doc.components.schemas.HealthReport.properties.metrics).toBeDefined();
  });

  it("validates paths, queries and bodies", async () => {
    const id = repos["acme/js"]!.id;
    const badLimit = await server.api("GET", `/health-reports/${id}/history?limit=0`, { key });
    expect([badLimit.status, badLimit.body.error.code]).toEqual([400, "validation_failed"]);
    const unknownQuery = await server.api("GET", `/health-reports/${id}?color=red`, { key });
    expect(unknownQuery.status).toBe(400);
    const withBody = await server.api("POST", `/health-reports/${id}/scan`, {
      key,
      body: { x: 1 },
    });
    expect(withBody.status).toBe(400);
  });
});
