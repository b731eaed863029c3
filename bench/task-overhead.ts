/*
 * The service's own time per stage of a whole task: everything but the model's answers and
 * the repository's own test run, against that test run.
 *
 * One embedded database and the real service in-process, with its workers, on a fake
 * OpenAI-compatible model (test/helpers/fake-model.ts) whose scripted answers are instant:
 * plan → implement (one edit that makes the failing test pass, then finish) → review
 * (approve). The repository is a small TypeScript project in a temp folder whose test
 * (`node --test`, no install) fails until `clamp` is fixed; a plain-git
 * workspace points at it. BENCH_TASK_OVERHEAD_RUNS tasks (5) run one after another, each a
 * fresh task with auto_approve. For each, from its `phase` events (read over the WebSocket):
 *   wall      `ts` of a phase event to the next one (QUEUED: the pickup, up to CLONING)
 *   model     time in the fake model, from request received to response finished, measured by
 *             a timing proxy in front of it and charged to the stage its role belongs to
 *             (plan, implement, review: roleOf in test/helpers/agent-model.ts)
 *   test      the checks' `duration_ms` recorded on the task (`GET /tasks/{id}`), in VERIFYING
 *   overhead  wall − model − test
 * Each stage's wall time ends where the next stage's phase event is written, so it includes
 * handing over to that stage (queueing its job, the job's pickup, lease, phase write).
 * REVIEWING includes publishing (commit and push): publish has no phase of its own.
 *
 * The base commit's run is part of the service's time (issue 41): verification judges the change
 * against the checks' results on the base commit (docs/api.md, "Verification baseline"), run beside
 * planning. The fixture's test is red there, so every task runs it; whatever of it the planning
 * does not hide is overhead. A task whose checks record no base commit (`checks.base_commit`) is
 * reported as such, and the check fails: its figures would leave out the base run.
 *
 * The baseline, measured in the same run right after each task: `npm run test` in a clone of
 * the repository with the fix applied, through runSandboxed as verification runs it (after one
 * unmeasured run that checks it passes). Reported: the median per stage, the median total
 * overhead per task, the median test run, and their ratio (target ≤ 1.5). The first task also
 * starts the index's worker pool and warms the service's code; the median absorbs it, and
 * every task's figures are printed and kept in the results. A task that goes another way
 * (FIXING, a failure) stops the benchmark: its figures would not compare.
 *
 * BENCH_TASK_OVERHEAD_TRACE=1 also prints the last task's events with their offsets, to see
 * where a stage's time goes.
 */
import { execFile } from "node:child_process";
import { writeFile } from "node:fs/promises";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { promisify } from "node:util";
import { accountChanged } from "../src/domain/accounts/views.js";
import { authenticateKey } from "../src/domain/accounts/keys.js";
import type { Service } from "../src/service.js";
import { runSandboxed } from "../src/sandbox/index.js";
import { agentModel, roleOf, type Role, type Script } from "../test/helpers/agent-model.js";
import { startFakeModel, type FakeMessage, fakeModelEnv } from "../test/helpers/fake-model.js";
import { CALC_BUGGY, CALC_FIX, CALC_PLAN, calcRepoFiles } from "../test/helpers/calc-repo.js";
import { createGitRepo, type GitFixture } from "../test/helpers/git-repo.js";
import { openTaskStream, type StreamEvent } from "../test/helpers/ws.js";
import {
  activeCleanups,
  BenchError,
  Cleanup,
  envInt,
  median,
  summariseLatencies,
  type Benchmark,
  type BenchReport,
} from "./lib/harness.js";
import { startBenchStack } from "./lib/stack.js";

/** The service's own time per task, base run included, may be at most this many test runs. */
export const TARGET_RATIO = 1.5;

const DATABASE = "bench_task_overhead";
const TEST_COMMAND = "npm run test";
const COMMAND_TIMEOUT_S = 120;
const TASK_TIMEOUT_MS = 120_000;
const GIT = ["-c", "user.email=bench@example.com", "-c", "user.name=bench"];

const execFileAsync = promisify(execFile);

