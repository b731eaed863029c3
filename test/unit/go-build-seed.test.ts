import { execFile } from "node:child_process";
import { mkdir, mkdtemp, readdir, stat, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  buildGoSeed,
  goBuildSeedLayer,
  goSeedDir,
  goSeedKey,
  readyGoSeed,
} from "../../src/util/go-build-seed.js";
import {
  configureSandboxCaches,
  enforceCacheBudget,
  removeTree,
  withBuildCache,
} from "../../src/util/sandbox-cache.js";
import { runSandboxed, type SandboxCache } from "../../src/util/sandbox.js";

/*
 * The Go build seed (util/go-build-seed.ts): the standard library compiled once per host,
 * through the sandbox, into a seed GOCACHE that a new account's build cache starts from (the
 * lower layer of its overlay). A new account's first `go test` in the real sandbox then
 * compiles its own package only, and what an account writes into its cache reaches neither
 * the seed nor another account.
 */

const execFileAsync = promisify(execFile);
let dir: string;
let pkg: string;
let seed: string | undefined;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "foreman-go-seed-test-"));
  configureSandboxCaches({ root: path.join(dir, "caches"), goBuildSeed: true });
  pkg = path.join(dir, "calc");
  await mkdir(pkg);
  await writeFile(path.join(pkg, "go.mod"), "module example.com/calc\n\ngo 1.21\n");
  await writeFile(
    path.join(pkg, "calc.go"),
    'package calc\n\nimport "strings"\n\n// Shout upper-cases s.\nfunc Shout(s string) string { return strings.ToUpper(s) + "!" }\n',
  );
  await writeFile(
    path.join(pkg, "calc_test.go"),
    'package calc\n\nimport (\n\t"fmt"\n\t"testing"\n)\n\nfunc TestShout(t *testing.T) {\n\tif got := Shout("hi"); got != fmt.Sprint("HI!") {\n\t\tt.Fatalf("Shout(hi) = %q", got)\n\t}\n}\n',
  );
});

afterAll(async () => {
  configureSandboxCaches({});
  await removeTree(dir);
});

/** The files under `folder`, relative, sorted. */
async function files(folder: string): Promise<string[]> {
  const { stdout } = await execFileAsync("find", [folder, "-type", "f", "-printf", "%P\\n"], {
    maxBuffer: 64 * 1024 * 1024,
  });
  return stdout.split("\n").filter(Boolean).sort();
}

/** The packages `go test -x` compiled (the `-p` of each compile command). */
function compiled(output: string): string[] {
  return [...output.matchAll(/\/compile -o \S+ .*?-p (\S+)/g)].map((m) => m[1]!).sort();
}

const run = (command: string, cache: SandboxCache) =>
  runSandboxed(command, { cwd: pkg, timeoutMs: 300_000, cache, maxOutputBytes: 8 * 1024 * 1024 });

describe("the Go build seed", () => {
  it("is made in the background, through the sandbox, once Go is in use", async () => {
    const key = (await goSeedKey())!;
    const lock = path.join(path.dirname(goSeedDir(key)), ".building");
    // A build cache without a Go cache (Go not seen in use yet): nothing is started.
    const none = await withBuildCache({ account: "acct_none", repo: "ws/calc" }, undefined);
    expect(await goBuildSeedLayer(none.build!, true)).toBeUndefined();
    expect(await stat(lock).catch(() => null)).toBeNull();
    // Go in use on this host (a build cache holding a Go cache) and no seed: the next run's
    // mount starts the seed's build in the background, one at a time.
    const user = await withBuildCache({ account: "acct_user", repo: "ws/calc" }, undefined);
    await mkdir(path.join(user.build!, "go-build"));
    expect(await goBuildSeedLayer(user.build!, true)).toBeUndefined();
    await expect.poll(() => stat(lock).catch(() => null)).toBeTruthy();
    expect(await buildGoSeed()).toBeUndefined(); // the lock is held
    await expect.poll(() => readyGoSeed(), { timeout: 890_000, interval: 2000 }).toBeDefined();
    seed = await readyGoSeed();
  }, 900_000);

  it("makes a new account's first go test compile only its own package", async () => {
    expect(seed).toBeDefined();
    expect(await readyGoSeed()).toBe(seed);
    const before = await files(seed!);
    expect(before.length).toBeGreaterThan(1000);

    const cache = await withBuildCache({ account: "acct_new", repo: "ws/calc" }, undefined);
    const first = await run("go test -x -count=1 ./...", cache);
    expect(first.ok, first.output.slice(-3000)).toBe(true);
    // Nothing of the standard library is compiled again: only the package and its test main.
    expect(compiled(first.output)).toEqual(["example.com/calc", "main"]);
    // Nor vetted for facts again: the package itself only.
    expect(first.output.match(/\/vet /g)).toHaveLength(1);

    // What the run wrote went to the account's folder; the seed is as it was.
    expect(await files(seed!)).toEqual(before);
    expect((await files(cache.build!)).length).toBeGreaterThan(0);
  }, 600_000);

  it("never receives what an account writes, nor shows it to another account", async () => {
    const a = await withBuildCache({ account: "acct_a", repo: "ws/calc" }, undefined);
    const planted = await run(
      "echo planted > /build-cache/go-build/00/planted-by-a && ls /build-cache/go-build/00 | wc -l",
      a,
    );
    expect(planted.ok, planted.output).toBe(true);
    // The account saw the seed's entries beside its own file…
    expect(Number(planted.output.trim())).toBeGreaterThan(1);
    // …which is in its own folder only.
    expect(await stat(path.join(a.build!, "go-build/00/planted-by-a"))).toBeTruthy();
    expect(await stat(path.join(seed!, "go-build/00/planted-by-a")).catch(() => null)).toBeNull();

    const b = await withBuildCache({ account: "acct_b", repo: "ws/calc" }, undefined);
    const seen = await run(
      "test ! -e /build-cache/go-build/00/planted-by-a && ls /build-cache/go-build | wc -l",
      b,
    );
    expect(seen.ok, seen.output).toBe(true);
    expect(Number(seen.output.trim())).toBeGreaterThan(200); // the seed's 256 folders
  }, 120_000);

  it("is copied into a new build cache where there is no overlay, never over an account's own", async () => {
    const fresh = path.join(dir, "fresh-build");
    await mkdir(fresh);
    expect(await goBuildSeedLayer(fresh, false)).toBeUndefined();
    expect((await files(fresh)).length).toBe((await files(seed!)).length);

    const used = path.join(dir, "used-build");
    await mkdir(path.join(used, "go-build"), { recursive: true });
    await writeFile(path.join(used, "go-build", "own"), "x");
    await goBuildSeedLayer(used, false);
    expect(await readdir(path.join(used, "go-build"))).toEqual(["own"]);
    // With an overlay, the seed's folder is the lower layer.
    expect(await goBuildSeedLayer(used, true)).toBe(seed);
  });

  it("counts once in the cache budget, as a build cache", async () => {
    configureSandboxCaches({ root: path.join(dir, "caches"), goBuildSeed: true, maxMb: 1 });
    try {
      // Recently used: spared even over the budget, but listed with the build caches.
      expect(await enforceCacheBudget(Date.now())).toEqual([]);
      const later = Date.now() + 60 * 60_000;
      expect(await enforceCacheBudget(later)).toContain(seed);
      expect(await readyGoSeed()).toBeUndefined();
    } finally {
      configureSandboxCaches({ root: path.join(dir, "caches"), goBuildSeed: true });
    }
  });
});
