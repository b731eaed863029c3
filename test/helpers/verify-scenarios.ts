import { readFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentModel, roleOf, userText, type Script } from "./agent-model.js";
import {
  startFakeModel,
  type FakeModel,
  type FakeModelRequest,
  fakeModelEnv,
} from "./fake-model.js";
import { createGitRepo, type GitFixture } from "./git-repo.js";
import { startTestServer, type TestServer } from "./server.js";
import { taskInStatus } from "./greeter-stack.js";

/*
 * Verification judges by tests, not lines (docs/api.md, "Verification baseline"; issue 41 items 2 and 8), on the real
 * service with a scripted model and real test runners in the sandbox. Each runner's
 * repository has a wrong add() (its test red), a green v and an unrelated red date test; the
 * base commit's results are read per test (they run beside planning) and each round is
 * compared with them (runnerScenarios):
 * - a right fix beside the unrelated red test completes with no fix round, the red test named;
 * - a first attempt still wrong another way (another failure message) gets a fix round;
 * - a newly broken test beside old red ones gets a fix round;
 * - a break never repaired fails the task, naming the test.
 * The test files using this (verify-by-test*.test.ts) split the runners so CI runs them side
 * by side.
 */

export const pkg = (test: string) =>
  `${JSON.stringify({ name: "calc", private: true, type: "module", scripts: { test } }, null, 2)}\n`;

export const ADD_WRONG = "export const add = (a, b) => a - b;\n";
const ADD_RIGHT = "export const add = (a, b) => a + b;\n";
const ADD_OTHER_WRONG = "export const add = (a, b) => a * b;\n";

/** A runner's repository: a wrong add() (its test red), v (green), an unrelated red test. */
export interface Runner {
  name: string;
  repo: string;
  files: Record<string, string>;
  /** The files the model writes, and what it writes there. */
  add: string;
  v: string;
  code: { addRight: string; addOtherWrong: string; vTwo: string; vOneAndW: string };
  /** How the runner names the tests (in its ids). */
  ids: { add: RegExp; date: RegExp; v: RegExp };
}

const RUNNER_FIXTURES = path.join(import.meta.dirname, "../fixtures/test-runners");

/** A file of a runner's fixture (test/fixtures/test-runners/<runner>), e.g. its lockfile. */
const fixtureFile = (runner: string, file: string) =>
  readFileSync(path.join(RUNNER_FIXTURES, runner, file), "utf8");

export const NODE: Runner = {
  name: "node:test",
  repo: "acme/suite",
  files: {
    "package.json": pkg("node --test test/"),
    "src/add.js": ADD_WRONG,
    "src/v.js": "export const v = 1;\n",
    "test/add.test.js": `import { test } from "node:test";
import assert from "node:assert/strict";
import { add } from "../src/add.js";
test("add sums", () => assert.equal(add(2, 3), 5));
`,
    "test/date.test.js": `import { test } from "node:test";
import assert from "node:assert/strict";
test("the epoch is in 1971", () => assert.equal(new Date(0).getUTCFullYear(), 1971));
`,
    "test/v.test.js": `import { test } from "node:test";
import assert from "node:assert/strict";
import { v } from "../src/v.js";
test("v is one", () => assert.equal(v, 1));
`,
  },
  add: "src/add.js",
  v: "src/v.js",
  code: {
    addRight: ADD_RIGHT,
    addOtherWrong: ADD_OTHER_WRONG,
    vTwo: "export const v = 2;\n",
    vOneAndW: "export const v = 1;\nexport const w = 2;\n",
  },
  ids: { add: /add sums/, date: /the epoch is in 1971/, v: /v is one/ },
};

