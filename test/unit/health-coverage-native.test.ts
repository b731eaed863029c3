/*
 * Coverage measured on small fixture repositories with the real tools: coverage.py around
 * pytest and unittest, and go test. Every figure comes from the tool's JSON report or
 * profile. The JavaScript runners: health-coverage-runners.test.ts (on every Node of the
 * matrix; nothing here depends on the Node that runs it).
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { afterAll, describe, expect, it, vi } from "vitest";
import { PYTHON_CANDIDATES } from "../../src/health/coverage.js";
import { SCAN_BUDGET_MS, scanFixture } from "../helpers/coverage-scan.js";
import type { GitFixture } from "../helpers/git-repo.js";

vi.setConfig({ testTimeout: SCAN_BUDGET_MS + 30_000 });
const exec = promisify(execFile);
const fixtures: GitFixture[] = [];
afterAll(async () => {
  await Promise.all(fixtures.map((f) => f.remove()));
});

function scan(files: Record<string, string>, linkNodeModules: boolean) {
  return scanFixture(fixtures, files, linkNodeModules);
}

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
      // Counted per test from pytest's own report (verify/tests/).
      tests: { runner: "pytest", total: 2, passed: 2, failed: 0, skipped: 0 },
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
      tests: { runner: "go", total: 1, passed: 1, failed: 0, skipped: 0 },
    });
  });
});
