/*
 * Files the service removes at places a repository names stay inside its working copy:
 *
 * - The coverage scan removes an earlier report before its run writes a new one. Where that
 *   report lies comes from the repository: the folder `.foreman-coverage` (a committed link
 *   can point it anywhere) or a coverage script's `--report-dir` (`..` can climb out).
 * - The backtest lays a commit's test files over another commit's tree and removes those the
 *   commit deleted; that tree can hold a link where the commit had a folder.
 *
 * A file of the same name outside (another scan's or task's report, anything the service can
 * write) is left alone.
 */
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, expect, it } from "vitest";
import { overlayFiles } from "../../src/backtest/git.js";
import { removeReport } from "../../src/ecosystems/kit.js";
import { measureCoverage } from "../../src/health/coverage.js";
import { readRepoFiles } from "../../src/health/files.js";
import { createGitRepo, type GitFixture } from "../helpers/git-repo.js";

const cleanups: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const cleanup of cleanups) await cleanup();
});

/** A folder outside every working copy holding a file named as a coverage summary. */
async function victim(): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "foreman-victim-"));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  const file = path.join(dir, "coverage-summary.json");
  await writeFile(file, "{}\n");
  return file;
}

async function repository(files: Record<string, string>): Promise<GitFixture> {
  const fixture = await createGitRepo(files);
  cleanups.push(() => fixture.remove());
  return fixture;
}

async function scan(fixture: GitFixture): Promise<void> {
  await measureCoverage(await readRepoFiles(fixture.dir), {
    root: fixture.dir,
    timeoutMs: 60_000,
  });
}

const PLAIN_TESTS = {
  "package.json": JSON.stringify({ name: "p", version: "1.0.0", scripts: { test: "node t.js" } }),
  "index.js": "export const one = 1;\n",
  "t.js": "console.log('ok');\n",
};

it("leaves a report outside the working copy that a committed .foreman-coverage link points at", async () => {
  const outside = await victim();
  const fixture = await repository(PLAIN_TESTS);
  await symlink(path.dirname(outside), path.join(fixture.dir, ".foreman-coverage"));
  await scan(fixture);
  expect(existsSync(outside)).toBe(true);
}, 90_000);

it("leaves a report outside the working copy that a coverage script's --report-dir climbs to", async () => {
  const outside = await victim();
  const fixture = await repository(PLAIN_TESTS);
  // Written once the fixture's folder is known: the script climbs from it to the victim's.
  const climb = path.relative(fixture.dir, path.dirname(outside));
  await writeFile(
    path.join(fixture.dir, "package.json"),
    JSON.stringify({
      name: "p",
      version: "1.0.0",
      scripts: { test: "node t.js", coverage: `c8 --report-dir=${climb} npm test` },
    }),
  );
  // The scan takes the repository's own script when its tool is installed.
  await mkdir(path.join(fixture.dir, "node_modules", ".bin"), { recursive: true });
  await writeFile(path.join(fixture.dir, "node_modules", ".bin", "c8"), "#!/bin/sh\nexit 1\n", {
    mode: 0o755,
  });
  await scan(fixture);
  expect(existsSync(outside)).toBe(true);
}, 90_000);

it("removes a report inside the working copy, and none through a link or `..`", async () => {
  const outside = await victim();
  const root = await mkdtemp(path.join(os.tmpdir(), "foreman-reports-"));
  cleanups.push(() => rm(root, { recursive: true, force: true }));
  await mkdir(path.join(root, "coverage"));
  const inside = path.join(root, "coverage", "coverage-summary.json");
  await writeFile(inside, "{}\n");
  await symlink(path.dirname(outside), path.join(root, "out"));

  await removeReport(root, path.join(root, "out", "coverage-summary.json"));
  await removeReport(root, path.join(root, path.relative(root, outside)));
  await removeReport(root, path.join(root, "missing", "coverage-summary.json"));
  expect(existsSync(outside)).toBe(true);

  await removeReport(root, inside);
  expect(existsSync(inside)).toBe(false);
});

it("backtest: a test file the commit deleted is removed from the tree, never through a link", async () => {
  const outside = await victim();
  const fixture = await repository({ "a.txt": "a\n" });
  await writeFile(path.join(fixture.dir, "extra.test.js"), "// not in the commit\n");
  await symlink(path.dirname(outside), path.join(fixture.dir, "lnk"));
  await overlayFiles(fixture.dir, "HEAD", ["extra.test.js", "lnk/coverage-summary.json"]);
  expect(existsSync(path.join(fixture.dir, "extra.test.js"))).toBe(false);
  expect(existsSync(outside)).toBe(true);
});
