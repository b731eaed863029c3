import { describe, expect, it } from "vitest";
import { hasGeneratedHeader, mayHoldSecrets } from "../../src/indexer/skip.js";
import { coverageStep, scriptSteps } from "../../src/ecosystems/javascript.js";
import {
  estimateCoverage,
  findCoverageScript,
  parseCoveragePyJson,
  parseGoProfile,
  parseIstanbulSummary,
  withJsonSummary,
} from "../../src/health/coverage.js";
import { assessReadme, findExports, measureDocumentation } from "../../src/health/documentation.js";
import {
  isTestPath,
  languageOf,
  readRepoFiles,
  splitLines,
  type RepoFiles,
  type ScanFile,
} from "../../src/health/files.js";
import { compareWithLatest, majorsBehind } from "../../src/health/freshness.js";
import { gradeFor, overallScore } from "../../src/health/grading.js";
import { pep440Range, readManifests } from "../../src/health/manifests.js";
import { securityMetric } from "../../src/health/metrics/security.js";
import { findDangerousCalls, findSecrets, maskSecret } from "../../src/health/security.js";
import { findDuplication } from "../../src/health/duplication.js";
import { findFunctions, measureTechDebt } from "../../src/health/tech-debt.js";
import type { MetricResult, Metrics } from "../../src/health/types.js";
import { createGitRepo } from "../helpers/git-repo.js";

/** In-memory files classified the way readRepoFiles classifies them. */
function repoOf(files: Record<string, string>): RepoFiles {
  const list: ScanFile[] = Object.entries(files).map(([path, text]) => {
    const language = languageOf(path);
    const lines = splitLines(text);
    return {
      path,
      text,
      lines,
      language,
      test: isTestPath(path, language),
      generated: hasGeneratedHeader(Buffer.from(text)),
      credentials: mayHoldSecrets(path),
      codeLines: lines.filter((l) => l.trim() !== "").length,
    };
  });
  return { files: list, skipped: {}, truncated: false };
}

const metric = (score: number | null): MetricResult => ({
  score,
  summary: "",
  details: {},
  measured: score !== null,
});

// Built at run time so no scanner flags this test file itself.
const AWS_KEY = "AKIA" + "Z7Q3EXAMPLE4KEY2";
const GITHUB_TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0".repeat(2);

describe("grading", () => {
  it("follows the grade table of docs/api.md (The report) at every boundary", () => {
    const cases: Array<[number, string]> = [
      [100, "A+"],
      [97, "A+"],
      [96, "A"],
      [93, "A"],
      [92, "A-"],
      [90, "A-"],
      [89, "B+"],
      [87, "B+"],
      [86, "B"],
      [83, "B"],
      [82, "B-"],
      [80, "B-"],
      [79, "C+"],
      [77, "C+"],
      [76, "C"],
      [73, "C"],
      [72, "C-"],
      [70, "C-"],
      [69, "D"],
      [60, "D"],
      [59, "F"],
      [0, "F"],
    ];
    for (const [score, grade] of cases) expect([score, gradeFor(score)]).toEqual([score, grade]);
  });

  it("weighs the metrics with a score and renormalises over them", () => {
    const all: Metrics = {
      test_coverage: metric(80),
      security: metric(100),
      tech_debt: metric(60),
      ci_pass_rate: metric(40),
      documentation: metric(50),
      dependency_freshness: metric(90),
    };
    // (80·25 + 100·25 + 60·15 + 40·15 + 50·10 + 90·10) / 100
    expect(overallScore(all)).toBe(74);
    // Without CI and freshness: (80·25 + 100·25 + 60·15 + 50·10) / 75 = 78.67
    expect(
      overallScore({ ...all, ci_pass_rate: metric(null), dependency_freshness: metric(null) }),
    ).toBe(79);
    const none = Object.fromEntries(Object.keys(all).map((k) => [k, metric(null)])) as Metrics;
    expect(overallScore(none)).toBeNull();
  });
});

