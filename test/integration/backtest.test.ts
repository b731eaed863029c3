import { mkdtemp, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runBacktest, type BacktestOptions } from "../../src/backtest/index.js";
import { wilson } from "../../src/backtest/report.js";
import type { CasesFile } from "../../src/backtest/types.js";
import { agentModel, type Script } from "../helpers/agent-model.js";
import { createBacktestRepo, type BacktestRepo } from "../helpers/backtest-repo.js";
import type { FakeModelRequest } from "../helpers/fake-model.js";
import { startFakeModel, type FakeModel, fakeModelEnv } from "../helpers/fake-model.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

/*
 * The backtest end to end (docs/operations.md, "Backtest"): a repository with a history built here,
 * mined and validated for real (git worktrees, node:test in the sandbox), each valid case run as a
 * task through the real service with a scripted model, scored, reported. An oracle model that
 * writes the commit's own change resolves every valid case; a model that changes nothing resolves
 * none; one that only edits tests is not counted; a flaky case is dropped, a case whose new test
 * already passes at the parent is not a case.
 */

let repo: BacktestRepo;
let model: FakeModel;
let server: TestServer;
let key: string;
let out: string;

const plan = {
  summary: "Change src/math.js.",
  steps: [{ title: "Edit math", description: "As asked.", files: ["src/math.js"] }],
};
const approve = () => [
  { name: "submit_review", arguments: { verdict: "approve", summary: "Fine.", comments: [] } },
];

/** The gold change of the case the request is about, by a word of its task text. */
function goldFor(request: FakeModelRequest): Record<string, string> {
  const text = JSON.stringify(request.messages);
  const word = Object.keys(repo.gold).find(
    (w) => text.includes(`a ${w} helper`) || text.includes(`Make ${w}`),
  );
  return word ? repo.gold[word]! : {};
}

const oracle: Script = {
  plan: () => [{ name: "submit_plan", arguments: plan }],
  implement: (request, n) =>
    n === 0
      ? Object.entries(goldFor(request)).map(([file, content]) => ({
          name: "write_file",
          arguments: { path: file, content },
        }))
      : [{ name: "finish", arguments: { summary: "Done." } }],
  fix: () => [{ name: "finish", arguments: { summary: "Nothing to fix." } }],
  review: approve,
};

const nothing: Script = {
  ...oracle,
  implement: () => [{ name: "finish", arguments: { summary: "Nothing needed." } }],
};

const testsOnly: Script = {
  ...oracle,
  implement: (_request, n) =>
    n === 0
      ? [
          {
            name: "write_file",
            arguments: {
              path: "test/clamp.test.mjs",
              content: 'import { test } from "node:test";\ntest("clamp", () => {});\n',
            },
          },
        ]
      : [{ name: "finish", arguments: { summary: "Tests pass." } }],
};

beforeAll(async () => {
  repo = await createBacktestRepo();
  model = await startFakeModel(agentModel(oracle));
  server = await startTestServer({
    workers: true,
    env: {
      ...fakeModelEnv(model, "sk-backtest-model-key-0123456789abcdef"),
      EVENT_POLL_MS: "50",
      TASK_POLL_MS: "100",
      COMMAND_TIMEOUT_S: "60",
    },
  });
  ({ key } = await server.signup());
  out = await mkdtemp(path.join(os.tmpdir(), "foreman-backtest-"));
}, 60_000);

afterAll(async () => {
  await server?.stop();
  await model?.close();
  await repo?.remove();
  if (out) await rm(out, { recursive: true, force: true });
});

function options(dir: string, extra: Partial<BacktestOptions> = {}): BacktestOptions {
  return {
    repo: repo.dir,
    out: path.join(out, dir),
    settings: { timeoutMs: 60_000 },
    service: { url: server.url, key },
    model: "fake-coder",
    pollMs: 100,
    ...extra,
  };
}

