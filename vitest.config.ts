import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { defineConfig } from "vitest/config";

/*
 * The test files, in two projects. Most share their worker's modules
 * (`isolate: false`): every file imports the service (the model SDKs, mongoose, probot, koa),
 * and importing it again for each of 127 files took about 440 s of the workers' time in CI,
 * a third of the suite. Each file still starts its own server on its own database, and
 * test/shared-per-file.ts puts the settings a service start writes into modules back to their
 * defaults before each file, so what files share is code, not state.
 *
 * Files whose imports reach `nock` (directly or through a helper) are a project of their own:
 * nock patches Node's http module when it is loaded, and its interception outlived the file
 * that used it (a WebSocket client and a TLS agent of later files hung behind it). They share
 * modules among themselves, with test/nock-per-file.ts turning nock on before each file and
 * restoring Node's http module after it.
 */
const TEST_ROOT = path.resolve(import.meta.dirname, "test");

function testFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return testFiles(full);
    return entry.name.endsWith(".ts") ? [full] : [];
  });
}

/** Whether a test file or helper reaches `nock` through its own relative imports. */
function reachesNock(file: string, seen = new Set<string>()): boolean {
  if (seen.has(file)) return false;
  seen.add(file);
  let source: string;
  try {
    source = readFileSync(file, "utf8");
  } catch {
    return false;
  }
  for (const [, spec] of source.matchAll(/(?:from|import)\s*\(?\s*"([^"]+)"/g)) {
    if (spec === "nock") return true;
    if (!spec!.startsWith(".")) continue;
    const target = path.resolve(path.dirname(file), spec!.replace(/\.js$/, ".ts"));
    if (target.startsWith(TEST_ROOT + path.sep) && reachesNock(target, seen)) return true;
  }
  return false;
}

const usingNock = testFiles(TEST_ROOT)
  .filter((f) => f.endsWith(".test.ts") && reachesNock(f))
  .map((f) => path.relative(import.meta.dirname, f));

export default defineConfig({
  test: {
    globalSetup: ["test/global-setup.ts"],
    // Bounds, not waits: a test that waits on real processes (git, the sandbox, the worker)
    // must fit a loaded 2-core machine; a fast test ends as soon as it is done.
    testTimeout: 120_000,
    hookTimeout: 180_000,
    // Files at a time against the one embedded database: 2 (two cores) unless
    // FOREMAN_TEST_WORKERS says otherwise. Set here, not with --maxWorkers: the projects below
    // take theirs from this config, and vitest prefers a project's own value to the command
    // line's.
    maxWorkers: Number(process.env.FOREMAN_TEST_WORKERS) || 2,
    // No retries: a test that fails once fails the run. Tests that wait on real processes
    // await events, and size their bounds for a loaded 2-core machine with the reason beside.
    retry: 0,
    pool: "forks",
    reporters: ["default"],
    projects: [
      {
        extends: true,
        test: {
          name: "shared",
          include: ["test/**/*.test.ts"],
          exclude: usingNock,
          setupFiles: ["test/shared-per-file.ts"],
          isolate: false,
        },
      },
      {
        extends: true,
        test: {
          name: "nock",
          include: usingNock,
          isolate: false,
          setupFiles: ["test/shared-per-file.ts", "test/nock-per-file.ts"],
        },
      },
    ],
  },
});