export const PYTEST: Runner = {
  name: "pytest",
  repo: "acme/pysuite",
  files: {
    ".github/foreman.yml": "verify:\n  - name: test\n    run: pytest\n",
    "pytest.ini": "[pytest]\npythonpath = .\n",
    "calc.py": "def add(a, b):\n    return a - b\n",
    "v.py": "v = 1\n",
    "tests/__init__.py": "",
    "tests/test_add.py":
      "from calc import add\n\n\ndef test_add_sums():\n    assert add(2, 3) == 5\n",
    "tests/test_date.py":
      "import datetime\n\n\ndef test_the_epoch_is_in_1971():\n    assert datetime.datetime.fromtimestamp(0, datetime.timezone.utc).year == 1971\n",
    "tests/test_v.py": "from v import v\n\n\ndef test_v_is_one():\n    assert v == 1\n",
  },
  add: "calc.py",
  v: "v.py",
  code: {
    addRight: "def add(a, b):\n    return a + b\n",
    addOtherWrong: "def add(a, b):\n    return a * b\n",
    vTwo: "v = 2\n",
    vOneAndW: "v = 1\nw = 2\n",
  },
  ids: { add: /test_add_sums/, date: /test_the_epoch_is_in_1971/, v: /test_v_is_one/ },
};

/** vitest, installed from the registry by the setup step (the base links its node_modules). */
const vitestTest = (what: string, name: string, body: string) =>
  `import { test, expect } from "vitest";
import { ${what} } from "../src/${what}.js";
test("${name}", () => ${body});
`;
export const VITEST: Runner = {
  ...NODE,
  name: "vitest",
  repo: "acme/vitest",
  files: {
    "package.json": fixtureFile("vitest", "package.json"),
    "package-lock.json": fixtureFile("vitest", "package-lock.json"),
    "src/add.js": ADD_WRONG,
    "src/v.js": "export const v = 1;\n",
    "test/add.test.js": vitestTest("add", "add sums", "expect(add(2, 3)).toBe(5)"),
    "test/date.test.js": `import { test, expect } from "vitest";
test("the epoch is in 1971", () => expect(new Date(0).getUTCFullYear()).toBe(1971));
`,
    "test/v.test.js": vitestTest("v", "v is one", "expect(v).toBe(1)"),
  },
};

/** CommonJS code of the jest and mocha repositories (their fixtures are CommonJS). */
const CJS = {
  addWrong: "exports.add = (a, b) => a - b;\n",
  code: {
    addRight: "exports.add = (a, b) => a + b;\n",
    addOtherWrong: "exports.add = (a, b) => a * b;\n",
    vTwo: "exports.v = 2;\n",
    vOneAndW: "exports.v = 1;\nexports.w = 2;\n",
  },
};

/**
 * jest, installed from the registry by the setup step, run by `npm test` (`jest`); ids
 * `file > suite > name`, the tests in a describe as most jest suites have them.
 */
export const JEST: Runner = {
  ...NODE,
  name: "jest",
  repo: "acme/jest",
  files: {
    "package.json": fixtureFile("jest", "package.json"),
    "package-lock.json": fixtureFile("jest", "package-lock.json"),
    "src/add.js": CJS.addWrong,
    "src/v.js": "exports.v = 1;\n",
    "test/add.test.js": `const { add } = require("../src/add.js");
describe("add", () => {
  test("add sums", () => expect(add(2, 3)).toBe(5));
});
`,
    "test/date.test.js": `describe("date", () => {
  test("the epoch is in 1971", () => expect(new Date(0).getUTCFullYear()).toBe(1971));
});
`,
    "test/v.test.js": `const { v } = require("../src/v.js");
describe("v", () => {
  test("v is one", () => expect(v).toBe(1));
});
`,
  },
  code: CJS.code,
  ids: {
    add: /test\/add\.test\.js > add > add sums/,
    date: /test\/date\.test\.js > date > the epoch is in 1971/,
    v: /test\/v\.test\.js > v > v is one/,
  },
};

/** mocha, installed from the registry by the setup step, run by `npm test` (`mocha`). */
export const MOCHA: Runner = {
  ...NODE,
  name: "mocha",
  repo: "acme/mocha",
  files: {
    "package.json": fixtureFile("mocha", "package.json"),
    "package-lock.json": fixtureFile("mocha", "package-lock.json"),
    "src/add.js": CJS.addWrong,
    "src/v.js": "exports.v = 1;\n",
    "test/add.test.js": `const assert = require("node:assert");
const { add } = require("../src/add.js");
describe("add", () => {
  it("add sums", () => assert.strictEqual(add(2, 3), 5));
});
`,
    "test/date.test.js": `const assert = require("node:assert");
describe("date", () => {
  it("the epoch is in 1971", () => assert.strictEqual(new Date(0).getUTCFullYear(), 1971));
});
`,
    "test/v.test.js": `const assert = require("node:assert");
const { v } = require("../src/v.js");
describe("v", () => {
  it("v is one", () => assert.strictEqual(v, 1));
});
`,
  },
  code: CJS.code,
  ids: {
    add: /test\/add\.test\.js > add > add sums/,
    date: /test\/date\.test\.js > date > the epoch is in 1971/,
    v: /test\/v\.test\.js > v > v is one/,
  },
};

