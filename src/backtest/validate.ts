import { access } from "node:fs/promises";
import path from "node:path";
import { addWorktree, overlayFiles, removeWorktree } from "./git.js";
import { detectEcosystem } from "./ecosystems.js";
import { runTests, sameResults, setupTree, type RunSettings, type TestRun } from "./tests.js";
import type { BacktestCase, MinedCase } from "./types.js";

/**
 * Validates a mined case (docs/operations.md, "Backtest"): the commit's test files laid over its
 * parent, and the commit itself, each run twice. Fail-to-pass: fails over the parent, passes at the
 * commit; pass-to-pass: passes at both. Valid with at least one fail-to-pass test and the same
 * results in both rounds (else flaky).
 */
export async function validateCase(
  repo: string,
  mined: MinedCase,
  scratch: string,
  settings: RunSettings,
): Promise<BacktestCase> {
  const started = performance.now();
  const before = path.join(scratch, `${mined.id}-parent`);
  const after = path.join(scratch, `${mined.id}-commit`);
  const base = { ...mined, ecosystem: null as string | null, fail_to_pass: [], pass_to_pass: [] };
  try {
    await Promise.all([
      addWorktree(repo, before, mined.parent),
      addWorktree(repo, after, mined.commit),
    ]);
    const ecosystem = await detectEcosystem(after);
    const done = (
      rest: Partial<BacktestCase> & Pick<BacktestCase, "validity">,
      testMs = 0,
    ): BacktestCase => ({
      ...base,
      ecosystem: ecosystem?.name ?? null,
      validation_ms: Math.round(performance.now() - started),
      test_run_ms: Math.round(testMs),
      ...rest,
    });
    if (!ecosystem)
      return done({
        validity: "unsupported",
        reason: "no known ecosystem (package.json, pyproject.toml/setup.py, go.mod)",
      });
    await overlayFiles(before, mined.commit, mined.test_files);
    // Only the commit's test files that still exist at the commit are run.
    const files = await existing(after, mined.test_files);
    let testMs = (await setupTree(before, settings)) + (await setupTree(after, settings));
    const rounds: Array<{ parent: TestRun; commit: TestRun }> = [];
    for (let round = 0; round < 2; round++) {
      const parent = await runTests(before, ecosystem, files, settings);
      const commit = await runTests(after, ecosystem, files, settings);
      testMs += parent.ms + commit.ms;
      rounds.push({ parent, commit });
    }
    const [first, second] = rounds as [(typeof rounds)[0], (typeof rounds)[0]];
    if (first.commit.results.size === 0)
      return done(
        { validity: "no_tests", reason: "the selected tests reported no result at the commit" },
        testMs,
      );
    const f2p: string[] = [];
    const p2p: string[] = [];
    for (const [id, outcome] of first.commit.results) {
      if (outcome !== "pass") continue;
      const atParent = first.parent.results.get(id) ?? "fail";
      (atParent === "pass" ? p2p : f2p).push(id);
    }
    if (
      !sameResults(first.parent.results, second.parent.results) ||
      !sameResults(first.commit.results, second.commit.results)
    ) {
      const changed = [...first.commit.results.keys(), ...first.parent.results.keys()].filter(
        (id) =>
          first.commit.results.get(id) !== second.commit.results.get(id) ||
          first.parent.results.get(id) !== second.parent.results.get(id),
      );
      return done(
        {
          validity: "flaky",
          reason: `results changed between two runs: ${[...new Set(changed)].join(", ")}`,
          fail_to_pass: f2p.sort(),
          pass_to_pass: p2p.sort(),
        },
        testMs,
      );
    }
    if (f2p.length === 0)
      return done(
        {
          validity: "no_fail_to_pass",
          reason: "every selected test that passes at the commit already passes at its parent",
          pass_to_pass: p2p.sort(),
        },
        testMs,
      );
    return done({ validity: "valid", fail_to_pass: f2p.sort(), pass_to_pass: p2p.sort() }, testMs);
  } finally {
    await Promise.all([removeWorktree(repo, before), removeWorktree(repo, after)]);
  }
}

export async function existing(tree: string, files: string[]): Promise<string[]> {
  const out: string[] = [];
  for (const f of files)
    if (
      await access(path.join(tree, f)).then(
        () => true,
        () => false,
      )
    )
      out.push(f);
  return out;
}
