// test-matrix: runtime-sensitive: V8's coverage (c8, vitest's v8 provider) differs by the V8 of
// this Node; the runners themselves run on it.
/*
 * Coverage measured on small fixture repositories, one per JavaScript test-runner family,
 * with the real runners: mocha, jest, vitest, ava and node --test (from this project's own
 * devDependencies, linked into the fixture as its node_modules, as an installed repository
 * has them). Every figure comes from the tool's JSON report, so it is the same on Node 20,
 * 22 and 24. Python and Go: health-coverage-native.test.ts.
 *
 * Source under test in every JavaScript fixture: three functions, the tests call two.
 * c8 (V8) counts every line of the file; istanbul (jest) and vitest's v8 provider count
 * statement lines, so the figures differ by tool and are fixed per tool here.
 */
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { configureSandbox } from "../../src/sandbox/index.js";
import { ROOT, SCAN_BUDGET_MS, scanFixture } from "../helpers/coverage-scan.js";
import type { GitFixture } from "../helpers/git-repo.js";

vi.setConfig({ testTimeout: SCAN_BUDGET_MS + 30_000 });
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

function scan(files: Record<string, string>, linkNodeModules: boolean) {
  return scanFixture(fixtures, files, linkNodeModules);
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