/** go test, found from go.mod (`go test ./...`, read from its -json events); ids `pkg/TestName`. */
const goTest = (name: string, body: string) => `package calc

import "testing"

func ${name}(t *testing.T) {
${body}
}
`;
export const GO: Runner = {
  name: "go",
  repo: "acme/gosuite",
  files: {
    "go.mod": "module example.com/calc\n\ngo 1.22\n",
    "add.go": "package calc\n\nfunc Add(a, b int) int { return a - b }\n",
    "v.go": "package calc\n\nconst V = 1\n",
    "add_test.go": goTest(
      "TestAddSums",
      '\tif got := Add(2, 3); got != 5 {\n\t\tt.Errorf("Add(2, 3) = %d, want 5", got)\n\t}',
    ),
    "date_test.go": `package calc

import (
	"testing"
	"time"
)

func TestTheEpochIsIn1971(t *testing.T) {
	if got := time.Unix(0, 0).UTC().Year(); got != 1971 {
		t.Errorf("the epoch's year = %d, want 1971", got)
	}
}
`,
    "v_test.go": goTest("TestVIsOne", '\tif V != 1 {\n\t\tt.Errorf("V = %d, want 1", V)\n\t}'),
  },
  add: "add.go",
  v: "v.go",
  code: {
    addRight: "package calc\n\nfunc Add(a, b int) int { return a + b }\n",
    addOtherWrong: "package calc\n\nfunc Add(a, b int) int { return a * b }\n",
    vTwo: "package calc\n\nconst V = 2\n",
    vOneAndW: "package calc\n\nconst V = 1\n\nconst W = 2\n",
  },
  ids: {
    add: /example\.com\/calc\/TestAddSums/,
    date: /example\.com\/calc\/TestTheEpochIsIn1971/,
    v: /example\.com\/calc\/TestVIsOne/,
  },
};

/**
 * cargo test, found from Cargo.toml: a crate with no dependencies (the checks have no
 * network), its tests in one module; ids `module::name` from libtest's lines.
 */
export const CARGO: Runner = {
  name: "cargo",
  repo: "acme/crate",
  files: {
    "Cargo.toml": '[package]\nname = "calc"\nversion = "0.1.0"\nedition = "2021"\n',
    "Cargo.lock":
      '# This file is automatically @generated by Cargo.\n# It is not intended for manual editing.\nversion = 4\n\n[[package]]\nname = "calc"\nversion = "0.1.0"\n',
    ".gitignore": "/target\n",
    "src/lib.rs": "pub mod add;\npub mod v;\n\n#[cfg(test)]\nmod tests;\n",
    "src/add.rs": "pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n",
    "src/v.rs": "pub const V: i32 = 1;\n",
    "src/tests.rs": `use crate::add::add;
use crate::v::V;
use std::time::UNIX_EPOCH;

#[test]
fn add_sums() {
    assert_eq!(add(2, 3), 5);
}

#[test]
fn the_epoch_is_in_1971() {
    let secs = UNIX_EPOCH.duration_since(UNIX_EPOCH).unwrap().as_secs();
    assert_eq!(1970 + secs / 31_536_000, 1971);
}

#[test]
fn v_is_one() {
    assert_eq!(V, 1);
}
`,
  },
  add: "src/add.rs",
  v: "src/v.rs",
  code: {
    addRight: "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n",
    addOtherWrong: "pub fn add(a: i32, b: i32) -> i32 {\n    a * b\n}\n",
    vTwo: "pub const V: i32 = 2;\n",
    vOneAndW: "pub const V: i32 = 1;\npub const W: i32 = 2;\n",
  },
  ids: { add: /tests::add_sums/, date: /tests::the_epoch_is_in_1971/, v: /tests::v_is_one/ },
};

