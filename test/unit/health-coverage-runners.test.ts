/*
 * Coverage measured on small fixture repositories, one per test-runner family, with the
 * real runners: mocha, jest, vitest, ava and node --test (from this project's own
 * devDependencies, linked into the fixture as its node_modules, as an installed repository
 * has them), coverage.py around pytest and unittest, and go test. Every figure comes from
 * the tool's JSON report or profile, so it is the same on Node 20, 22 and 24.
 *
 * Source under test in every JavaScript fixture: three functions, the tests call two.
 * c8 (V8) counts every line of the file; istanbul (jest) and vitest's v8 provider count
 * statement lines, so the figures differ by tool and are fixed per tool here.
 */
import { execFile } from "node:child_process";
import { mkdir, readdir, symlink } from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { measureCoverage, PYTHON_CANDIDATES } from "../../src/health/coverage.js";
import { readRepoFiles } from "../../src/health/files.js";
import { configureSandbox } from "../../src/util/sandbox.js";
import { sandboxCache } from "../../src/util/sandbox-cache.js";
import { createGitRepo, type GitFixture } from "../helpers/git-repo.js";

const ROOT = path.resolve(import.meta.dirname, "../..");
// Each test runs a real runner: jest, vitest, pytest, or `go test`, which compiles the testing
// packages with coverage when the build cache is cold (~20 s idle, well over a minute on a
// loaded 2-core machine). The scan's own budget runs out first, so a slow run fails with the
// tool's reason rather than a bare test timeout.
const SCAN_BUDGET_MS = 150_000;
vi.setConfig({ testTimeout: SCAN_BUDGET_MS + 30_000 });
const exec = promisify(execFile);
const fixtures: GitFixture[] = [];
beforeAll(() => {
  // The fixtures link node_modules to this checkout's: the sandbox shows it at that path
  // too (the service's own is otherwise only at /foreman/node_modules).
  configureSandbox({ readOnlyPaths: [path.join(ROOT, "node_modules")] });
});
afterAll(async () => {
  configureSandbox({});
  await Promise.all(fixtures.map((f) => f.remove()));
});

const CJS_SOURCE = [
  "function add(a, b) {",
  "  return a + b;",
  "}",
  "function sub(a, b) {",
  "  return a - b;",
  "}",
  "function mul(a, b) {",
  "  return a * b;",
  "}",
  "module.exports = { add, sub, mul };",
  "",
].join("\n");

const ESM_SOURCE = CJS_SOURCE.replace(
  "module.exports = { add, sub, mul };",
  "export { add, sub, mul };",
);

/**
 * The service's packages installed into `dir`'s node_modules as links, one per package: the
 * scan looks for a tool (`node_modules/.bin/c8`, `node_modules/@vitest/coverage-v8`) without
 * following a link on the way (util/workcopy-fs.ts), so node_modules, `.bin` and the scope
 * folders are real folders, as npm makes them.
 */
async function linkPackages(from: string, dir: string): Promise<void> {
  const to = path.join(dir, "node_modules");
  await mkdir(to);
  for (const entry of await readdir(from)) {
    if (entry !== ".bin" && !entry.startsWith("@")) {
      await symlink(path.join(from, entry), path.join(to, entry));
      continue;
    }
    await mkdir(path.join(to, entry));
    for (const inner of await readdir(path.join(from, entry)))
      await symlink(path.join(from, entry, inner), path.join(to, entry, inner));
  }
}

async function scan(files: Record<string, string>, linkNodeModules: boolean) {
  const fixture = await createGitRepo({ ".gitignore": "node_modules\n", ...files });
  fixtures.push(fixture);
  if (linkNodeModules) await linkPackages(path.join(ROOT, "node_modules"), fixture.dir);
  const repo = await readRepoFiles(fixture.dir);
  const result = await measureCoverage(repo, {
    root: fixture.dir,
    timeoutMs: SCAN_BUDGET_MS,
    // One package cache for these fixtures (as an account's repository has), kept between
    // runs: Go's build cache of the standard library is warm after the first.
    cache: await sandboxCache({ account: "test-coverage-runners", repo: "fixtures" }),
  });
  const languages = result.details.languages as Array<Record<string, unknown>>;
  return { result, language: languages[0]! };
}