describe("coverage output parsers", () => {
  it("reads istanbul's json-summary per file, leaving test files out", () => {
    const root = "/work/repo";
    const entry = (covered: number, total: number) => ({
      lines: { total, covered, skipped: 0, pct: (100 * covered) / total },
    });
    const summary = {
      total: entry(22, 30),
      "/work/repo/src/a.js": entry(9, 10),
      "/work/repo/lib/b.js": entry(3, 10),
      "/work/repo/test/a.test.js": entry(10, 10),
      "/elsewhere/c.js": entry(0, 10),
    };
    expect(parseIstanbulSummary(summary, root)).toEqual({
      covered: 12,
      total: 20,
      files: 2,
      excluded_test_files: 1,
    });
    // A report with only the total (no file entries) gives the total.
    expect(parseIstanbulSummary({ total: entry(3, 4) }, root)).toEqual({
      covered: 3,
      total: 4,
      files: 0,
      excluded_test_files: 0,
    });
    expect(parseIstanbulSummary(undefined, root)).toBeNull();
    expect(parseIstanbulSummary({ total: entry(0, 0) }, root)).toBeNull();
  });

  it("reads coverage.py's JSON report, leaving test files out", () => {
    const report = {
      meta: { version: "6.5.0" },
      files: {
        "pkg/calc.py": { summary: { covered_lines: 5, num_statements: 6 } },
        "pkg/__init__.py": { summary: { covered_lines: 0, num_statements: 0 } },
        "tests/test_calc.py": { summary: { covered_lines: 7, num_statements: 7 } },
      },
      totals: { covered_lines: 12, num_statements: 13 },
    };
    expect(parseCoveragePyJson(report, "/r")).toEqual({
      covered: 5,
      total: 6,
      files: 2,
      excluded_test_files: 1,
    });
    expect(parseCoveragePyJson({}, "/r")).toBeNull();
  });

  it("finds a coverage script and adds a JSON reporter to its nyc or c8", () => {
    expect(
      findCoverageScript({
        test: "mocha",
        "test-ci": "nyc --reporter=lcovonly npm test",
        "test-cov": "nyc --exclude examples --reporter=html npm test",
        lint: "eslint .",
      }),
    ).toEqual({
      name: "test-cov",
      script: "nyc --exclude examples --reporter=html npm test",
      tool: "nyc",
    });
    expect(findCoverageScript({ "test:ci": "c8 -r lcov node --test" })?.tool).toBe("c8");
    expect(findCoverageScript({ coverage: "nyc report --reporter=lcov" })).toBeNull();
    expect(findCoverageScript({ test: "mocha", coverage: "open coverage/index.html" })).toBeNull();
    expect(withJsonSummary("nyc --reporter=html npm test", "nyc")).toEqual({
      command: "nyc --reporter=json-summary --reporter=html npm test",
      reportDir: "coverage",
    });
    expect(withJsonSummary("cross-env X=1 c8 --report-dir=out/cov mocha", "c8")).toEqual({
      command: "cross-env X=1 c8 --reporter=json-summary --report-dir=out/cov mocha",
      reportDir: "out/cov",
    });
  });

  it("splits a test script into its steps and finds the coverage tool's step", () => {
    // dayjs' shape: time-zone runs, then jest with coverage and a quoted JSON threshold.
    const dayjs =
      'cross-env TZ=Pacific/Auckland npm run test-tz && npm run test-tz; jest --coverage --coverageThreshold="{ \\"global\\": { \\"lines\\": 100} }"';
    expect(scriptSteps(dayjs)).toEqual([
      "cross-env TZ=Pacific/Auckland npm run test-tz",
      "npm run test-tz",
      'jest --coverage --coverageThreshold="{ \\"global\\": { \\"lines\\": 100} }"',
    ]);
    expect(scriptSteps("echo 'a && b' && (cd x && jest) || true")).toEqual([
      "echo 'a && b'",
      "(cd x && jest) || true",
    ]);
    const jest = /(^|[\s;&|(/])jest(?=\s|$)/;
    expect(coverageStep(dayjs, jest)).toMatch(/^jest --coverage /);
    expect(coverageStep("jest && eslint .", jest)).toBe("jest");
    expect(coverageStep("jest --ci", jest)).toBeNull(); // one step: npm test reaches it
    expect(coverageStep("tsc && mocha", jest)).toBeNull();
  });

  it("counts Go cover-profile statements once per block", () => {
    const profile = [
      "mode: set",
      "example.com/m/calc/calc.go:4.24,6.2 1 1",
      "example.com/m/calc/calc.go:8.24,10.2 2 0",
      "example.com/m/calc/calc.go:8.24,10.2 2 1",
      "example.com/m/util/util.go:3.23,5.2 1 0",
    ].join("\n");
    const { files } = parseGoProfile(profile);
    expect(Object.fromEntries(files)).toEqual({
      "example.com/m/calc/calc.go": { covered: 3, total: 3 },
      "example.com/m/util/util.go": { covered: 0, total: 1 },
    });
  });

  it("estimates from the ratio of test lines to source lines, capped", () => {
    expect(estimateCoverage(30, 100)).toBe(30);
    expect(estimateCoverage(500, 100)).toBe(90);
    expect(estimateCoverage(0, 100)).toBe(0);
    expect(estimateCoverage(10, 0)).toBe(0);
  });
});

describe("tech debt", () => {
  it("counts debt markers in comments only", async () => {
    const repo = repoOf({
      "src/a.js": [
        "// TODO: one",
        "const TODO_LIST = [];",
        'const label = "FIXME later";',
        "/* HACK: two */",
        " * XXX three",
        "x(); // FIXME four",
      ].join("\n"),
      "src/b.py": "# TODO five\nvalue = 'TODO not me'\n",
    });
    const result = await measureTechDebt(repo);
    const markers = result.details.markers as { total: number; by_kind: Record<string, number> };
    expect(markers.total).toBe(5);
    expect(markers.by_kind).toEqual({ TODO: 2, FIXME: 1, HACK: 1, XXX: 1 });
    expect(result.measured).toBe(true);
  });

  it("measures function lengths in JavaScript, Python and Go", () => {
    const body = (n: number, indent: string) =>
      Array.from({ length: n }, (_, i) => `${indent}v${i} = ${i}`).join("\n");
    const js = repoOf({
      "a.ts": [
        "export function long(a: number): number {",
        body(85, "  "),
        "  return a;",
        "}",
        "const short = (x) => {",
        "  return x;",
        "};",
        "const inline = (x) => x + 1;",
      ].join("\n"),
    }).files[0]!;
    expect(findFunctions(js).map((f) => [f.name, f.lines])).toEqual([
      ["long", 88],
      ["short", 3],
    ]);
    const py = repoOf({
      "a.py": [
        "def outer():",
        body(3, "    "),
        "",
        "    return 1",
        "",
        "class C:",
        "    def m(self):",
        "        pass",
      ].join("\n"),
    }).files[0]!;
    expect(findFunctions(py).map((f) => [f.name, f.lines])).toEqual([
      ["outer", 6],
      ["m", 2],
    ]);
    const go = repoOf({
      "a.go": [
        "func (s *S) Run() error {",
        "\tif x { return nil }",
        '\ts := "}"',
        "\treturn nil",
        "}",
      ].join("\n"),
    }).files[0]!;
    expect(findFunctions(go).map((f) => [f.name, f.lines])).toEqual([["Run", 5]]);
  });

  it("finds duplicated blocks with jscpd and scores the penalties", async () => {
    const block = Array.from(
      { length: 8 },
      (_, i) => `total = total + values[${i}] * weight${i};`,
    ).join("\n");
    const repo = repoOf({
      "src/a.js": `${block}\nexport const a = 1;\n`,
      "src/b.js": `export const b = 2;\n${block}\n`,
      "src/c.js": "export const c = 3;\nexport const d = 4;\n",
    });
    const dup = await findDuplication(repo.files);
    // c.js is under jscpd's 5-line minimum; a.js and b.js share the 8-line block, which
    // jscpd counts once: 7 of the 18 lines of the files it compared (its line span).
    expect(dup).toMatchObject({ lines: 18, duplicatedLines: 7, percent: 38.89, sources: 2 });
    expect(dup.blockCount).toBe(1);
    expect(dup.blocks[0]).toEqual({
      path: "src/a.js",
      line: 1,
      lines: 8,
      duplicate_of: { path: "src/b.js", line: 2 },
    });
    const result = await measureTechDebt(repo);
    // 38.89% duplicated → penalty capped at 30; no other penalty.
    expect(result.score).toBe(70);
  });

  it("leaves test files out of duplication and long-file counts", async () => {
    const block = Array.from(
      { length: 8 },
      (_, i) => `expect(parse(input${i})).toEqual(output${i});`,
    ).join("\n");
    const repo = repoOf({
      "test/a.test.js": block,
      "test/b.test.js": block,
      "src/x.js": "export const x = 1;\n",
    });
    expect((await measureTechDebt(repo)).score).toBe(100);
  });
});

describe("security", () => {
  it("finds committed secrets and keeps only masked previews", () => {
    const repo = repoOf({
      "src/config.js": `export const key = "${AWS_KEY}";\n`,
      "deploy/id_rsa":
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n",
      "scripts/push.sh": `curl -H "Authorization: token ${GITHUB_TOKEN}" https://api.github.com\n`,
      "src/settings.py": 'API_KEY = "q8Zr2LmX0vT4pW9sK7dN"\npassword = "your-password-here-123"\n',
      ".env": "DATABASE_URL=postgres://u:p@h/db\n",
      ".env.example": "DATABASE_URL=\n",
    });
    const { secrets, envFiles } = findSecrets(repo);
    // The placeholder password on settings.py line 2 and the URL in .env are not secrets.
    expect(secrets.map((s) => [s.path, s.line, s.kind])).toEqual([
      ["src/config.js", 1, "aws_access_key_id"],
      ["deploy/id_rsa", 1, "private_key"],
      ["scripts/push.sh", 1, "github_token"],
      ["src/settings.py", 1, "secret_assignment"],
    ]);
    expect(envFiles.map((f) => [f.path, f.kind])).toEqual([[".env", "env_file"]]);
    const stored = JSON.stringify({ secrets, envFiles });
    for (const value of [
      AWS_KEY,
      GITHUB_TOKEN,
      "q8Zr2LmX0vT4pW9sK7dN",
      "b3BlbnNzaC1rZXktdjEAAAAA",
      "postgres://",
    ])
      expect(stored).not.toContain(value);
    expect(maskSecret(AWS_KEY)).toBe("AKIA… (20 characters)");
  });

  it("finds dangerous calls in code, not in comments or tests", () => {
    const repo = repoOf({
      "src/run.js": [
        "eval(userInput);",
        "// eval(x) in a comment",
        "exec(`git log ${branch}`);",
        "const agent = new https.Agent({ rejectUnauthorized: false });",
        "obj.evaluate(x);",
      ].join("\n"),
      "src/tool.py":
        'subprocess.run(cmd, shell=True)\nrequests.get(url, verify=False)\nos.system(f"rm {path}")\n',
      "main.go":
        'cfg := &tls.Config{InsecureSkipVerify: true}\nexec.Command("sh", "-c", fmt.Sprintf("ls %s", dir))\n',
      "test/run.test.js": "eval(code);\n",
    });
    expect(findDangerousCalls(repo).map((c) => [c.path, c.line, c.kind])).toEqual([
      ["src/run.js", 1, "eval"],
      ["src/run.js", 3, "shell_interpolation"],
      ["src/run.js", 4, "tls_verification_disabled"],
      ["src/tool.py", 1, "shell_true"],
      ["src/tool.py", 2, "tls_verification_disabled"],
      ["src/tool.py", 3, "shell_interpolation"],
      ["main.go", 1, "tls_verification_disabled"],
      ["main.go", 2, "shell_interpolation"],
    ]);
  });

  it("scores findings and says when advisories were unavailable", () => {
    const repo = repoOf({ "src/a.js": `const k = "${AWS_KEY}";\neval(x);\n` });
    const available = securityMetric(repo, {
      checks: [{ ecosystem: "npm", source: "s", available: true, packages_checked: 3 }],
      vulnerabilities: [
        {
          ecosystem: "npm",
          package: "p",
          version: "1.0.0",
          id: "1",
          severity: "high",
          title: "",
          url: null,
        },
      ],
      unpinned: 0,
    });
    expect(available.score).toBe(100 - 25 - 10 - 15);
    expect(available.measured).toBe(true);
    const unavailable = securityMetric(repo, {
      checks: [
        {
          ecosystem: "npm",
          source: "s",
          available: false,
          reason: "registry.npmjs.org is unreachable",
          packages_checked: 0,
        },
      ],
      vulnerabilities: [],
      unpinned: 0,
    });
    expect(unavailable.measured).toBe(false);
    expect(unavailable.score).toBe(65);
    expect(unavailable.details.reason).toBe(
      "advisories unavailable: npm: registry.npmjs.org is unreachable",
    );
  });

  it("reads credential files the index leaves out, and skips vendored code", async () => {
    const repo = await createGitRepo({
      ".env": "TOKEN=abc\n",
      "node_modules/x/index.js": "eval(1)\n",
      "src/a.js": "export const a = 1;\n",
    });
    try {
      const files = await readRepoFiles(repo.dir);
      expect(files.files.map((f) => f.path)).toEqual([".env", "src/a.js"]);
      expect(files.files[0]!.credentials).toBe(true);
    } finally {
      await repo.remove();
    }
  });
});

describe("documentation", () => {
  it("scores a README by presence, length, headings and usage", () => {
    expect(assessReadme(repoOf({ "src/a.js": "" })).score).toBe(0);
    const words = Array.from({ length: 150 }, (_, i) => `word${i}`).join(" ");
    const readme = assessReadme(
      repoOf({ "README.md": `# Title\n\n${words}\n\n## Usage\n\n\`\`\`sh\nnpm i\n\`\`\`\n` }),
    );
    // 150 words + Title, Usage, sh, npm, i → 20 + 50·155/300 + 15 + 15
    expect(readme.words).toBe(155);
    expect(readme.score).toBe(Math.round((20 + (50 * 155) / 300 + 15 + 15) * 10) / 10);
  });

  it("counts documented public symbols in TypeScript, Python and Go with real parsers", async () => {
    const repo = repoOf({
      "src/a.ts": [
        "/** Documented. */",
        "export function one() {}",
        "export const two = 2;",
        "/**",
        " * Documented class.",
        " */",
        "@decorator()",
        "export class Three {",
        "  /** Documented method. */",
        "  run() {}",
        "  stop() {}",
        "  private hidden() {}",
        "}",
        "/* not a doc comment */",
        "export interface Four {}",
        "/** @internal */",
        "export function internalOnly() {}",
        "function local() {}",
        "/** Re-exported local. */",
        "function five() {}",
        "export { five, local as six };",
        'export * from "./other.js";',
        "export function seven(a: string): string;",
        "export function seven(a: number): number;",
        "/** Overloads documented on the implementation. */",
        "export function seven(a: unknown) { return a; }",
      ].join("\n"),
      "pkg/mod.py": [
        "def public():",
        '    """Doc."""',
        "",
        "def other(",
        "    a,",
        "):",
        "    return a",
        "",
        "def _private():",
        "    pass",
        "",
        "class Thing:",
        "    '''Doc.'''",
        "    def method(self):",
        "        pass",
        "    def _helper(self):",
        "        pass",
        "",
      ].join("\n"),
      "pkg/_internal.py": "def hidden():\n    pass\n",
      "lib.go": [
        "package lib",
        "",
        "// Exported does things.",
        "func Exported() {}",
        "",
        "func Bare() {}",
        "func lower() {}",
        "",
        "type T struct{}",
        "",
        "// Limits of the thing.",
        "const (",
        "\tMax = 10",
        "\tMin = 1",
        ")",
        "",
        "// Run runs.",
        "func (t *T) Run() {}",
        "func (t *T) Stop() {}",
        "",
      ].join("\n"),
      "internal/x/x.go": "package x\n\nfunc Hidden() {}\n",
      "src/a.test.ts": "export function helper() {}\n",
      "examples/demo.js": "exports.demo = function demo() {};\n",
      "test/fixtures/f.js": "exports.f = function f() {};\n",
      "bench/b.ts": "export function b() {}\n",
    });
    const scan = await findExports(repo);
    expect(scan.readers).toEqual({
      javascript: "TypeScript compiler API (JSDoc)",
      python: "Python ast (docstrings)",
      go: "go/ast (doc comments)",
    });
    const found = scan.symbols.map((e) => [e.path, e.name, e.documented]);
    expect(found).toEqual([
      ["lib.go", "Exported", true],
      ["lib.go", "Bare", false],
      ["lib.go", "T", false],
      ["lib.go", "Max", true],
      ["lib.go", "Min", true],
      ["lib.go", "T.Run", true],
      ["lib.go", "T.Stop", false],
      ["pkg/mod.py", "public", true],
      ["pkg/mod.py", "other", false],
      ["pkg/mod.py", "Thing", true],
      ["pkg/mod.py", "Thing.method", false],
      ["src/a.ts", "one", true],
      ["src/a.ts", "two", false],
      ["src/a.ts", "Three", true],
      ["src/a.ts", "Three.run", true],
      ["src/a.ts", "Three.stop", false],
      ["src/a.ts", "Four", false],
      ["src/a.ts", "five", true],
      ["src/a.ts", "six", false],
      ["src/a.ts", "seven", true],
    ]);
    const result = await measureDocumentation(repo);
    // No README: 70% of the 11 documented out of 20.
    expect(result.score).toBe(Math.round(0.7 * ((100 * 11) / 20) * 10) / 10);
  });

  it("leaves root tests, tsd type tests, benchmarks and tool configs out of the API", async () => {
    // p-limit's and dayjs' shapes.
    expect(isTestPath("test.js", "javascript")).toBe(true);
    expect(isTestPath("index.test-d.ts", "typescript")).toBe(true);
    expect(isTestPath("lib/test.js", "javascript")).toBe(false); // a module named test
    const scan = await findExports(
      repoOf({
        "index.js": "/** Limits. */\nexport default function pLimit() {}\n",
        "test.js": "export function helper() {}\n",
        "index.test-d.ts": "export const typed = 1;\n",
        "benchmark.js": "export function run() {}\n",
        "karma.sauce.conf.js": "module.exports = function (config) {};\n",
      }),
    );
    expect(scan.symbols.map((s) => [s.path, s.name])).toEqual([["index.js", "pLimit"]]);
  });

  it("reads CommonJS exports the way express writes them", async () => {
    const repo = repoOf({
      "lib/response.js": [
        "'use strict';",
        "var http = require('node:http');",
        "var res = Object.create(http.ServerResponse.prototype);",
        "module.exports = res;",
        "",
        "/**",
        " * Set status `code`.",
        " *",
        " * @param {Number} code",
        " * @return {ServerResponse}",
        " * @public",
        " */",
        "res.status = function status(code) {",
        "  this.statusCode = code;",
        "  return this;",
        "};",
        "",
        "res.links = function(links) {};",
        "",
        "/**",
        " * Header getter.",
        " */",
        "res.get = res.header = function header(field) {};",
        "",
        "/**",
        " * Helper.",
        " * @private",
        " */",
        "res.helper = function helper() {};",
        "res._internal = function () {};",
        "",
        "/**",
        " * Protocol.",
        " */",
        "defineGetter(res, 'protocol', function protocol() {});",
      ].join("\n"),
      "lib/express.js": [
        "var proto = require('./application');",
        "/**",
        " * Expose `createApplication()`.",
        " */",
        "exports = module.exports = createApplication;",
        "/**",
        " * Create an express application.",
        " */",
        "function createApplication() {}",
        "exports.application = proto;",
        "exports.json = require('body-parser').json;",
        "exports.query = function query(options) {};",
      ].join("\n"),
      "lib/view.js": [
        "module.exports = View;",
        "/** Initialize a new `View`. */",
        "function View(name) {}",
        "/** Lookup view by the given `name`. */",
        "View.prototype.lookup = function lookup(name) {};",
        "View.prototype.render = function render(options, callback) {};",
      ].join("\n"),
      "lib/utils.js": [
        "module.exports = {",
        "  /** Documented. */",
        "  one: function () {},",
        "  two,",
        "};",
        "/** Two's doc. */",
        "function two() {}",
      ].join("\n"),
      "examples/hello/index.js": "var app = module.exports = express();\napp.get('/', f);\n",
    });
    const found = (await findExports(repo)).symbols.map((e) => [e.path, e.name, e.documented]);
    expect(found).toEqual([
      ["lib/express.js", "createApplication", true],
      ["lib/express.js", "query", false],
      ["lib/response.js", "res", false],
      ["lib/response.js", "res.status", true],
      ["lib/response.js", "res.links", false],
      ["lib/response.js", "res.get", true], // res.header is the same function: one symbol
      ["lib/response.js", "res.protocol", true],
      ["lib/utils.js", "one", true],
      ["lib/utils.js", "two", true],
      ["lib/view.js", "View", true],
      ["lib/view.js", "View.lookup", true],
      ["lib/view.js", "View.render", false],
    ]);
  });

  it("documents a member that implements a documented member of an interface imported from another file", async () => {
    const repo = repoOf({
      "src/types.ts": [
        "export interface Shape {",
        "  /** The area. */",
        "  area(): number;",
        "  name(): string;",
        "}",
      ].join("\n"),
      "src/square.ts": [
        'import { Shape as Base } from "./types.js";',
        'import { Other } from "some-package";',
        "/** A square. */",
        "export class Square implements Base {",
        "  area() { return 1; }",
        "  name() { return 'square'; }",
        "}",
        "/** A circle. */",
        "export class Circle implements Other {",
        "  area() { return 3; }",
        "}",
      ].join("\n"),
    });
    const found = (await findExports(repo)).symbols
      .filter((e) => e.path === "src/square.ts")
      .map((e) => [e.name, e.documented]);
    expect(found).toEqual([
      ["Square", true],
      ["Square.area", true],
      ["Square.name", false],
      ["Circle", true],
      ["Circle.area", false], // a package's types are not read (no type checker)
    ]);
  });
});

describe("dependencies", () => {
  it("turns PEP 440 specifiers into semver ranges", () => {
    expect(pep440Range("==2.0.0")).toEqual({ range: "2.0.0", exact: "2.0.0" });
    expect(pep440Range(">=1.2,<2")?.range).toBe(">=1.2.0 <2.0.0");
    expect(pep440Range("~=1.4")?.range).toBe(">=1.4.0 <2.0.0");
    expect(pep440Range("~=1.4.2")?.range).toBe(">=1.4.2 <1.5.0");
    expect(pep440Range("==1.*")?.range).toBe(">=1.0.0 <2.0.0-0");
    expect(pep440Range("==1.4.*")?.range).toBe(">=1.4.0 <1.5.0-0");
    expect(pep440Range("")).toEqual({ range: "*", exact: null });
    expect(pep440Range("@ git+https://x")).toBeNull();
  });

  it("compares declared ranges with the latest and counts majors behind", () => {
    const dep = (range: string) => ({
      ecosystem: "npm" as const,
      name: "x",
      declared: range,
      range,
      exact: null,
      manifest: "package.json",
      dev: false,
    });
    expect(compareWithLatest(dep("^1.0.0"), "1.9.0")).toMatchObject({
      status: "up_to_date",
      score: 100,
    });
    expect(compareWithLatest(dep("1.2.0"), "1.3.0")).toMatchObject({
      status: "outdated",
      majors_behind: 0,
      score: 80,
    });
    expect(compareWithLatest(dep("^1.2.0"), "2.0.1")).toMatchObject({
      majors_behind: 1,
      score: 50,
    });
    expect(compareWithLatest(dep("^1.2.0"), "3.1.0")).toMatchObject({
      majors_behind: 2,
      score: 25,
    });
    expect(compareWithLatest(dep("^1.2.0"), "9.0.0")).toMatchObject({ majors_behind: 8, score: 0 });
    expect(majorsBehind("^0.3.0", "0.5.0")).toBe(1);
  });

  it("reads package.json with its lockfile, requirements and go.mod", async () => {
    const repo = await createGitRepo({
      "package.json": JSON.stringify({
        dependencies: { a: "^1.0.0", local: "file:../local" },
        devDependencies: { b: "~2.1.0" },
      }),
      "package-lock.json": JSON.stringify({
        lockfileVersion: 3,
        packages: {
          "": {},
          "node_modules/a": { version: "1.4.0" },
          "node_modules/a/node_modules/c": { version: "0.1.0" },
          "node_modules/b": { version: "2.1.3" },
        },
      }),
      "requirements.txt":
        "requests==2.0.0\nflask>=2.0  # web\n-r other.txt\ngit+https://example.com/x.git\n",
      "go.mod":
        "module example.com/m\n\ngo 1.21\n\nrequire (\n\tgithub.com/pkg/errors v0.9.1\n\tgolang.org/x/sys v0.1.0 // indirect\n)\n",
    });
    try {
      const manifests = await readManifests(repo.dir, await readRepoFiles(repo.dir));
      expect(
        manifests.dependencies.map((d) => [d.ecosystem, d.name, d.range, d.exact, d.dev]),
      ).toEqual([
        ["npm", "a", ">=1.0.0 <2.0.0-0", "1.4.0", false],
        ["npm", "b", ">=2.1.0 <2.2.0-0", "2.1.3", true],
        ["PyPI", "requests", "2.0.0", "2.0.0", false],
        ["PyPI", "flask", ">=2.0.0", null, false],
        ["Go", "github.com/pkg/errors", "0.9.1", "v0.9.1", false],
      ]);
      expect(Object.fromEntries([...manifests.npmLocked!].map(([k, v]) => [k, [...v]]))).toEqual({
        a: ["1.4.0"],
        c: ["0.1.0"],
        b: ["2.1.3"],
      });
      expect(manifests.skipped.map((s) => s.entry)).toEqual([
        "local",
        "git+https://example.com/x.git",
      ]);
    } finally {
      await repo.remove();
    }
  });
});