/** Python's unittest (`python3 -m unittest -v`, named in foreman.yml); ids `module.Class.test`. */
const unittestFile = (imports: string, cls: string, name: string, body: string) =>
  `import unittest\n${imports}\n\n\nclass ${cls}(unittest.TestCase):\n    def ${name}(self):\n        ${body}\n`;
export const UNITTEST: Runner = {
  ...PYTEST,
  name: "unittest",
  repo: "acme/unittest",
  files: {
    ".github/foreman.yml": "verify:\n  - name: test\n    run: python3 -m unittest -v\n",
    "calc.py": "def add(a, b):\n    return a - b\n",
    "v.py": "v = 1\n",
    "tests/__init__.py": "",
    "tests/test_add.py": unittestFile(
      "\nfrom calc import add",
      "TestAdd",
      "test_add_sums",
      "self.assertEqual(add(2, 3), 5)",
    ),
    "tests/test_date.py": unittestFile(
      "import datetime",
      "TestDate",
      "test_the_epoch_is_in_1971",
      "self.assertEqual(datetime.datetime.fromtimestamp(0, datetime.timezone.utc).year, 1971)",
    ),
    "tests/test_v.py": unittestFile(
      "\nfrom v import v",
      "TestV",
      "test_v_is_one",
      "self.assertEqual(v, 1)",
    ),
  },
  ids: {
    add: /tests\.test_add\.TestAdd\.test_add_sums/,
    date: /tests\.test_date\.TestDate\.test_the_epoch_is_in_1971/,
    v: /tests\.test_v\.TestV\.test_v_is_one/,
  },
};

/** The test a change adds (ADDTEST, node:test): red on the base's add(), green with the fix. */
const SUM_TEST = `import { test } from "node:test";
import assert from "node:assert/strict";
import { add } from "../src/add.js";
test("adds negatives", () => assert.equal(add(-2, -3), -5));
`;

const write = (path: string, content: string) => ({
  name: "write_file",
  arguments: { path, content },
});
const finish = { name: "finish", arguments: { summary: "Done." } };

/** The text of the tool results the model was sent in this conversation. */
function toolResults(request: FakeModelRequest): string {
  return request.messages
    .filter((m) => m.role === "tool")
    .map((m) => (typeof m.content === "string" ? m.content : JSON.stringify(m.content)))
    .join("\n");
}

/**
 * The scripted model: the task's description names its runner (`[pytest]`; node:test
 * otherwise) and what to do (FIX, WRONG, BREAK, NEVER, ADDTEST; TARGET names a plan target).
 */
function modelScript(runners: readonly Runner[]): Script {
  const runnerOf = (text: string) => runners.find((r) => text.includes(`[${r.name}]`)) ?? NODE;
  return {
    // The planner first asks what is red on the unchanged code, then names its target.
    plan: (request, n) => {
      if (n === 0) return [{ name: "base_test_results", arguments: {} }];
      const runner = runnerOf(userText(request));
      const target = /^\s*- (.*)$/gm
        .exec(
          toolResults(request)
            .split("\n")
            .filter((l) => runner.ids.add.test(l))
            .join("\n"),
        )
        ?.at(1);
      return [
        {
          name: "submit_plan",
          arguments: {
            summary: "Change add.",
            steps: [{ title: "Change it", description: "Change it.", files: [runner.add] }],
            ...(target && /TARGET/.test(userText(request)) ? { targets: [target] } : {}),
          },
        },
      ];
    },
    implement: (request, n) => {
      if (n > 0) return [finish];
      const task = userText(request);
      const runner = runnerOf(task);
      if (/BREAK|NEVER/.test(task)) return [write(runner.v, runner.code.vTwo)];
      if (/WRONG/.test(task)) return [write(runner.add, runner.code.addOtherWrong)];
      // A test of the change's own, beside the fix: it fails on the base (reproduced).
      if (/ADDTEST/.test(task))
        return [write(runner.add, runner.code.addRight), write("test/sum.test.js", SUM_TEST)];
      return [write(runner.add, runner.code.addRight)];
    },
    fix: (request, n) => {
      const task = userText(request);
      const runner = runnerOf(task);
      if (n > 0 || /NEVER/.test(task)) return [finish];
      // v back to one, and a change of its own kept (an unchanged copy sets nothing aside).
      if (/BREAK/.test(task)) return [write(runner.v, runner.code.vOneAndW)];
      return [write(runner.add, runner.code.addRight)];
    },
    review: () => [
      { name: "submit_review", arguments: { verdict: "approve", summary: "Fine.", comments: [] } },
    ],
  };
}