/** The measured intervals: each phase of a task with auto_approve whose checks pass at once. */
const STAGES = [
  "QUEUED",
  "CLONING",
  "INDEXING",
  "PLANNING",
  "IMPLEMENTING",
  "VERIFYING",
  "REVIEWING",
  "CLEANUP",
] as const;
/** Every phase event of such a task, in order: DONE ends the last interval. */
const TRAIL = [...STAGES, "DONE"];
type Stage = (typeof STAGES)[number];

const LABELS: Record<Stage, string> = {
  QUEUED: "QUEUED→CLONING (pickup)",
  CLONING: "CLONING",
  INDEXING: "INDEXING",
  PLANNING: "PLANNING",
  IMPLEMENTING: "IMPLEMENTING",
  VERIFYING: "VERIFYING",
  REVIEWING: "REVIEWING (+ publish)",
  CLEANUP: "CLEANUP",
};

/** Where each model role's time is charged. */
const STAGE_OF_ROLE: Partial<Record<Role, Stage>> = {
  plan: "PLANNING",
  implement: "IMPLEMENTING",
  review: "REVIEWING",
};

const REPO_FILES = calcRepoFiles();
const FIXED = CALC_BUGGY.replace("return value;", CALC_FIX);

const SCRIPT: Script = {
  plan: () => [
    {
      name: "submit_plan",
      arguments: CALC_PLAN,
    },
  ],
  implement: (_request, n) =>
    n === 0
      ? [
          {
            name: "edit_file",
            arguments: {
              path: "src/math.ts",
              old_text: "return value;",
              new_text: CALC_FIX,
            },
          },
        ]
      : [{ name: "finish", arguments: { summary: "clamp now respects both bounds." } }],
  review: () => [
    {
      name: "submit_review",
      arguments: { verdict: "approve", summary: "Correct and tested.", comments: [] },
    },
  ],
};

/** One model request as the timing proxy saw it. */
interface ModelCall {
  role: Role;
  /** Undefined until the response has been sent in full. */
  ms: number | undefined;
}

interface TimedModel {
  baseUrl: string;
  calls: ModelCall[];
}

/**
 * The fake model behind a proxy that times each request from its arrival (headers) to the
 * end of its response, and tells its role from the tools offered, as the fake does.
 */
