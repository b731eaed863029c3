import path from "node:path";
import { isTestPath, languageOf } from "../ecosystems/source-files.js";
import { readText as readInside } from "../util/workcopy-fs.js";

/*
 * How the harness selects and runs the tests a commit changed, per ecosystem (one entry
 * each; the registry's order is detection order). A test id is what a run reports as
 * passed or failed: a test file (JavaScript/TypeScript), a pytest node id, a Go test name.
 */

export type TestOutcome = "pass" | "fail";

export interface TestCommand {
  /** Shell command, run in the sandbox at the worktree's root. */
  command: string;
  /** Reads the run's per-test results from its output and exit code. */
  parse(output: string, exitCode: number | null): Map<string, TestOutcome>;
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

/** The JavaScript/TypeScript test runner a package.json names (node:test when none). */
function jsRunner(pkg: Record<string, unknown>): (file: string) => string {
  const deps = {
    ...(pkg.dependencies as Record<string, string> | undefined),
    ...(pkg.devDependencies as Record<string, string> | undefined),
  };
  const bin = (name: string) => `./node_modules/.bin/${name}`;
  if (deps.vitest) return (f) => `${bin("vitest")} run ${quote(f)}`;
  if (deps.jest) return (f) => `${bin("jest")} ${quote(f)}`;
  if (deps.mocha) return (f) => `${bin("mocha")} ${quote(f)}`;
  if (deps.ava) return (f) => `${bin("ava")} ${quote(f)}`;
  if (deps.tap) return (f) => `${bin("tap")} ${quote(f)}`;
  if (deps.uvu) return (f) => `${bin("uvu")} . ${quote(f)}`;
  if (deps.tape) return (f) => `node ${bin("tape")} ${quote(f)}`;
  return (f) => `node --test ${quote(f)}`;
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
    // One run per file: a file is the unit the runner reports on reliably.
    return testFiles.map((file) => ({
      command: runner(file),
      parse: (_output, exitCode) => new Map([[file, exitCode === 0 ? "pass" : "fail"]]),
    }));
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
        parse(output) {
          const results = new Map<string, TestOutcome>();
          for (const m of output.matchAll(/^(PASSED|FAILED|ERROR|XPASS|XFAIL)\s+(\S+)/gm)) {
            const id = m[2]!;
            const ok = m[1] === "PASSED" || m[1] === "XFAIL";
            // A test reported twice (failed in a fixture's teardown): a failure wins.
            if (!ok || !results.has(id)) results.set(id, ok ? "pass" : "fail");
          }
          return results;
        },
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
        parse(output) {
          const results = new Map<string, TestOutcome>();
          for (const m of output.matchAll(/^\s*--- (PASS|FAIL): (\S+)/gm)) {
            if (names.has(m[2]!.split("/")[0]!))
              results.set(m[2]!, m[1] === "PASS" ? "pass" : "fail");
          }
          // A package that did not build reports no test: each selected one failed.
          if (results.size === 0) for (const n of names) results.set(n, "fail");
          return results;
        },
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