export interface VerifyStack {
  /** Creates a task, approves its plan, and waits for the diff gate (or the task's end). */
  runToDiffGate(repo: string, description: string): Promise<{ planned: any; task: any }>; // eslint-disable-line @typescript-eslint/no-explicit-any
  /** The task's log events' messages, in order. */
  logs(id: string): Promise<string[]>;
  /** The model's fix-round requests of the task with this description. */
  fixRequests(description: string): FakeModelRequest[];
}

/**
 * The service (with workers) and the scripted model for `runners`' repositories and the
 * `extra` ones (name → files), started before the file's tests and stopped after them.
 */
export function verifyStack(
  runners: readonly Runner[],
  extra: Record<string, Record<string, string>> = {},
): VerifyStack {
  const sources = [
    ...runners.map((r) => ({ name: r.repo, files: r.files })),
    ...Object.entries(extra).map(([name, files]) => ({ name, files })),
  ];
  let repos: GitFixture[] = [];
  let fake: FakeModel;
  let server: TestServer;
  /** One account per repository (a new account's monthly task quota is small), made on first use. */
  const accounts = new Map<string, Promise<{ key: string; workspaceId: string }>>();

  beforeAll(async () => {
    repos = await Promise.all(sources.map((s) => createGitRepo(s.files)));
    fake = await startFakeModel(agentModel(modelScript(runners)));
    server = await startTestServer({
      workers: true,
      env: {
        ...fakeModelEnv(fake, "sk-by-test-key-0123456789abcdef"),
        EVENT_POLL_MS: "50",
        // go's first run in an account compiles the standard library (75-105 s seen on a
        // loaded 2-core machine, the base's run of the first task): room for it.
        COMMAND_TIMEOUT_S: "240",
        MAX_FIX_ATTEMPTS: "1",
      },
    });
  }, 60_000);

  afterAll(async () => {
    await server?.stop();
    await fake?.close();
    for (const repo of repos) await repo.remove();
  });

  /** The account (and its workspace of `repo`) the tasks on `repo` run in. */
  function accountFor(repo: string) {
    let found = accounts.get(repo);
    if (!found) {
      found = (async () => {
        const { key } = await server.signup();
        const index = sources.findIndex((s) => s.name === repo);
        expect(index).toBeGreaterThanOrEqual(0);
        const ws = await server.api("POST", "/workspaces", {
          key,
          body: { name: "local", repos: [{ name: repo, clone_url: repos[index]!.dir }] },
        });
        expect(ws.status).toBe(201);
        return { key, workspaceId: ws.body.id as string };
      })();
      accounts.set(repo, found);
    }
    return found;
  }

  return {
    async runToDiffGate(repo, description) {
      const { key, workspaceId } = await accountFor(repo);
      const res = await server.api("POST", "/tasks", {
        key,
        body: { workspace_id: workspaceId, repo_id: repo, description },
      });
      expect(res.status).toBe(201);
      const id = res.body.id as string;
      const at = (statuses: string[]) => taskInStatus(server, key, id, statuses);
      const planned = await at(["awaiting_approval", "failed"]);
      expect(planned.status).toBe("awaiting_approval");
      expect((await server.api("POST", `/tasks/${id}/approve`, { key })).status).toBe(200);
      return { planned, task: await at(["awaiting_diff_approval", "failed", "completed"]) };
    },
    async logs(id) {
      const events = await server.service.db.models.TaskEvent.collection
        .find({ task_id: id, type: "log" })
        .sort({ seq: 1 })
        .toArray();
      return events.map((e) => String(e.payload?.message ?? ""));
    },
    fixRequests(description) {
      return fake.requests.filter((r) => roleOf(r) === "fix" && userText(r).includes(description));
    },
  };
}

