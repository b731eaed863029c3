import path from "node:path";
import { isTestPath, languageOf } from "../ecosystems/source-files.js";
import { readText as readInside } from "../workcopy/fs.js";

/*
 * How the harness selects and runs the tests a commit changed, per ecosystem (one entry
 * each; the registry's order is detection order). What a run did is read per test by the
 * service's one reader (verify/tests/): a test id is the runner's own, as verification
 * names it (`file > suite > name`, a pytest node id, `pkg/TestName`). Only a JavaScript
 * runner that module cannot read (ava, tap, uvu, tape) is judged per file, by exit status.
 */

export type TestOutcome = "pass" | "fail";

export interface TestCommand {
  /** Shell command, run in the sandbox at the worktree's root. */
  command: string;
  /**
   * The id a run that reports no test by id stands for (its one test file), judged by its
   * exit status; absent when the command's tests are always read per test.
   */
  wholeFile?: string;
}

export interface BacktestEcosystem {
  name: "javascript" | "python" | "go";
  /** True when the tree at `root` is this ecosystem's (its manifest is there). */
  detect(root: string): Promise<boolean>;
  /** The commands that run `testFiles` (repository paths) in the tree at `root`. */
  commands(root: string, testFiles: string[]): Promise<TestCommand[]>;
}

const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/** Manifests and test files are read without following a link (the repository's own tree). */
const MAX_READ_BYTES = 16 * 1024 * 1024;
async function readText(root: string, rel: string): Promise<string | null> {
  return (await readInside(root, rel, { maxBytes: MAX_READ_BYTES })) ?? null;
}

/**
 * The JavaScript/TypeScript test runner a package.json names (node:test when none): a
 * command for the given files, and whether verify/tests reads its results per test.
 */
function jsRunner(pkg: Record<string, unknown>): {
  perTest: boolean;
  command: (files: string[]) => string;
} {
  const deps = {
    ...(pkg.dependencies as Record<string, string> | undefined),
    ...(pkg.devDependencies as Record<string, string> | undefined),
  };
  const bin = (name: string) => `./node_modules/.bin/${name}`;
  const run = (prefix: string, perTest: boolean) => ({
    perTest,
    command: (files: string[]) => `${prefix} ${files.map(quote).join(" ")}`,
  });
  if (deps.vitest) return run(`${bin("vitest")} run`, true);
  if (deps.jest) return run(bin("jest"), true);
  if (deps.mocha) return run(bin("mocha"), true);
  if (deps.ava) return run(bin("ava"), false);
  if (deps.tap) return run(bin("tap"), false);
  if (deps.uvu) return run(`${bin("uvu")} .`, false);
  if (deps.tape) return run(`node ${bin("tape")}`, false);
  return run("node --test", true);
}

const javascript: BacktestEcosystem = {
  name: "javascript",
  async detect(root) {
    return (await readText(root, "package.json")) !== null;
  },
  async commands(root, testFiles) {
    let pkg: Record<string, unknown> = {};
    try {
      pkg = JSON.parse((await readText(root, "package.json")) ?? "{}") as Record<string, unknown>;
    } catch {
      // an unreadable manifest: node:test
    }
    const runner = jsRunner(pkg);
    if (runner.perTest) return testFiles.length > 0 ? [{ command: runner.command(testFiles) }] : [];
    // A runner read by nothing: one run per file, the file passing or failing as a whole.
    return testFiles.map((file) => ({ command: runner.command([file]), wholeFile: file }));
  },
};

const python: BacktestEcosystem = {
  name: "python",
  async detect(root) {
    for (const f of ["pyproject.toml", "setup.py", "setup.cfg", "pytest.ini", "tox.ini"])
      if ((await readText(root, f)) !== null) return true;
    return false;
  },
  async commands(_root, testFiles) {
    return [
      {
        // The first python3 with pytest, else the `pytest` on the PATH (a system package).
        command:
          `if python3 -c 'import pytest' 2>/dev/null; then set -- python3 -m pytest; else set -- pytest; fi; ` +
          `"$@" -rA -q -p no:cacheprovider ${testFiles.map(quote).join(" ")}`,
      },
    ];
  },
};

const go: BacktestEcosystem = {
  name: "go",
  async detect(root) {
    return (await readText(root, "go.mod")) !== null;
  },
  async commands(root, testFiles) {
    const names = new Set<string>();
    const packages = new Set<string>();
    for (const file of testFiles) {
      packages.add(`./${path.posix.dirname(file)}`);
      const text = (await readText(root, file)) ?? "";
      for (const m of text.matchAll(/^func (Test\w+)\(/gm)) names.add(m[1]!);
    }
    if (names.size === 0) return [];
    const pattern = `^(${[...names].join("|")})$`;
    return [
      {
        command: `go test -count=1 -v -run ${quote(pattern)} ${[...packages].map(quote).join(" ")}`,
      },
    ];
  },
};

/** The ecosystems the harness knows, in detection order. */
export const BACKTEST_ECOSYSTEMS: readonly BacktestEcosystem[] = [go, python, javascript];

/** The ecosystem of a tree, by its manifests; null when none is known. */
export async function detectEcosystem(root: string): Promise<BacktestEcosystem | null> {
  for (const eco of BACKTEST_ECOSYSTEMS) if (await eco.detect(root)) return eco;
  return null;
}

/** True for a test file of any language by its conventions. */
export function isTestFile(rel: string): boolean {
  return isTestPath(rel, languageOf(rel));
}

/** True for a non-test source file (code the agent would change). */
export function isSourceFile(rel: string): boolean {
  const language = languageOf(rel);
  return language !== null && !isTestPath(rel, language);
}
