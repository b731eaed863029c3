import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { StageError } from "../../src/pipeline/errors.js";
import {
  detectChecks,
  NOTHING_FOUND_NOTE,
  type Check,
  type VerifyPlan,
} from "../../src/verify/checks.js";
import { detectSetup } from "../../src/verify/setup.js";
import { failureReport, runChecks, summarizeChecks, type CheckKind } from "../../src/verify/run.js";

let dir: string;

beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "foreman-verify-test-"));
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function write(rel: string, content: string): Promise<void> {
  const file = path.join(dir, rel);
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(file, content);
}

async function writeJson(rel: string, value: unknown): Promise<void> {
  await write(rel, JSON.stringify(value, null, 2));
}

/** The StageError `promise` rejects with (failing the test if it resolves or throws another). */
async function stageError(promise: Promise<unknown>): Promise<StageError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(StageError);
  return error as StageError;
}

describe("detectChecks: repository config", () => {
  it("takes verify and install lists of strings and {name, run}, and nothing else", async () => {
    const long = `echo ${"x".repeat(80)}`;
    await write(
      ".github/foreman.yml",
      [
        "install:",
        "  - npm ci",
        "verify:",
        "  - npm run build",
        "  - name: unit tests",
        "    run: npm test -- --run",
        "  - run: make check",
        `  - ${long}`,
        "other_setting: true",
      ].join("\n"),
    );
    // Would be detected without the config; the verify list must win alone.
    await writeJson("package.json", { scripts: { test: "vitest" } });
    await write("go.mod", "module x\n");

    const plan = await detectChecks(dir);
    expect(plan.source).toBe(".github/foreman.yml");
    // Installs are the setup step's (verify/setup.ts), never a check's.
    expect(plan.install).toEqual([]);
    expect((await detectSetup(dir)).steps).toEqual([{ name: "npm ci", command: "npm ci" }]);
    expect(plan.checks).toEqual([
      { name: "npm run build", command: "npm run build" },
      { name: "unit tests", command: "npm test -- --run" },
      { name: "make check", command: "make check" },
      { name: `${long.slice(0, 59)}…`, command: long },
    ]);
    expect(plan.checks[3]?.name).toHaveLength(60);
  });

  it("reads .github/foreman.yaml and custom config names", async () => {
    await write(".github/foreman.yaml", "verify: [cargo test]\n");
    expect((await detectChecks(dir)).checks).toEqual([
      { name: "cargo test", command: "cargo test" },
    ]);

    await write("ci/checks.yml", "verify:\n  - go vet ./...\n");
    const custom = await detectChecks(dir, { configNames: ["missing.yml", "ci/checks.yml"] });
    expect(custom.source).toBe("ci/checks.yml");
    expect(custom.checks).toEqual([{ name: "go vet ./...", command: "go vet ./..." }]);
  });

  it("treats an empty verify list as no checks, without detecting others", async () => {
    await write(".github/foreman.yml", "verify: []\ninstall: [npm ci]\n");
    await writeJson("package.json", { scripts: { test: "vitest" } });
    const plan = await detectChecks(dir);
    expect(plan).toEqual({
      source: ".github/foreman.yml",
      install: [],
      checks: [],
      notes: [".github/foreman.yml has an empty verify list: no checks are run."],
    });

    // `verify:` with nothing after it reads as null: the same empty list.
    await write(".github/foreman.yml", "verify:\n");
    expect(await detectChecks(dir)).toMatchObject({ source: ".github/foreman.yml", checks: [] });
  });

  it("uses a config install list without verify for the detected checks", async () => {
    await write(".github/foreman.yml", "install:\n  - run: ./setup.sh\n    name: setup\n");
    await writeJson("package.json", { scripts: { test: "jest" }, devDependencies: { jest: "1" } });
    const plan = await detectChecks(dir);
    expect(plan.source).toBe("package.json");
    expect(plan.install).toEqual([]);
    expect(plan.checks).toEqual([{ name: "test", command: "npm run test" }]);
    const setup = await detectSetup(dir);
    expect(setup.source).toBe(".github/foreman.yml");
    expect(setup.steps).toEqual([{ name: "setup", command: "./setup.sh" }]);
    expect(setup.notes).toEqual(["Setup steps from .github/foreman.yml (install:)."]);

    // setup: wins over install:, and the lockfile still keys the cache.
    await write(".github/foreman.yml", "setup: [npm ci --ignore-scripts]\ninstall: [./setup.sh]\n");
    await write("package-lock.json", "{}");
    const own = await detectSetup(dir);
    expect(own.steps).toEqual([
      { name: "npm ci --ignore-scripts", command: "npm ci --ignore-scripts" },
    ]);
    expect(own.inputs).toEqual([".github/foreman.yml", "package.json", "package-lock.json"]);
  });

  it("rejects malformed YAML naming the file", async () => {
    await write(".github/foreman.yml", "verify:\n  - npm test\n - broken: [\n");
    const error = await stageError(detectChecks(dir));
    expect(error.message).toMatch(/^\.github\/foreman\.yml: invalid YAML: \S/);
    expect(error.message).not.toContain("\n");
  });

  it("rejects wrong shapes naming the file and the item", async () => {
    await write(".github/foreman.yml", "verify:\n  - npm test\n  - name: no command\n");
    expect((await stageError(detectChecks(dir))).message).toBe(
      ".github/foreman.yml: verify[1] must be a command string or {name, run}",
    );

    await write(".github/foreman.yml", "verify:\n  - run: npm test\n    command: typo\n");
    expect((await stageError(detectChecks(dir))).message).toBe(
      ".github/foreman.yml: verify[0] must be a command string or {name, run}",
    );

    await write(".github/foreman.yml", "verify: [npm test]\ninstall:\n  - 42\n");
    expect((await stageError(detectChecks(dir))).message).toBe(
      ".github/foreman.yml: install[0] must be a command string or {name, run}",
    );

    await write(".github/foreman.yml", "verify: npm test\n");
    expect((await stageError(detectChecks(dir))).message).toBe(
      ".github/foreman.yml: verify must be a list of commands",
    );

    await write(".github/foreman.yml", "- npm test\n");
    expect((await stageError(detectChecks(dir))).message).toBe(
      ".github/foreman.yml: must be a mapping with verify:, setup: and/or install: lists",
    );
  });
});

