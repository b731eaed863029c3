import { mkdir, readdir, symlink } from "node:fs/promises";
import path from "node:path";
import { measureCoverage } from "../../src/health/coverage.js";
import { readRepoFiles } from "../../src/health/files.js";
import { sandboxCache } from "../../src/sandbox/cache.js";
import { createGitRepo, type GitFixture } from "./git-repo.js";

/*
 * The coverage scan on a small fixture repository, for test/unit/health-coverage-runners.test.ts
 * (the JavaScript runners, on every Node of the matrix) and health-coverage-native.test.ts
 * (Python and Go, on one Node: nothing of theirs depends on it).
 */

export const ROOT = path.resolve(import.meta.dirname, "../..");
// Each test runs a real runner: jest, vitest, pytest, or `go test`, which compiles the testing
// packages with coverage when the build cache is cold (~20 s idle, well over a minute on a
// loaded 2-core machine). The scan's own budget runs out first, so a slow run fails with the
// tool's reason rather than a bare test timeout.
export const SCAN_BUDGET_MS = 150_000;

/**
 * The service's packages installed into `dir`'s node_modules as links, one per package: the
 * scan looks for a tool (`node_modules/.bin/c8`, `node_modules/@vitest/coverage-v8`) without
 * following a link on the way (workcopy/fs.ts), so node_modules, `.bin` and the scope
 * folders are real folders, as npm makes them.
 */
async function linkPackages(from: string, dir: string): Promise<void> {
  const to = path.join(dir, "node_modules");
  await mkdir(to);
  for (const entry of await readdir(from)) {
    if (entry !== ".bin" && !entry.startsWith("@")) {
      await symlink(path.join(from, entry), path.join(to, entry));
      continue;
    }
    await mkdir(path.join(to, entry));
    for (const inner of await readdir(path.join(from, entry)))
      await symlink(path.join(from, entry, inner), path.join(to, entry, inner));
  }
}

/** Scans `files` committed to a new repository (kept in `fixtures` for the caller to remove). */
export async function scanFixture(
  fixtures: GitFixture[],
  files: Record<string, string>,
  linkNodeModules: boolean,
) {
  const fixture = await createGitRepo({ ".gitignore": "node_modules\n", ...files });
  fixtures.push(fixture);
  if (linkNodeModules) await linkPackages(path.join(ROOT, "node_modules"), fixture.dir);
  const repo = await readRepoFiles(fixture.dir);
  const result = await measureCoverage(repo, {
    root: fixture.dir,
    timeoutMs: SCAN_BUDGET_MS,
    // One package cache for these fixtures (as an account's repository has), kept between
    // runs: Go's build cache of the standard library is warm after the first.
    cache: await sandboxCache({ account: "test-coverage-runners", repo: "fixtures" }),
  });
  const languages = result.details.languages as Array<Record<string, unknown>>;
  return { result, language: languages[0]! };
}
