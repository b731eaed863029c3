import { mkdir, mkdtemp, readdir, utimes, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  backgroundPruneDone,
  configureSandboxCaches,
  enforceCacheBudget,
  removeTree,
  withBuildCache,
} from "../../src/sandbox/cache.js";
import { runSandboxed } from "../../src/sandbox/index.js";

/*
 * Build caches kept per account and repository (sandbox/cache.ts, withBuildCache): a
 * Go package's `go test ./...` in the real sandbox (bubblewrap) compiles the standard library
 * into the account's build cache once; the next run of that account and repository reuses it
 * (Go reports the test result as cached), while another account's runs see an empty cache of
 * their own. The build caches count in SANDBOX_CACHE_MAX_MB and go least recently used first.
 */

let dir: string;
let pkg: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "foreman-build-cache-"));
  configureSandboxCaches({ root: path.join(dir, "caches") });
  pkg = path.join(dir, "calc");
  await mkdir(pkg);
  await writeFile(path.join(pkg, "go.mod"), "module example.com/calc\n\ngo 1.21\n");
  await writeFile(
    path.join(pkg, "calc.go"),
    'package calc\n\nimport "strings"\n\n// Shout upper-cases s.\nfunc Shout(s string) string { return strings.ToUpper(s) + "!" }\n',
  );
  await writeFile(
    path.join(pkg, "calc_test.go"),
    'package calc\n\nimport "testing"\n\nfunc TestShout(t *testing.T) {\n\tif got := Shout("hi"); got != "HI!" {\n\t\tt.Fatalf("Shout(hi) = %q", got)\n\t}\n}\n',
  );
});

afterAll(async () => {
  configureSandboxCaches({});
  await removeTree(dir);
});

const goTest = (cache: Awaited<ReturnType<typeof withBuildCache>>) =>
  runSandboxed("go test ./...", { cwd: pkg, timeoutMs: 300_000, cache });

describe("build caches", () => {
  it("are reused by the next run of the same account and repository, never seen by another account", async () => {
    const owner = { account: "acct_a", repo: "ws_1/calc" };
    const first = await goTest(await withBuildCache(owner, undefined));
    expect(first.ok, first.output).toBe(true);
    expect(first.output).not.toContain("(cached)");
    const cache = await withBuildCache(owner, undefined);
    // What the first run compiled stayed in the account's folder for the repository.
    expect((await readdir(path.join(cache.build!, "go-build"))).length).toBeGreaterThan(10);

    const second = await goTest(cache);
    expect(second.ok, second.output).toBe(true);
    // Go found the test binary and its result in the kept cache: nothing was compiled again.
    expect(second.output).toMatch(/ok\s+example\.com\/calc\s+\(cached\)/);
    expect(second.durationMs).toBeLessThan(first.durationMs);

    const other = await withBuildCache({ account: "acct_b", repo: "ws_1/calc" }, undefined);
    expect(other.build).not.toBe(cache.build);
    const seen = await runSandboxed(
      'echo "GOCACHE=$GOCACHE"; find /build-cache -type f | wc -l; ls /cache | wc -l',
      { cwd: pkg, timeoutMs: 30_000, cache: other },
    );
    expect(seen.ok, seen.output).toBe(true);
    expect(seen.output.trim().split("\n")).toEqual(["GOCACHE=/build-cache/go-build", "0", "0"]);
  }, 400_000);

  it("count in the cache budget and go least recently used first, unless in use", async () => {
    configureSandboxCaches({ root: path.join(dir, "budget"), maxMb: 1 });
    try {
      const old = await withBuildCache({ account: "acct_c", repo: "ws/old" }, undefined);
      const recent = await withBuildCache({ account: "acct_c", repo: "ws/recent" }, undefined);
      // The first use after configuring starts a prune in the background: it must not judge
      // these caches by the times of a moment while the test is still setting them.
      await backgroundPruneDone();
      for (const { build } of [old, recent])
        await writeFile(path.join(build!, "blob"), Buffer.alloc(700_000, 1));
      const now = Date.now();
      const hoursAgo = (h: number) => new Date(now - h * 3_600_000);
      await utimes(old.build!, hoursAgo(5), hoursAgo(5));
      await utimes(recent.build!, hoursAgo(2), hoursAgo(2));
      // Together over 1 MB: the least recently used build cache goes.
      expect(await enforceCacheBudget(now)).toEqual([old.build]);
      // One in use (touched within the last 30 minutes) is spared even over the budget.
      await writeFile(path.join(recent.build!, "blob2"), Buffer.alloc(700_000, 1));
      await utimes(recent.build!, new Date(now), new Date(now));
      expect(await enforceCacheBudget(now)).toEqual([]);
    } finally {
      configureSandboxCaches({ root: path.join(dir, "caches") });
    }
  });
});
