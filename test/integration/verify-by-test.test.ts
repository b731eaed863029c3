import { readFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentModel, roleOf, userText, type Script } from "../helpers/agent-model.js";
import {
  startFakeModel,
  type FakeModel,
  type FakeModelRequest,
  fakeModelEnv,
} from "../helpers/fake-model.js";
import { createGitRepo, type GitFixture } from "../helpers/git-repo.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { taskInStatus } from "../helpers/greeter-stack.js";

/*
 * Verification judges by tests, not lines (SPEC §4c; issue 41 items 2 and 8), on the real
 * service with a scripted model and real node:test runs in the sandbox. The repository has a
 * wrong add() (its test red) and an unrelated red date test; the base commit's results are
 * read per test (they run beside planning) and each round is compared with them:
 * - a right fix beside the unrelated red test completes with no fix round, the red test named;
 * - a first attempt still wrong another way (another failure message) gets a fix round;
 * - a newly broken test beside old red ones gets a fix round;
 * - a break never repaired fails the task, naming the test;
 * - a plain script that exits 1 with no failure words, still wrong, gets a fix round.
 */

const pkg = (test: string) =>
  `${JSON.stringify({ name: "calc", private: true, type: "module", scripts: { test } }, null, 2)}\n`;

const ADD_WRONG = "export const add = (a, b) => a - b;\n";
const ADD_RIGHT = "export const add = (a, b) => a + b;\n";
const ADD_OTHER_WRONG = "export const add = (a, b) => a * b;\n";

/** A runner's repository: a wrong add() (its test red), v (green), an unrelated red test. */
interface Runner {
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

const NODE: Runner = {
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

const PYTEST: Runner = {
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
const VITEST: Runner = {
  ...NODE,
  name: "vitest",
  repo: "acme/vitest",
  files: {
    "package.json": readFileSync(path.join(RUNNER_FIXTURES, "vitest/package.json"), "utf8"),
    "package-lock.json": readFileSync(
      path.join(RUNNER_FIXTURES, "vitest/package-lock.json"),
      "utf8",
    ),
    "src/add.js": ADD_WRONG,
    "src/v.js": "export const v = 1;\n",
    "test/add.test.js": vitestTest("add", "add sums", "expect(add(2, 3)).toBe(5)"),
    "test/date.test.js": `import { test, expect } from "vitest";
test("the epoch is in 1971", () => expect(new Date(0).getUTCFullYear()).toBe(1971));
`,
    "test/v.test.js": vitestTest("v", "v is one", "expect(v).toBe(1)"),
  },
};

const RUNNERS = [NODE, PYTEST, VITEST];

/** The test a change adds: red on the base's add(), green with the fix. */
const SUM_TEST = `import { test } from "node:test";
import assert from "node:assert/strict";
import { add } from "../src/add.js";
test("adds negatives", () => assert.equal(add(-2, -3), -5));
`;

/** The runner a task's description names (`[pytest]`), node:test otherwise. */
function runnerOf(text: string): Runner {
  return RUNNERS.find((r) => text.includes(`[${r.name}]`)) ?? NODE;
}

/** A repository whose only check is a plain script: no runner, no failure words. */
const script = {
  "package.json": pkg("node check.js"),
  "src/add.js": ADD_WRONG,
  "check.js": `import { add } from "./src/add.js";
const got = add(2, 3);
if (got !== 5) {
  console.log(\`EXPECTED_SUM_MISMATCH add(2,3)=\${got}\`);
  process.exit(1);
}
console.log("sum ok");
`,
};

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

const model: Script = {
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

let suiteRepos: GitFixture[] = [];
let scriptRepo: GitFixture;
let fake: FakeModel;
let server: TestServer;
/** One account per repository (a new account's monthly task quota is small), made on first use. */
const accounts = new Map<string, Promise<{ key: string; workspaceId: string }>>();

beforeAll(async () => {
  suiteRepos = await Promise.all(RUNNERS.map((r) => createGitRepo(r.files)));
  scriptRepo = await createGitRepo(script);
  fake = await startFakeModel(agentModel(model));
  server = await startTestServer({
    workers: true,
    env: {
      ...fakeModelEnv(fake, "sk-by-test-key-0123456789abcdef"),
      EVENT_POLL_MS: "50",
      COMMAND_TIMEOUT_S: "120",
      MAX_FIX_ATTEMPTS: "1",
    },
  });
}, 60_000);

/** The account (and its workspace of `repo`) the tasks on `repo` run in. */
function accountFor(repo: string) {
  let found = accounts.get(repo);
  if (!found) {
    found = (async () => {
      const { key } = await server.signup();
      const clone = [
        ...RUNNERS.map((r, i) => ({ name: r.repo, clone_url: suiteRepos[i]!.dir })),
        { name: "acme/script", clone_url: scriptRepo.dir },
      ].find((r) => r.name === repo)!;
      const ws = await server.api("POST", "/workspaces", {
        key,
        body: { name: "local", repos: [clone] },
      });
      expect(ws.status).toBe(201);
      return { key, workspaceId: ws.body.id as string };
    })();
    accounts.set(repo, found);
  }
  return found;
}

afterAll(async () => {
  await server?.stop();
  await fake?.close();
  for (const repo of suiteRepos) await repo.remove();
  await scriptRepo?.remove();
});

/** Creates a task, approves its plan, and waits for the diff gate (or the task's end). */
async function runToDiffGate(repo: string, description: string) {
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
}

async function logs(id: string): Promise<string[]> {
  const events = await server.service.db.models.TaskEvent.collection
    .find({ task_id: id, type: "log" })
    .sort({ seq: 1 })
    .toArray();
  return events.map((e) => String(e.payload?.message ?? ""));
}

function fixRequests(description: string): FakeModelRequest[] {
  return fake.requests.filter((r) => roleOf(r) === "fix" && userText(r).includes(description));
}

describe.each(RUNNERS)("verification by test ($name)", (runner) => {
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
  }, 180_000);

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
    expect(lines.some((l) => new RegExp(`^Tests: .*1 new failure: .*${ADD.source}`).test(l))).toBe(
      true,
    );
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

describe("evidence of a change that adds a test", () => {
  it("runs the added test on the base too: red there, green now, it is reproduced", async () => {
    const description = "ADDTEST: make add() return the sum, with a test.";
    const { task } = await runToDiffGate(NODE.repo, description);
    expect(task.status).toBe("awaiting_diff_approval");
    const { tests } = task.checks.results[0];
    expect(tests.added).toEqual(["test/sum.test.js > adds negatives"]);
    expect(tests.reproduced).toEqual(["test/sum.test.js > adds negatives"]);
    expect(tests.reproduced_count).toBe(1);
    const lines = await logs(task.id);
    expect(
      lines.some((l) => l.startsWith("Running the change's tests on the unchanged code")),
    ).toBe(true);
  }, 180_000);
});

describe("verification of a check not read per test", () => {
  it("sends a plain script that exits 1 with no failure words, still wrong, to a fix round", async () => {
    const description = "WRONG: make add() return the sum, checked by a script.";
    const { task } = await runToDiffGate("acme/script", description);
    expect(task.status).toBe("awaiting_diff_approval");
    expect(task.checks.fix_attempts).toBe(1);
    expect(task.checks.results[0]).toMatchObject({ ok: true });
    const prompt = userText(fixRequests(description)[0]!);
    expect(prompt).toContain("EXPECTED_SUM_MISMATCH add(2,3)=6");
  }, 180_000);
});