describe("detectChecks: package.json", () => {
  it("orders typecheck, lint and test, and skips npm's placeholder test", async () => {
    await mkdir(path.join(dir, "node_modules"));
    await writeJson("package.json", {
      scripts: {
        test: "vitest run",
        build: "tsc -p .",
        lint: "eslint .",
        typecheck: "tsc --noEmit",
        tsc: "tsc",
      },
    });
    let plan = await detectChecks(dir);
    expect(plan.source).toBe("package.json");
    expect(plan.install).toEqual([]);
    expect(plan.checks).toEqual([
      { name: "typecheck", command: "npm run typecheck" },
      { name: "lint", command: "npm run lint" },
      { name: "test", command: "npm run test" },
    ]);

    await writeJson("package.json", {
      scripts: { "type-check": "tsc", test: 'echo "Error: no test specified" && exit 1' },
    });
    plan = await detectChecks(dir);
    expect(plan.checks).toEqual([{ name: "type-check", command: "npm run type-check" }]);
    expect(plan.notes).toContain("package.json's test script is npm's placeholder: skipped.");
  });

  it("finds nothing in a package.json with only the placeholder test", async () => {
    await writeJson("package.json", {
      name: "x",
      scripts: { test: 'echo "Error: no test specified" && exit 1' },
    });
    const plan = await detectChecks(dir);
    expect(plan.source).toBeNull();
    expect(plan.checks).toEqual([]);
    expect(plan.notes).toEqual([
      "package.json's test script is npm's placeholder: skipped.",
      NOTHING_FOUND_NOTE,
    ]);
  });

  it.each([
    ["pnpm-lock.yaml", "pnpm", "pnpm install --frozen-lockfile"],
    ["yarn.lock", "yarn", "yarn install --frozen-lockfile"],
    ["bun.lock", "bun", "bun install --frozen-lockfile"],
    ["package-lock.json", "npm", "npm ci --no-audit --no-fund"],
    ["npm-shrinkwrap.json", "npm", "npm ci --no-audit --no-fund"],
  ])("with %s uses %s and installs first", async (lockfile, manager, install) => {
    await writeJson("package.json", { scripts: { lint: "eslint .", test: "jest" } });
    await write(lockfile, "{}");
    const plan = await detectChecks(dir);
    expect(plan.checks).toEqual([
      { name: "lint", command: `${manager} run lint` },
      { name: "test", command: `${manager} run test` },
    ]);
    expect(plan.install).toEqual([]);
    expect(plan.notes).toEqual([]);
    const setup = await detectSetup(dir);
    expect(setup.steps).toEqual([{ name: "install", command: install }]);
    expect(setup.notes).toEqual([
      `No node_modules and ${lockfile} present: running ${install.split(" ").slice(0, 2).join(" ")} first.`,
    ]);
    expect(setup.inputs).toEqual(["package.json", lockfile]);
  });

  it("prefers pnpm's lockfile over a leftover package-lock.json", async () => {
    await writeJson("package.json", { scripts: { test: "jest" } });
    await write("package-lock.json", "{}");
    await write("pnpm-lock.yaml", "lockfileVersion: '9.0'\n");
    const plan = await detectChecks(dir);
    expect(plan.checks).toEqual([{ name: "test", command: "pnpm run test" }]);
    expect((await detectSetup(dir)).steps).toEqual([
      { name: "install", command: "pnpm install --frozen-lockfile" },
    ]);
  });

  it("skips the install when node_modules exists", async () => {
    await writeJson("package.json", { scripts: { test: "jest" }, devDependencies: { jest: "1" } });
    await write("package-lock.json", "{}");
    await mkdir(path.join(dir, "node_modules"));
    const plan = await detectChecks(dir);
    expect(plan.checks).toEqual([{ name: "test", command: "npm run test" }]);
    expect(plan.install).toEqual([]);
    expect(plan.notes).toEqual([]);
  });

  it("runs npm install for dependencies without a lockfile, and nothing without either", async () => {
    await writeJson("package.json", { scripts: { test: "jest" }, dependencies: { left: "1" } });
    let setup = await detectSetup(dir);
    expect(setup.steps).toEqual([{ name: "install", command: "npm install --no-audit --no-fund" }]);
    expect(setup.notes[0]).toMatch(/no lockfile: running npm install first\.$/);

    await writeJson("package.json", { scripts: { test: "node test.js" }, dependencies: {} });
    const plan = await detectChecks(dir);
    expect(plan.checks).toEqual([{ name: "test", command: "npm run test" }]);
    setup = await detectSetup(dir);
    expect(setup.steps).toEqual([]);
  });

  it("notes and skips an unparsable package.json", async () => {
    await write("package.json", '{"scripts": {"test": "jest"');
    await write("go.mod", "module x\n");
    const plan = await detectChecks(dir);
    expect(plan.source).toBe("go.mod");
    expect(plan.checks).toEqual([{ name: "go test", command: "go test ./..." }]);
    expect(plan.notes).toHaveLength(1);
    expect(plan.notes[0]).toMatch(/^package\.json could not be parsed \(.+\): skipped\.$/);
  });
});