describe("backtest", () => {
  let casesFile: string;

  it("mines and validates the history; the oracle resolves every valid case", async () => {
    const lines: string[] = [];
    const { report, cases } = await runBacktest(
      options("oracle", { progress: (l) => lines.push(l) }),
    );
    const byCommit = new Map(cases.map((c) => [c.commit, c]));
    // Docs only: not mined. The others newest first.
    expect(cases.map((c) => c.commit)).toEqual([
      repo.commits.flaky,
      repo.commits.refactor,
      repo.commits.sub,
      repo.commits.clamp,
    ]);
    expect(byCommit.get(repo.commits.flaky)).toMatchObject({ validity: "flaky" });
    expect(byCommit.get(repo.commits.flaky)!.reason).toContain("test/mul.test.mjs");
    expect(byCommit.get(repo.commits.refactor)).toMatchObject({
      validity: "no_fail_to_pass",
      fail_to_pass: [],
    });
    expect(byCommit.get(repo.commits.sub)).toMatchObject({
      validity: "valid",
      ecosystem: "javascript",
      // Per test, as verification reads them (verify/tests/): `file > name`.
      fail_to_pass: ["test/sub.test.mjs > sub"],
      pass_to_pass: ["test/add.test.mjs > add", "test/add.test.mjs > add zero"],
      leaky_message: true,
    });
    expect(byCommit.get(repo.commits.clamp)).toMatchObject({
      validity: "valid",
      fail_to_pass: ["test/clamp.test.mjs > clamp"],
      pass_to_pass: [],
      leaky_message: false,
    });

    expect(report).toMatchObject({
      total: 4,
      valid: 2,
      flaky: 1,
      resolved: 2,
      rate: 1,
      stopped: null,
    });
    expect(report.model).toBe("fake-coder");
    expect(report.prompt_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(report.wilson_low).toBeCloseTo(wilson(2, 2).low, 4);
    expect(report.wilson_high).toBe(1);
    expect(report.usd).toBeGreaterThan(0);
    expect(report.usd_per_resolved).toBeCloseTo(report.usd / 2, 6);
    for (const r of report.cases) {
      expect(r).toMatchObject({
        status: "completed",
        resolved: true,
        touched_gold: true,
        edited_tests: false,
      });
      expect(r.fail_to_pass.passed).toBe(r.fail_to_pass.total);
      expect(r.model_calls).toBe(4); // plan, write, finish, review
      const trajectory = await fetch(r.trajectory_url!, { headers: { "x-api-key": key } });
      expect(trajectory.status).toBe(200);
      expect((await trajectory.text()).trim().split("\n")).toHaveLength(4);
    }
    // The task was pinned to the parent: the view says so.
    const task = await server.api("GET", `/tasks/${report.cases[0]!.task_id}`, { key });
    expect(task.body.base_sha).toBe(report.cases[0]!.parent);
    // Progress while it ran, the files after.
    expect(lines.some((l) => /^\[2\/2\] .* resolved .* spent \$/.test(l))).toBe(true);
    casesFile = path.join(out, "oracle", "cases.json");
    const saved = JSON.parse(await readFile(casesFile, "utf8")) as CasesFile;
    expect(saved.cases).toHaveLength(4);
    const md = await readFile(path.join(out, "oracle", "report.md"), "utf8");
    expect(md).toContain("Resolved 2 of 2: 100.0%");
    expect(md).toContain("flaky");
    const json = JSON.parse(await readFile(path.join(out, "oracle", "report.json"), "utf8"));
    expect(json.resolved).toBe(2);
  }, 90_000);

  it("a model that changes nothing resolves none", async () => {
    model.setReply(agentModel(nothing));
    const { report } = await runBacktest(options("null", { casesFile }));
    expect(report).toMatchObject({ valid: 2, resolved: 0, rate: 0, usd_per_resolved: null });
    for (const r of report.cases) {
      expect(r.resolved).toBe(false);
      expect(r.fail_to_pass.passed).toBe(0);
      expect(r.touched_gold).toBe(false);
    }
  }, 60_000);

  it("a model that only edits the tests is not counted as resolved", async () => {
    model.setReply(agentModel(testsOnly));
    const { report } = await runBacktest(options("tests-only", { casesFile }));
    expect(report.resolved).toBe(0);
    for (const r of report.cases) {
      expect(r).toMatchObject({ resolved: false, edited_tests: true, touched_gold: false });
    }
  }, 60_000);

  it("stops cleanly at the spending cap", async () => {
    model.setReply(agentModel(oracle));
    const { report } = await runBacktest(options("capped", { casesFile, maxUsd: 0.001 }));
    expect(report.stopped).toContain("$0.001");
    expect(report.cases.map((c) => c.status)).toEqual(["cancelled_by_cap", "not_run"]);
    expect(report.cases[0]!.resolved).toBe(false);
  }, 60_000);
});
