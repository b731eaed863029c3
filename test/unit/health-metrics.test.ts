import { describe, expect, it } from "vitest";
import { hasGeneratedHeader, mayHoldSecrets } from "../../src/indexer/skip.js";
import {
  countUncovered,
  estimateCoverage,
  parseGoProfile,
  parseIstanbul,
  parseNodeCoverage,
  parsePytestCov,
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
import { securityMetric } from "../../src/health/scanner.js";
import { findDangerousCalls, findSecrets, maskSecret } from "../../src/health/security.js";
import { findDuplication, findFunctions, measureTechDebt } from "../../src/health/tech-debt.js";
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
  it("follows SPEC §8's grade table at every boundary", () => {
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
  it("reads Node's test-runner table and its uncovered line ranges", () => {
    const output = [
      "# start of coverage report",
      "# ------------------------------------------------------------------",
      "# file              | line % | branch % | funcs % | uncovered lines",
      "# ------------------------------------------------------------------",
      "# src/math.js       |  60.87 |   100.00 |   50.00 | 13-18 21-23",
      "# test/math.test.js | 100.00 |   100.00 |  100.00 | ",
      "# ------------------------------------------------------------------",
      "# all files         |  73.53 |   100.00 |   66.67 |",
      "# end of coverage report",
    ].join("\n");
    const parsed = parseNodeCoverage(output);
    expect(parsed.all).toBe(73.53);
    expect(parsed.rows.map((r) => [r.file, r.linePercent])).toEqual([
      ["src/math.js", 60.87],
      ["test/math.test.js", 100],
    ]);
    expect(countUncovered(parsed.rows[0]!.uncovered)).toBe(9);
    expect(parseNodeCoverage("no report here")).toEqual({ rows: [], all: null });
  });

  it("reads istanbul's text summary (c8, jest, vitest) and its table", () => {
    const summary = [
      "=============================== Coverage summary ===============================",
      "Statements   : 81.25% ( 13/16 )",
      "Branches     : 50% ( 1/2 )",
      "Functions    : 66.66% ( 2/3 )",
      "Lines        : 85.71% ( 12/14 )",
    ].join("\n");
    expect(parseIstanbul(summary)).toEqual({ percent: 85.71, covered: 12, total: 14 });
    const table = [
      "----------|---------|----------|---------|---------|-------------------",
      "File      | % Stmts | % Branch | % Funcs | % Lines | Uncovered Line #s ",
      "----------|---------|----------|---------|---------|-------------------",
      "All files |   81.25 |       50 |   66.66 |   78.57 |                   ",
    ].join("\n");
    expect(parseIstanbul(table)).toEqual({ percent: 78.57, covered: null, total: null });
    expect(parseIstanbul("Tests: 3 passed")).toBeNull();
  });

  it("reads pytest-cov's terminal report without its TOTAL line", () => {
    const output = [
      "..                                                        [100%]",
      "---------- coverage: platform linux, python 3.11.7-final-0 ----------",
      "Name                 Stmts   Miss  Cover",
      "----------------------------------------",
      "pkg/__init__.py          0      0   100%",
      "pkg/calc.py             10      4    60%",
      "tests/test_calc.py       6      0   100%",
      "----------------------------------------",
      "TOTAL                   16      4    75%",
    ].join("\n");
    expect(parsePytestCov(output)).toEqual([
      { name: "pkg/__init__.py", statements: 0, missed: 0 },
      { name: "pkg/calc.py", statements: 10, missed: 4 },
      { name: "tests/test_calc.py", statements: 6, missed: 0 },
    ]);
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
  it("counts debt markers in comments only", () => {
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
    const result = measureTechDebt(repo);
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

  it("finds duplicated blocks across files and scores the penalties", () => {
    const block = Array.from(
      { length: 8 },
      (_, i) => `total = total + values[${i}] * weight${i};`,
    ).join("\n");
    const repo = repoOf({
      "src/a.js": `${block}\nexport const a = 1;\n`,
      "src/b.js": `export const b = 2;\n${block}\n`,
      "src/c.js": "export const c = 3;\nexport const d = 4;\n",
    });
    const dup = findDuplication(repo.files);
    expect(dup.duplicatedLines).toBe(16);
    expect(dup.significantLines).toBe(20);
    expect(dup.blockCount).toBe(1);
    expect(dup.blocks[0]).toEqual({
      path: "src/b.js",
      line: 2,
      duplicate_of: { path: "src/a.js", line: 1 },
    });
    const result = measureTechDebt(repo);
    // 16 of 20 lines duplicated = 80% → penalty capped at 30; no other penalty.
    expect(result.score).toBe(70);
  });

  it("leaves test files out of duplication and long-file counts", () => {
    const block = Array.from(
      { length: 8 },
      (_, i) => `expect(parse(input${i})).toEqual(output${i});`,
    ).join("\n");
    const repo = repoOf({
      "test/a.test.js": block,
      "test/b.test.js": block,
      "src/x.js": "export const x = 1;\n",
    });
    expect(measureTechDebt(repo).score).toBe(100);
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

  it("counts documented exports in JavaScript, Python and Go", () => {
    const repo = repoOf({
      "src/a.ts": [
        "/** Documented. */",
        "export function one() {}",
        "export const two = 2;",
        "/**",
        " * Documented class.",
        " */",
        "@decorator()",
        "export class Three {}",
        "/* not a doc comment */",
        "export interface Four {}",
      ].join("\n"),
      "pkg/mod.py":
        "def public():\n    \"\"\"Doc.\"\"\"\n\ndef other(\n    a,\n):\n    return a\n\ndef _private():\n    pass\n\nclass Thing:\n    '''Doc.'''\n",
      "lib.go":
        "// Exported does things.\nfunc Exported() {}\n\nfunc Bare() {}\nfunc lower() {}\ntype T struct{}\n",
      "src/a.test.ts": "export function helper() {}\n",
    });
    const found = findExports(repo).map((e) => [e.path, e.name, e.documented]);
    expect(found).toEqual([
      ["src/a.ts", "one", true],
      ["src/a.ts", "two", false],
      ["src/a.ts", "Three", true],
      ["src/a.ts", "Four", false],
      ["pkg/mod.py", "public", true],
      ["pkg/mod.py", "other", false],
      ["pkg/mod.py", "Thing", true],
      ["lib.go", "Exported", true],
      ["lib.go", "Bare", false],
      ["lib.go", "T", false],
    ]);
    const result = measureDocumentation(repo);
    expect(result.score).toBe(Math.round(0.7 * 50 * 10) / 10); // no README
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