function pkg(test: string, extra: Record<string, unknown> = {}): string {
  return JSON.stringify({ name: "fixture", version: "1.0.0", scripts: { test }, ...extra });
}

describe("JavaScript coverage by runner", () => {
  it("mocha under the service's c8", async () => {
    const { result, language } = await scan(
      {
        "package.json": pkg("mocha"),
        "src/math.js": CJS_SOURCE,
        "test/math.js": [
          'const assert = require("node:assert");',
          'const { add, sub } = require("../src/math.js");',
          'it("adds", () => assert.equal(add(1, 2), 3));',
          'it("subtracts", () => assert.equal(sub(3, 2), 1));',
        ].join("\n"),
      },
      true,
    );
    expect(language).toMatchObject({
      measured: true,
      method: "c8 around npm test",
      covered: 7,
      total: 10,
      unit: "lines",
      tests_passed: true,
    });
    expect(result.score).toBe(70);
  });

  it("node --test under the service's c8, test files left out", async () => {
    const { language } = await scan(
      {
        "package.json": pkg("node --test"),
        "src/math.js": CJS_SOURCE,
        "test/math.test.js": [
          'const test = require("node:test");',
          'const assert = require("node:assert");',
          'const { add, sub } = require("../src/math.js");',
          'test("adds", () => assert.equal(add(1, 2), 3));',
          'test("subtracts", () => assert.equal(sub(3, 2), 1));',
        ].join("\n"),
      },
      true,
    );
    expect(language).toMatchObject({ measured: true, covered: 7, total: 10, percent: 70 });
  });

  it("ava under the service's c8", async () => {
    const { language } = await scan(
      {
        "package.json": pkg("ava"),
        "src/math.js": CJS_SOURCE,
        "test/math.test.js": [
          'const test = require("ava");',
          'const { add, sub } = require("../src/math.js");',
          "test('adds', (t) => t.is(add(1, 2), 3));",
          "test('subtracts', (t) => t.is(sub(3, 2), 1));",
        ].join("\n"),
      },
      true,
    );
    expect(language).toMatchObject({
      measured: true,
      method: "c8 around npm test",
      covered: 7,
      total: 10,
    });
  });

  it("jest with its own --coverage (istanbul counts statement lines)", async () => {
    const { language } = await scan(
      {
        "package.json": pkg("jest"),
        "src/math.js": CJS_SOURCE,
        "test/math.test.js": [
          'const { add, sub } = require("../src/math.js");',
          'test("adds", () => expect(add(1, 2)).toBe(3));',
          'test("subtracts", () => expect(sub(3, 2)).toBe(1));',
        ].join("\n"),
      },
      true,
    );
    expect(language).toMatchObject({
      measured: true,
      method: "jest --coverage",
      covered: 3,
      total: 4,
      percent: 75,
    });
  });

  it("vitest with its v8 provider when the repository has it", async () => {
    const { language } = await scan(
      {
        "package.json": pkg("vitest run", { type: "module" }),
        "src/math.js": ESM_SOURCE,
        "test/math.test.js": [
          'import { expect, test } from "vitest";',
          'import { add, sub } from "../src/math.js";',
          'test("adds", () => expect(add(1, 2)).toBe(3));',
          'test("subtracts", () => expect(sub(3, 2)).toBe(1));',
        ].join("\n"),
      },
      true,
    );
    // Vitest 4's v8 provider remaps to statement lines (its AST-aware remapping).
    expect(language).toMatchObject({
      measured: true,
      method: "vitest --coverage",
      covered: 2,
      total: 3,
      percent: 66.7,
    });
  });

  it("the repository's own nyc/c8 coverage script, with a JSON reporter added", async () => {
    const { language } = await scan(
      {
        "package.json": pkg("mocha", {
          scripts: { test: "mocha", "test-cov": "c8 --reporter=text npm test" },
        }),
        "src/math.js": CJS_SOURCE,
        "test/math.js": [
          'const assert = require("node:assert");',
          'const { add } = require("../src/math.js");',
          'it("adds", () => assert.equal(add(1, 2), 3));',
        ].join("\n"),
      },
      true,
    );
    expect(language).toMatchObject({
      measured: true,
      method: "the repository's coverage script `test-cov` (c8)",
      command: "c8 --reporter=json-summary --reporter=text npm test",
      covered: 4,
      total: 10,
    });
  });

  it("a failing test: mocha under c8 still writes its report, measured, tests failed", async () => {
    const { result, language } = await scan(
      {
        "package.json": pkg("mocha"),
        "src/math.js": CJS_SOURCE,
        "test/math.js": [
          'const assert = require("node:assert");',
          'const { add, sub } = require("../src/math.js");',
          'it("adds", () => assert.equal(add(1, 2), 3));',
          'it("subtracts, wrongly", () => assert.equal(sub(3, 2), 2));',
        ].join("\n"),
      },
      true,
    );
    expect(result.measured).toBe(true);
    expect(language).toMatchObject({ measured: true, covered: 7, total: 10, tests_passed: false });
    expect((language.notes as string[]).join(" ")).toMatch(/tests failed/);
  });

  it("a failing test in a step before jest (dayjs' shape): jest's step runs alone, measured", async () => {
    // `a && jest`: the failing first step stops the script before jest writes coverage.
    const { result, language } = await scan(
      {
        "package.json": pkg("jest test/zone.test.js --coverage=false && jest"),
        "src/math.js": CJS_SOURCE,
        "test/math.test.js": [
          'const { add, sub } = require("../src/math.js");',
          'test("adds", () => expect(add(1, 2)).toBe(3));',
          'test("subtracts", () => expect(sub(3, 2)).toBe(1));',
        ].join("\n"),
        "test/zone.test.js": 'test("depends on the time zone", () => expect(1).toBe(2));\n',
      },
      true,
    );
    expect(result.measured).toBe(true);
    expect(language).toMatchObject({
      measured: true,
      method: "jest --coverage",
      command:
        "jest --coverage --coverageReporters=json-summary --coverageDirectory=.foreman-coverage",
      covered: 3,
      total: 4,
      tests_passed: false,
    });
    expect((language.notes as string[]).join(" ")).toMatch(
      /failed .* before its coverage step wrote a report; the step `jest --coverage/,
    );
  });

  it("estimates, and says why, when the tests cannot run", async () => {
    const { result, language } = await scan(
      { "package.json": pkg("no-such-runner"), "src/math.js": CJS_SOURCE },
      true,
    );
    expect(result.measured).toBe(false);
    expect(language.measured).toBe(false);
    expect(String(language.reason)).toMatch(/wrote no coverage report/);
  });
});

async function pythonWithCoverage(modules: string): Promise<boolean> {
  for (const python of PYTHON_CANDIDATES) {
    const ok = await exec(python, ["-c", `import ${modules}`]).then(
      () => true,
      () => false,
    );
    if (ok) return true;
  }
  return false;
}

const PY_SOURCE = [
  "def add(a, b):",
  "    return a + b",
  "",
  "",
  "def sub(a, b):",
  "    return a - b",
  "",
  "",
  "def mul(a, b):",
  "    return a * b",
  "",
].join("\n");

describe("Python coverage with coverage.py", () => {
  it("around pytest: 5 of 6 statements", async () => {
    // Debian's python3-coverage and python3-pytest (see docs/operations.md).
    expect(await pythonWithCoverage("coverage, pytest")).toBe(true);
    const { language } = await scan(
      {
        "conftest.py": "",
        "pkg/__init__.py": "",
        "pkg/calc.py": PY_SOURCE,
        "tests/test_calc.py": [
          "import pytest",
          "from pkg.calc import add, sub",
          "",
          "def test_add():",
          "    assert add(1, 2) == 3",
          "",
          "def test_sub():",
          "    assert sub(3, 2) == 1",
          "",
        ].join("\n"),
      },
      false,
    );
    expect(language).toMatchObject({
      measured: true,
      method: "coverage.py around pytest",
      covered: 5,
      total: 6,
      unit: "statements",
      percent: 83.3,
      tests_passed: true,
    });
  });

  it("around unittest: 4 of 6 statements", async () => {
    expect(await pythonWithCoverage("coverage")).toBe(true);
    const { language } = await scan(
      {
        "pkg/__init__.py": "",
        "pkg/calc.py": PY_SOURCE,
        "tests/__init__.py": "",
        "tests/test_calc.py": [
          "import unittest",
          "from pkg.calc import add",
          "",
          "class CalcTest(unittest.TestCase):",
          "    def test_add(self):",
          "        self.assertEqual(add(1, 2), 3)",
          "",
        ].join("\n"),
      },
      false,
    );
    expect(language).toMatchObject({
      measured: true,
      method: "coverage.py around unittest",
      covered: 4,
      total: 6,
      tests_passed: true,
    });
  });
  it("around pytest named by tox.ini, a src layout put on PYTHONPATH: 5 of 6 statements", async () => {
    // cachetools' shape: no conftest.py, unittest-style tests that pytest runs (tox.ini's
    // deps and commands), the package under src/ (tox installs it; the scan cannot).
    expect(await pythonWithCoverage("coverage, pytest")).toBe(true);
    const { language } = await scan(
      {
        "tox.ini": [
          "[tox]",
          "envlist = py",
          "",
          "[testenv]",
          "deps =",
          "    pytest",
          "    pytest-cov",
          "commands =",
          "    py.test --cov=pkg {posargs}",
          "",
        ].join("\n"),
        "src/pkg/__init__.py": "",
        "src/pkg/calc.py": PY_SOURCE,
        "tests/__init__.py": "",
        "tests/test_calc.py": [
          "import os",
          "import unittest",
          "from pkg.calc import add, sub",
          "",
          "class CalcTest(unittest.TestCase):",
          "    def test_add(self):",
          "        self.assertEqual(add(1, 2), 3)",
          "",
          "    def test_sub(self):",
          "        os.chdir('tests')  # a relative PYTHONPATH entry must survive this",
          "        self.assertEqual(sub(3, 2), 1)",
          "",
        ].join("\n"),
      },
      false,
    );
    expect(language).toMatchObject({
      measured: true,
      method: "coverage.py around pytest",
      covered: 5,
      total: 6,
      unit: "statements",
      tests_passed: true,
    });
    expect(language.notes).toContain(
      "A src layout: src/ was put on PYTHONPATH in place of an install.",
    );
  });
});

describe("Go coverage with go test -coverprofile", () => {
  it("2 of 3 statements", async () => {
    const { language } = await scan(
      {
        "go.mod": "module example.com/calc\n\ngo 1.21\n",
        "calc.go": [
          "package calc",
          "",
          "func Add(a, b int) int { return a + b }",
          "",
          "func Sub(a, b int) int { return a - b }",
          "",
          "func Mul(a, b int) int { return a * b }",
          "",
        ].join("\n"),
        "calc_test.go": [
          "package calc",
          "",
          'import "testing"',
          "",
          "func TestAdd(t *testing.T) {",
          "\tif Add(1, 2) != 3 || Sub(3, 2) != 1 {",
          '\t\tt.Fatal("wrong")',
          "\t}",
          "}",
          "",
        ].join("\n"),
      },
      false,
    );
    expect(language).toMatchObject({
      measured: true,
      method: "go test -coverprofile",
      covered: 2,
      total: 3,
      unit: "statements",
    });
  });
});
