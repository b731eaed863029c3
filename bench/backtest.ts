/*
 * Backtest harness overhead: the harness's own time per case (mining, validation, scoring)
 * against the time the repository's own test runs take for that case (the baseline: the
 * commands the harness must run anyway, four in validation and one in scoring). Target:
 * at most 1.5×.
 *
 * The cases are the history built by test/helpers/backtest-repo.ts (a small node:test
 * repository: two valid cases, one flaky, one not a case), or BACKTEST_BENCH_REPO (a path
 * to a git clone; BACKTEST_BENCH_CASES cases, default 5). Scoring applies each valid case's
 * own change (the oracle's diff); no service and no model are involved: the harness part
 * only.
 */
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { git } from "../src/backtest/git.js";
import { mineCases } from "../src/backtest/mine.js";
import { scoreDiff } from "../src/backtest/run-case.js";
import type { BacktestCase } from "../src/backtest/types.js";
import { validateCase } from "../src/backtest/validate.js";
import { configureSandbox } from "../src/sandbox/index.js";
import { createBacktestRepo } from "../test/helpers/backtest-repo.js";
import { activeCleanups, Cleanup, type Benchmark, type BenchReport } from "./lib/harness.js";

export const TARGET_RATIO = 1.5;

export const backtestBench: Benchmark = {
  name: "backtest",
  description: "backtest harness time per case (mine, validate, score) vs the case's own test runs",
  async run(): Promise<BenchReport> {
    configureSandbox({ engine: "bwrap", network: "none" });
    const cleanup = new Cleanup();
    activeCleanups.add(cleanup);
    try {
      let repo = process.env.BACKTEST_BENCH_REPO;
      if (!repo) {
        const fixture = await createBacktestRepo();
        cleanup.defer("remove the repository", () => fixture.remove());
        repo = fixture.dir;
      }
      const max = Number(process.env.BACKTEST_BENCH_CASES ?? 5);
      const scratch = await mkdtemp(path.join(os.tmpdir(), "foreman-bench-backtest-"));
      cleanup.defer("remove the scratch trees", () =>
        rm(scratch, { recursive: true, force: true }),
      );
      const settings = { timeoutMs: 300_000 };

      const mineStart = performance.now();
      const mined = await mineCases(repo, path.basename(repo), { max });
      const mineMs = performance.now() - mineStart;

      let harnessMs = mineMs;
      let testMs = 0;
      const cases: BacktestCase[] = [];
      const perCase: Array<Record<string, unknown>> = [];
      for (const m of mined) {
        const c = await validateCase(repo, m, scratch, settings);
        cases.push(c);
        let scoreMs = 0;
        let scoreTestMs = 0;
        let resolved: boolean | null = null;
        if (c.validity === "valid") {
          const gold = await git(repo, [
            "diff",
            "--no-color",
            c.parent,
            c.commit,
            "--",
            ...c.source_files,
          ]);
          const score = await scoreDiff(c, gold, { mirror: repo, scratch, settings });
          scoreMs = score.ms;
          scoreTestMs = score.testMs;
          resolved = score.resolved;
        }
        harnessMs += c.validation_ms + scoreMs;
        testMs += c.test_run_ms + scoreTestMs;
        perCase.push({
          id: c.id,
          validity: c.validity,
          validation_ms: c.validation_ms,
          validation_test_ms: c.test_run_ms,
          scoring_ms: scoreMs,
          scoring_test_ms: scoreTestMs,
          oracle_resolved: resolved,
        });
      }
      const n = Math.max(1, cases.length);
      const ratio = testMs > 0 ? harnessMs / testMs : Infinity;
      console.log(
        `  ${cases.length} cases (${cases.filter((c) => c.validity === "valid").length} valid): harness ${(harnessMs / n).toFixed(0)} ms/case, own test runs ${(testMs / n).toFixed(0)} ms/case, mining ${mineMs.toFixed(0)} ms in all`,
      );
      return {
        subjects: [],
        checks: [
          {
            name: "harness time per case / the case's own test runs",
            value: Math.round(ratio * 100) / 100,
            target: TARGET_RATIO,
            atMost: true,
            pass: ratio <= TARGET_RATIO,
            detail: `${(harnessMs / n).toFixed(0)} ms vs ${(testMs / n).toFixed(0)} ms per case over ${cases.length} cases`,
          },
        ],
        info: { repo, mine_ms: Math.round(mineMs), cases: perCase },
      };
    } finally {
      await cleanup.run();
      activeCleanups.delete(cleanup);
    }
  },
};