async function startTimedModel(cleanup: Cleanup, script: Script): Promise<TimedModel> {
  const fake = await startFakeModel(agentModel(script));
  cleanup.defer("close fake model", () => fake.close());
  const upstream = new URL(fake.baseUrl);
  const agent = new http.Agent({ keepAlive: true });
  cleanup.defer("close proxy agent", () => agent.destroy());
  const calls: ModelCall[] = [];
  const server = http.createServer((req, res) => {
    const started = performance.now();
    const call: ModelCall = { role: "unknown", ms: undefined };
    calls.push(call);
    res.on("finish", () => (call.ms = performance.now() - started));
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      try {
        const parsed = JSON.parse(body.toString("utf8")) as {
          messages?: FakeMessage[];
          tools?: Array<{ function?: { name?: string } }>;
        };
        call.role = roleOf({
          model: "",
          messages: parsed.messages ?? [],
          tools: (parsed.tools ?? []).map((t) => String(t.function?.name)),
          stream: false,
          body: parsed,
          headers: req.headers,
        });
      } catch {
        // not JSON: the fake answers 400, and the task fails loudly
      }
      const forward = http.request(
        {
          host: upstream.hostname,
          port: upstream.port,
          path: req.url,
          method: req.method,
          headers: { ...req.headers, host: upstream.host },
          agent,
        },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      forward.on("error", (error) => res.destroy(error));
      forward.end(body);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  cleanup.defer("close model proxy", async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  const { port } = server.address() as AddressInfo;
  return { baseUrl: `http://127.0.0.1:${port}/v1`, calls };
}

async function api(
  base: string,
  method: "GET" | "POST",
  route: string,
  options: { key?: string; body?: unknown; expect: number },
): Promise<Record<string, unknown>> {
  const res = await fetch(`${base}${route}`, {
    method,
    headers: {
      "content-type": "application/json",
      ...(options.key ? { "x-api-key": options.key } : {}),
    },
    ...(options.body !== undefined ? { body: JSON.stringify(options.body) } : {}),
  });
  const text = await res.text();
  if (res.status !== options.expect)
    throw new BenchError(`${method} ${route} answered ${res.status}: ${text}`);
  return JSON.parse(text) as Record<string, unknown>;
}

/** A pro account (no monthly limit) with a key and a plain-git workspace on `repo`. */
async function setUpAccount(
  service: Service,
  repo: GitFixture,
): Promise<{ key: string; workspaceId: string }> {
  const base = service.http!.url;
  const created = await api(base, "POST", "/keys/generate", {
    body: { name: "bench" },
    expect: 201,
  });
  const key = String(created.key);
  const principal = await authenticateKey(service.db.models, key);
  if (!principal) throw new BenchError("the generated key does not authenticate");
  // Tiers are never set over HTTP (the operator CLI does it): the same write and invalidation.
  await service.db.models.Account.updateOne(
    { _id: principal.accountId },
    { $set: { tier: "pro" } },
  );
  await accountChanged(service.db.models, principal.accountId);
  const workspace = await api(base, "POST", "/workspaces", {
    key,
    body: { name: "local", repos: [{ name: "acme/calc", clone_url: repo.dir }] },
    expect: 201,
  });
  return { key, workspaceId: String(workspace.id) };
}

interface TaskRun {
  taskId: string;
  wallMs: Record<Stage, number>;
  modelMs: Record<Stage, number>;
  testMs: Record<Stage, number>;
  overheadMs: Record<Stage, number>;
  modelCalls: number;
  totalWallMs: number;
  totalOverheadMs: number;
  /** The checks' own duration_ms, summed (the in-task counterpart of the baseline). */
  checksMs: number;
  /** The commit the checks were compared with; null: the base's checks did not run. */
  baseCommit: string | null;
}

const zeroes = (): Record<Stage, number> =>
  Object.fromEntries(STAGES.map((s) => [s, 0])) as Record<Stage, number>;

async function timeout<T>(promise: Promise<T>, ms: number, what: () => string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new BenchError(what())), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** Runs one task to its end and splits its wall time per stage. */
async function runTask(
  service: Service,
  model: TimedModel,
  account: { key: string; workspaceId: string },
  n: number,
  trace: boolean,
): Promise<TaskRun> {
  const base = service.http!.url;
  const firstCall = model.calls.length;
  const created = await api(base, "POST", "/tasks", {
    key: account.key,
    body: {
      workspace_id: account.workspaceId,
      repo_id: "acme/calc",
      description: `Make clamp respect both bounds (run ${n})`,
      auto_approve: true,
    },
    expect: 201,
  });
  const taskId = String(created.id);
  const stream = await openTaskStream(base, taskId, account.key);
  const phaseOf = (e: StreamEvent) => String(e.phase);
  try {
    await timeout(
      stream.closed,
      TASK_TIMEOUT_MS,
      () =>
        `task ${taskId} did not end within ${TASK_TIMEOUT_MS / 1000} s; phases: ` +
        stream.events
          .filter((e) => e.event_type === "phase")
          .map(phaseOf)
          .join(", "),
    );
  } finally {
    stream.close();
  }
  const task = await api(base, "GET", `/tasks/${taskId}`, { key: account.key, expect: 200 });
  if (task.status !== "completed")
    throw new BenchError(`task ${taskId} ended ${String(task.status)}: ${String(task.error)}`);

  const phases = stream.events.filter((e) => e.event_type === "phase");
  const trail = phases.map(phaseOf);
  if (trace) {
    const start = Date.parse(stream.events[0]!.ts);
    for (const e of stream.events) {
      const what = e.event_type === "phase" ? `${phaseOf(e)}/${String(e.status)}` : e.message;
      const text = String(what ?? "")
        .split("\n")[0]!
        .slice(0, 110);
      console.log(
        `    +${String(Date.parse(e.ts) - start).padStart(5)} ms  ${e.event_type}  ${text}`,
      );
    }
  }
  if (trail.join(",") !== TRAIL.join(","))
    throw new BenchError(
      `task ${taskId} went through ${trail.join(", ")}, not ${TRAIL.join(", ")}`,
    );

  const wallMs = zeroes();
  phases.slice(0, -1).forEach((event, i) => {
    wallMs[phaseOf(event) as Stage] += Date.parse(phases[i + 1]!.ts) - Date.parse(event.ts);
  });

  const modelMs = zeroes();
  const calls = model.calls.slice(firstCall);
  for (const call of calls) {
    const stage = STAGE_OF_ROLE[call.role];
    if (!stage) throw new BenchError(`task ${taskId} asked the model as "${call.role}"`);
    if (call.ms === undefined) throw new BenchError(`a ${call.role} model call did not finish`);
    modelMs[stage] += call.ms;
  }

  const checks = task.checks as {
    base_commit?: unknown;
    results?: Array<{ duration_ms?: unknown }>;
  } | null;
  const results = checks?.results ?? [];
  if (results.length === 0) throw new BenchError(`task ${taskId} recorded no checks`);
  const checksMs = results.reduce((sum, r) => sum + Number(r.duration_ms ?? Number.NaN), 0);
  if (!Number.isFinite(checksMs))
    throw new BenchError(`task ${taskId}: checks without duration_ms: ${JSON.stringify(checks)}`);
  const testMs = zeroes();
  testMs.VERIFYING = checksMs;

  const overheadMs = zeroes();
  for (const stage of STAGES) overheadMs[stage] = wallMs[stage] - modelMs[stage] - testMs[stage];
  const sum = (r: Record<Stage, number>) => STAGES.reduce((total, s) => total + r[s], 0);
  return {
    taskId,
    wallMs,
    modelMs,
    testMs,
    overheadMs,
    modelCalls: calls.length,
    totalWallMs: sum(wallMs),
    totalOverheadMs: sum(overheadMs),
    checksMs,
    baseCommit: typeof checks?.base_commit === "string" ? checks.base_commit : null,
  };
}

/** The repository's test run as verification runs it: `npm run test` in the sandbox. */
async function runBaseline(dir: string): Promise<number> {
  const result = await runSandboxed(TEST_COMMAND, {
    cwd: dir,
    timeoutMs: COMMAND_TIMEOUT_S * 1000,
    env: { CI: "true" },
  });
  if (!result.ok)
    throw new BenchError(
      `baseline \`${TEST_COMMAND}\` failed (exit ${result.exitCode}):\n${result.output.slice(-2000)}`,
    );
  return result.durationMs;
}

const ms = (n: number) => `${n.toFixed(0)} ms`;

export const taskOverhead: Benchmark = {
  name: "task-overhead",
  description: "a whole task's non-model, non-test time per stage vs the repository's own test run",
  async run(): Promise<BenchReport> {
    const runs = envInt("BENCH_TASK_OVERHEAD_RUNS", 5, 1, 50);
    const trace = ["1", "true", "yes"].includes(
      (process.env.BENCH_TASK_OVERHEAD_TRACE ?? "").toLowerCase(),
    );
    const cleanup = new Cleanup();
    activeCleanups.add(cleanup);
    try {
      const repo = await createGitRepo(REPO_FILES);
      cleanup.defer("remove repository", () => repo.remove());
      const model = await startTimedModel(cleanup, SCRIPT);
      const { service, engine, tmp } = await startBenchStack(
        cleanup,
        DATABASE,
        {
          ...fakeModelEnv(model, "sk-bench-fake-model-key"),
          COMMAND_TIMEOUT_S: String(COMMAND_TIMEOUT_S),
        },
        { workers: true },
      );
      const account = await setUpAccount(service, repo);

      // The baseline's clone, with the fix the task makes, so the test passes as it does there.
      const clone = path.join(tmp, "baseline");
      await execFileAsync("git", [...GIT, "clone", "-q", repo.dir, clone]);
      await writeFile(path.join(clone, "src/math.ts"), FIXED);
      const firstBaseline = await runBaseline(clone);
      console.log(
        `  baseline \`${TEST_COMMAND}\` passes (first run, not counted: ${ms(firstBaseline)})`,
      );

      const tasks: TaskRun[] = [];
      const baseline: number[] = [];
      for (let i = 1; i <= runs; i++) {
        const run = await runTask(service, model, account, i, trace && i === runs);
        tasks.push(run);
        const test = await runBaseline(clone);
        baseline.push(test);
        console.log(
          `  task ${i}/${runs} ${run.taskId}: wall ${ms(run.totalWallMs)}, overhead ` +
            `${ms(run.totalOverheadMs)} (${STAGES.map((s) => `${s} ${run.overheadMs[s].toFixed(0)}`).join(", ")}); ` +
            `checks in task ${ms(run.checksMs)}, baseline ${ms(test)}; ` +
            (run.baseCommit ? `base ${run.baseCommit.slice(0, 7)} ran` : "no base run"),
        );
      }

      const med = (pick: (r: TaskRun) => number) => median(tasks.map(pick));
      const perStage = STAGES.map((stage) => ({
        stage,
        wallMs: med((r) => r.wallMs[stage]),
        modelMs: med((r) => r.modelMs[stage]),
        testMs: med((r) => r.testMs[stage]),
        overheadMs: med((r) => r.overheadMs[stage]),
      }));
      const overhead = med((r) => r.totalOverheadMs);
      const testRun = median(baseline);
      const ratio = overhead / testRun;
      const withoutBase = tasks.filter((r) => !r.baseCommit).length;

      const rows = [
        ["stage (medians)", "wall ms", "model ms", "test ms", "overhead ms"],
        ...perStage.map((p) => [
          LABELS[p.stage],
          p.wallMs.toFixed(0),
          p.modelMs.toFixed(1),
          p.testMs.toFixed(0),
          p.overheadMs.toFixed(0),
        ]),
        [
          "whole task",
          med((r) => r.totalWallMs).toFixed(0),
          med((r) => STAGES.reduce((t, s) => t + r.modelMs[s], 0)).toFixed(1),
          med((r) => r.checksMs).toFixed(0),
          overhead.toFixed(0),
        ],
      ];
      const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
      for (const row of rows)
        console.log(
          `  ${row.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join("  ")}`,
        );
      console.log(`  baseline \`${TEST_COMMAND}\` in the sandbox: median ${ms(testRun)}`);

      return {
        subjects: [],
        // One sample per task and stage: p50 is the median (the lower middle one for an even
        // count), and "by round" lists every task's figure.
        latencies: [
          ...STAGES.map((stage) =>
            summariseLatencies(
              `${LABELS[stage]} overhead`,
              tasks.map((r) => Float64Array.of(r.overheadMs[stage])),
            ),
          ),
          summariseLatencies(
            "whole task overhead",
            tasks.map((r) => Float64Array.of(r.totalOverheadMs)),
          ),
          summariseLatencies(
            `baseline ${TEST_COMMAND}`,
            baseline.map((b) => Float64Array.of(b)),
          ),
        ],
        checks: [
          {
            name: "task overhead/test run (base run included)",
            value: ratio,
            target: TARGET_RATIO,
            atMost: true,
            pass: ratio <= TARGET_RATIO && withoutBase === 0,
            detail:
              (withoutBase
                ? `${withoutBase} of ${runs} tasks ran no checks on the base commit; `
                : "the base commit's checks ran in every task; ") +
              `${ms(overhead)} of the service's own time per task / ${ms(testRun)} ` +
              `\`${TEST_COMMAND}\` (medians of ${runs}); largest: ` +
              [...perStage]
                .sort((a, b) => b.overheadMs - a.overheadMs)
                .slice(0, 3)
                .map((p) => `${LABELS[p.stage]} ${ms(p.overheadMs)}`)
                .join(", "),
          },
        ],
        info: {
          engine,
          runs,
          medians: Object.fromEntries(perStage.map((p) => [p.stage, p])),
          overheadMs: overhead,
          baselineMs: testRun,
          baselineRunsMs: baseline,
          baselineFirstMs: firstBaseline,
          tasksWithoutBaseRun: withoutBase,
          tasks,
          cpus: os.availableParallelism(),
          node: process.version,
        },
      };
    } finally {
      await cleanup.run();
      activeCleanups.delete(cleanup);
    }
  },
};