describe("detectChecks: other ecosystems", () => {
  it("uses a Makefile test target instead of go.mod, next to package.json scripts", async () => {
    await write("Makefile", "all: build\n\ntest: build\n\tgo test ./...\n");
    await write("go.mod", "module x\n");
    await mkdir(path.join(dir, "node_modules"));
    await writeJson("package.json", { scripts: { lint: "eslint ." } });
    const plan = await detectChecks(dir);
    expect(plan.source).toBe("package.json, Makefile");
    expect(plan.checks).toEqual([
      { name: "lint", command: "npm run lint" },
      { name: "make test", command: "make test" },
    ]);
    expect(plan.notes).toEqual(["Makefile has a test target: go.mod not checked separately."]);
  });

  it.each([
    ["test:", true],
    ["test :: deps", true],
    ["unit test: deps", true],
    ["test := value", false],
    ["test ::= value", false],
    ["mytest: deps", false],
    [".PHONY: test", false],
  ])("reads the makefile line %j as a test target: %s", async (line, isTarget) => {
    await write("makefile", `${line}\n\techo ok\n`);
    await write("Cargo.toml", "[package]\nname = 'x'\n");
    const plan = await detectChecks(dir);
    expect(plan.checks).toEqual(
      isTarget
        ? [{ name: "make test", command: "make test" }]
        : [{ name: "cargo test", command: "cargo test" }],
    );
    expect(plan.source).toBe(isTarget ? "makefile" : "Cargo.toml");
  });

  it.each([
    ["pytest.ini", "[pytest]\n", "pytest.ini"],
    ["conftest.py", "import pytest\n", "conftest.py"],
    ["pyproject.toml", "[project]\nname='x'\n[tool.pytest.ini_options]\n", "pyproject.toml"],
    ["setup.cfg", "[metadata]\nname = x\n[tool:pytest]\n", "setup.cfg"],
    ["tox.ini", "[tox]\n[pytest]\naddopts = -q\n", "tox.ini"],
    ["tests/test_app.py", "def test_x(): pass\n", "tests/"],
    ["test/unit/test_deep.py", "def test_x(): pass\n", "test/"],
  ])("detects pytest from %s", async (file, content, source) => {
    await write(file, content);
    const plan = await detectChecks(dir);
    expect(plan).toEqual({
      source,
      install: [],
      checks: [{ name: "pytest", command: "python3 -m pytest -q" }],
      notes: [],
    });
  });

  it.each([
    ["pyproject.toml", "[project]\nname = 'x'\n"],
    ["setup.cfg", "[metadata]\nname = x\n"],
    ["tox.ini", "[tox]\nenvlist = py3\n"],
    ["tests/helper.py", "x = 1\n"],
  ])("does not take %s without pytest signs for pytest", async (file, content) => {
    await write(file, content);
    expect((await detectChecks(dir)).checks).toEqual([]);
  });

  it("detects go.mod and Cargo.toml together with pytest", async () => {
    await write("go.mod", "module x\n");
    await write("Cargo.toml", "[package]\nname = 'x'\n");
    await write("pytest.ini", "[pytest]\n");
    const plan = await detectChecks(dir);
    expect(plan.source).toBe("pytest.ini, go.mod, Cargo.toml");
    expect(plan.checks).toEqual([
      { name: "pytest", command: "python3 -m pytest -q" },
      { name: "go test", command: "go test ./..." },
      { name: "cargo test", command: "cargo test" },
    ]);
  });

  it("detects go.mod alone", async () => {
    await write("go.mod", "module x\n");
    expect(await detectChecks(dir)).toEqual({
      source: "go.mod",
      install: [],
      checks: [{ name: "go test", command: "go test ./..." }],
      notes: [],
    });
  });

  it("detects Cargo.toml alone", async () => {
    await write("Cargo.toml", "[package]\nname = 'x'\n");
    expect(await detectChecks(dir)).toEqual({
      source: "Cargo.toml",
      install: [],
      checks: [{ name: "cargo test", command: "cargo test" }],
      notes: [],
    });
  });

  it("reports when nothing is found, without an install for dependencies alone", async () => {
    await write("README.md", "# x\n");
    expect(await detectChecks(dir)).toEqual({
      source: null,
      install: [],
      checks: [],
      notes: [NOTHING_FOUND_NOTE],
    });

    // Dependencies and a lockfile but nothing to run: installing would be wasted.
    await writeJson("package.json", { dependencies: { left: "1" } });
    await write("package-lock.json", "{}");
    expect(await detectChecks(dir)).toEqual({
      source: null,
      install: [],
      checks: [],
      notes: [NOTHING_FOUND_NOTE],
    });
  });

  it("does not throw for a missing workdir", async () => {
    const plan = await detectChecks(path.join(dir, "absent"));
    expect(plan.checks).toEqual([]);
    expect(plan.notes).toEqual([NOTHING_FOUND_NOTE]);
  });
});