/** The four scenarios of issue 41 item 8 on each of `runners`' repositories. */
export function runnerScenarios(runners: readonly Runner[], stack: VerifyStack): void {
  const { runToDiffGate, logs, fixRequests } = stack;
  describe.each(runners)("verification by test ($name)", (runner) => {
    const { add: ADD, date: DATE, v: V } = runner.ids;
    const tag = `[${runner.name}]`;

    it("completes a right fix beside an unrelated red test with no fix round, naming that test", async () => {
      const description = `FIX TARGET ${tag}: make add() return the sum.`;
      const { planned, task } = await runToDiffGate(runner.repo, description);
      // The planner saw the base's red tests and named its target, shown at the plan gate.
      expect(planned.plan_targets).toHaveLength(1);
      expect(planned.plan_targets[0]).toMatch(ADD);
      expect(task.status).toBe("awaiting_diff_approval");
      expect(fixRequests(description)).toHaveLength(0);
      const [check] = task.checks.results;
      expect(check).toMatchObject({ ok: false, before: "failed", pre_existing: true });
      expect(check.tests.new_failures).toEqual([]);
      expect(check.tests.still_failing).toHaveLength(1);
      expect(check.tests.still_failing[0]).toMatch(DATE);
      expect(check.tests.fixed).toHaveLength(1);
      expect(check.tests.fixed[0]).toMatch(ADD);
      expect(task.checks.targets).toEqual(planned.plan_targets);
      const lines = await logs(task.id);
      const round = lines.find((l) => l.startsWith("Tests: "));
      expect(round).toMatch(new RegExp(`1 fixed: .*${ADD.source}`));
      expect(round).toMatch(new RegExp(`1 still failing as on the base: .*${DATE.source}`));
      expect(lines.some((l) => l.startsWith("Verification passed apart from pre-existing"))).toBe(
        true,
      );
      // The first task of a repository installs its runner and runs the base (COMMAND_TIMEOUT_S).
    }, 300_000);

    it("sends a first attempt still wrong another way to a fix round", async () => {
      const description = `WRONG ${tag}: make add() return the sum.`;
      const { task } = await runToDiffGate(runner.repo, description);
      expect(task.status).toBe("awaiting_diff_approval");
      expect(task.checks.fix_attempts).toBe(1);
      const [fix] = fixRequests(description);
      const prompt = userText(fix!);
      // The new failure by id with its message first, the old red test named after it.
      expect(prompt).toMatch(new RegExp(`#### .*${ADD.source} \\(new failure\\)\\n[^#]*6`));
      expect(prompt.indexOf("Failing before the change too")).toBeGreaterThan(prompt.search(ADD));
      expect(prompt).toMatch(DATE);
      const lines = await logs(task.id);
      expect(
        lines.some((l) => new RegExp(`^Tests: .*1 new failure: .*${ADD.source}`).test(l)),
      ).toBe(true);
    }, 180_000);

    it("sends a test newly broken beside old red ones to a fix round", async () => {
      const description = `BREAK ${tag}: set v to two.`;
      const { task } = await runToDiffGate(runner.repo, description);
      expect(task.status).toBe("awaiting_diff_approval");
      expect(task.checks.fix_attempts).toBe(1);
      expect(task.checks.results[0].tests.new_failures).toEqual([]);
      expect(task.checks.results[0].tests.still_failing).toHaveLength(2);
      const prompt = userText(fixRequests(description)[0]!);
      expect(prompt).toMatch(new RegExp(`#### .*${V.source} \\(new failure\\)`));
    }, 180_000);

    it("fails a break never repaired, naming the test", async () => {
      const description = `NEVER ${tag}: set v to two.`;
      const { task } = await runToDiffGate(runner.repo, description);
      expect(task.status).toBe("failed");
      expect(task.error).toMatch(new RegExp(`failing tests: .*${V.source}`));
      expect(task.error).not.toMatch(/1971/);
      expect(task.checks.results[0].tests.new_failures[0]).toMatch(V);
    }, 180_000);
  });
}