function plan(checks: Check[], install: Check[] = []): VerifyPlan {
  return { source: "test", install, checks, notes: [] };
}

const PASS: Check = { name: "ok", command: `node -e "console.log('all good')"` };
const FAIL: Check = {
  name: "broken",
  command: `node -e "console.log('boom-marker'); process.exit(3)"`,
};
const PASS_TOO: Check = { name: "after", command: "echo after-failure" };

describe("runChecks", () => {
  it("runs every check even after a failure and reports passed and failed", async () => {
    const events: string[] = [];
    const outcome = await runChecks(plan([PASS, FAIL, PASS_TOO]), {
      cwd: dir,
      timeoutMs: 20_000,
      onStart: (check, kind) => {
        events.push(`start ${kind} ${check.name}`);
      },
      onResult: async (done, kind) => {
        await Promise.resolve();
        events.push(`result ${kind} ${done.check.name} ${done.result.exitCode}`);
      },
    });

    expect(events).toEqual([
      "start check ok",
      "result check ok 0",
      "start check broken",
      "result check broken 3",
      "start check after",
      "result check after 0",
    ]);
    expect(outcome.ok).toBe(false);
    expect(outcome.install).toEqual([]);
    expect(outcome.passed).toEqual([PASS, PASS_TOO]);
    expect(outcome.failed).toEqual([FAIL]);
    expect(outcome.skipped).toEqual([]);
    expect(outcome.results.map((r) => r.result.output)).toEqual([
      "all good\n",
      "boom-marker\n",
      "after-failure\n",
    ]);
    expect(outcome.durationMs).toBeGreaterThan(0);
    expect(summarizeChecks(outcome)).toBe(
      "3 checks: ok passed, broken failed (exit 3), after passed",
    );

    const report = failureReport(outcome);
    expect(report).toMatch(
      /^### broken \(`node -e "console\.log\('boom-marker'\); process\.exit\(3\)"`\): `node -e .*` failed with exit code 3 after /,
    );
    expect(report).toContain("\nboom-marker\n");
    expect(report).not.toContain("all good");
    expect(report).not.toContain("after-failure");
  });

  it("passes with no checks and with only passing checks", async () => {
    const empty = await runChecks(plan([]), { cwd: dir, timeoutMs: 5_000 });
    expect(empty).toMatchObject({ ok: true, results: [], passed: [], failed: [] });
    expect(summarizeChecks(empty)).toBe("No checks run");
    expect(failureReport(empty)).toBe("");

    const passing = await runChecks(plan([PASS]), { cwd: dir, timeoutMs: 20_000 });
    expect(passing.ok).toBe(true);
    expect(passing.passed).toEqual([PASS]);
    expect(summarizeChecks(passing)).toBe("1 check: ok passed");
    expect(failureReport(passing)).toBe("");
  });

  it("keeps the failure report within maxChars, sharing it across failures", async () => {
    // 30,000 characters each, numbered lines so the kept part can be told apart.
    const noisy = (name: string): Check => ({
      name,
      command: `node -e "for (let i = 0; i < 3000; i++) console.log('${name}-line-' + String(i).padStart(4, '0')); process.exitCode = 1"`,
    });
    const quiet: Check = { name: "quiet", command: "echo tiny-output; exit 2" };
    const outcome = await runChecks(plan([noisy("alpha"), quiet, noisy("beta")]), {
      cwd: dir,
      timeoutMs: 20_000,
    });
    expect(outcome.failed.map((c) => c.name)).toEqual(["alpha", "quiet", "beta"]);

    const report = failureReport(outcome, 3_000);
    expect(report.length).toBeLessThanOrEqual(3_000);
    expect(report.length).toBeGreaterThan(2_700);
    // Tails, not heads: the last lines survive, the first do not.
    expect(report).toContain("alpha-line-2999");
    expect(report).toContain("beta-line-2999");
    expect(report).not.toContain("alpha-line-0000");
    expect(report).toContain("tiny-output");
    expect(report.match(/\[… earlier output omitted …\]/g)).toHaveLength(2);
    // Each long output gets about half of what the headers and the short one leave.
    const alpha = report.slice(report.indexOf("### alpha"), report.indexOf("### quiet"));
    const beta = report.slice(report.indexOf("### beta"));
    expect(Math.abs(alpha.length - beta.length)).toBeLessThan(100);
    // A budget smaller than the headers still holds.
    expect(failureReport(outcome, 50)).toHaveLength(50);
  });

  it("stops at a failing install step", async () => {
    const started: string[] = [];
    const install: Check = { name: "install", command: "echo cannot-install >&2; exit 7" };
    const outcome = await runChecks(plan([PASS, FAIL], [install, PASS_TOO]), {
      cwd: dir,
      timeoutMs: 20_000,
      onStart: (check, kind: CheckKind) => {
        started.push(`${kind} ${check.name}`);
      },
    });
    expect(started).toEqual(["install install"]);
    expect(outcome.ok).toBe(false);
    expect(outcome.install).toHaveLength(1);
    expect(outcome.install[0]?.result.exitCode).toBe(7);
    expect(outcome.results).toEqual([]);
    expect(outcome.failed).toEqual([install]);
    expect(outcome.passed).toEqual([]);
    expect(outcome.skipped).toEqual([PASS_TOO, PASS, FAIL]);
    expect(summarizeChecks(outcome)).toBe(
      "Install step `echo cannot-install >&2; exit 7` failed (exit 7); not run: after, ok, broken",
    );
    const report = failureReport(outcome);
    expect(report).toContain("### install (`echo cannot-install >&2; exit 7`)");
    expect(report).toContain("cannot-install");
    expect(report).toContain("Not run because an install step failed: after, ok, broken.");
  });

  it("times out a hanging check and goes on", async () => {
    const hang: Check = { name: "hang", command: `node -e "setInterval(()=>{},1000)"` };
    const started = Date.now();
    // Long enough for `node -e` on a loaded machine (the CI run's 500 ms timed PASS out too),
    // short enough that the hanging check's time is up well before the bound below.
    const outcome = await runChecks(plan([hang, PASS]), { cwd: dir, timeoutMs: 3000 });
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(outcome.results[0]?.result.timedOut).toBe(true);
    expect(outcome.failed).toEqual([hang]);
    expect(outcome.passed).toEqual([PASS]);
    expect(summarizeChecks(outcome)).toBe("2 checks: hang timed out, ok passed");
    expect(failureReport(outcome)).toMatch(/^### hang .* timed out after /);
  });

  it("gives install steps their own time limit", async () => {
    const slow: Check = { name: "slow install", command: "sleep 1" };
    const longer = await runChecks(plan([PASS_TOO], [slow]), {
      cwd: dir,
      timeoutMs: 500,
      installTimeoutMs: 10_000,
    });
    expect(longer.install[0]?.result).toMatchObject({ ok: true, timedOut: false });
    expect(longer.ok).toBe(true);

    const same = await runChecks(plan([PASS_TOO], [slow]), { cwd: dir, timeoutMs: 500 });
    expect(same.install[0]?.result.timedOut).toBe(true);
    expect(same.results).toEqual([]);
  });

  it("throws the abort reason when cancelled", async () => {
    const controller = new AbortController();
    const reason = new Error("task cancelled");
    const ran: string[] = [];
    setTimeout(() => controller.abort(reason), 300);
    const error = await runChecks(plan([{ name: "sleep", command: "sleep 30" }, PASS]), {
      cwd: dir,
      timeoutMs: 20_000,
      signal: controller.signal,
      onResult: (done) => {
        ran.push(done.check.name);
      },
    }).catch((e: unknown) => e);
    expect(error).toBe(reason);
    expect(ran).toEqual([]);

    await expect(
      runChecks(plan([PASS]), { cwd: dir, timeoutMs: 20_000, signal: controller.signal }),
    ).rejects.toBe(reason);
  });

  it("installs with a real npm ci offline", async () => {
    await writeJson("package.json", { name: "x", version: "1.0.0", scripts: { test: "echo ran" } });
    await writeJson("package-lock.json", {
      name: "x",
      version: "1.0.0",
      lockfileVersion: 3,
      requires: true,
      packages: { "": { name: "x", version: "1.0.0" } },
    });
    const detected = await detectChecks(dir);
    const setup = await detectSetup(dir);
    expect(setup.steps).toEqual([{ name: "install", command: "npm ci --no-audit --no-fund" }]);

    const outcome = await runChecks(
      { ...detected, install: setup.steps },
      { cwd: dir, timeoutMs: 50_000 },
    );
    expect(outcome.install[0]?.result).toMatchObject({ ok: true, exitCode: 0 });
    expect(outcome.results[0]?.result.output).toContain("ran");
    expect(outcome.ok).toBe(true);
    expect(outcome.passed.map((c) => c.name)).toEqual(["install", "test"]);
  }, 60_000);
});
