/*
 * A seed for Go's build caches (issue 41 item 7). Each account's GOCACHE is its own, per
 * repository (sandbox-cache.ts, withBuildCache), so the first `go test ./...` of every new
 * account or repository compiled the standard library into an empty cache: 60-100 s on a
 * 2-core machine, most of a check's 120 s. The seed is the standard library compiled once
 * per host by the service itself, from GOROOT only (no repository's code runs into it):
 *
 *   <cache root>/.go-build-seed/<key>/build/go-build   (GOCACHE of the seed)
 *
 * `key` names the toolchain: the `go` on the sandbox's PATH (its resolved path, size and
 * modification time) and GOROOT as the sandbox passes it. It is made through the sandbox
 * itself (runSandboxed, with the seed's folder as the build cache), so the go binary, GOROOT's
 * path, the variables (GOFLAGS, CGO_ENABLED: the sandbox's, not the service's) and GOCACHE's
 * path are those of every sandboxed command; Go's cache keys hold the compiler's identity, the
 * flags and the environment that matters, and for GOROOT's packages no folder path, so the
 * entries are found by the account's runs (the build-cache test checks that nothing of the
 * standard library is compiled again). What it runs: `go build std`, then `go test` of a
 * package of our own that imports every public package of the standard library, which also
 * stores vet's facts about them (`go test` vets the package under test with its
 * dependencies' facts: another 70-odd vet runs, about 6 s, otherwise).
 *
 * How an account's build cache gets it (util/sandbox.ts, one call): the seed is the lower
 * layer of the overlay that mounts the account's folder at /build-cache, whose upper layer is
 * the account's folder itself. Whatever a run writes lands in the account's folder; the seed
 * is only ever read (and its host path is not mounted anywhere else). The seed's files carry
 * a modification time far in the future: Go touches an entry it uses when its time is over an
 * hour old and trims entries unused for five days, either of which would copy every seed file
 * a run uses up into the account's folder, or hide it there; a time in the future is neither.
 * Where the machine has no unprivileged overlay (or SANDBOX=none), the seed is copied
 * (`cp --reflink=auto`) into an account's build cache that has no Go cache yet: the copy is
 * the account's own.
 *
 * Counted in SANDBOX_CACHE_MAX_MB once, as one more build cache (the budget reads
 * <root>/<account>/<repository>/build: here the "account" `.go-build-seed` and the
 * "repository" `<key>`); an account's build cache counts only what it wrote itself.
 * Touched at each use, so it is the last to go when over the budget and ages out with
 * SANDBOX_CACHE_MAX_AGE_DAYS when no run uses it (an old Go's seed after an upgrade). When it
 * is removed, runs compile what they need, as without a seed, and it is made again.
 *
 * When: lazily, in the background, the first time a run's build cache already holds a Go
 * cache (Go is used on this host) and there is no seed for the toolchain; at low priority
 * (nice), one at a time per host (a lock folder beside it). SANDBOX_GO_BUILD_SEED=false: never.
 * No `go` on the PATH, or a seed that fails to build: nothing changes.
 */
import { execFile } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdir, mkdtemp, realpath, rename, rm, stat, utimes, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { findExecutable } from "./executables.js";
import { goBuildSeedEnabled, removeTree, sandboxCacheRoot } from "./sandbox-cache.js";

const execFileAsync = promisify(execFile);

/** The seeds' folder in the cache root (never an account's: those never start with "."). */
export const SEED_FOLDER = ".go-build-seed";
/** Changes when what a seed holds changes: an older format is built again. */
const SEED_FORMAT = "1";
/** A lock older than this is a crashed build's. */
const LOCK_STALE_MS = 2 * 60 * 60_000;
/** The seed's build, at low priority, may take this long. */
const BUILD_TIMEOUT_MS = 30 * 60_000;
/** The seed's entries' modification time: 2100-01-01 (see the top of this file). */
const FUTURE = new Date(Date.UTC(2100, 0, 1));

const SEED_SCRIPT = `set -e
go build std
{
  echo 'package seed'
  echo 'import ('
  go list -e -f '{{if .GoFiles}}{{.ImportPath}}{{end}}' std | grep -Ev '(^|/)(internal|vendor)(/|$)' | sed 's/.*/\t_ "&"/'
  echo ')'
} > seed_test.go
go test -count=1 -run '^$' .
`;

function isInside(child: string, parent: string): boolean {
  const relative = path.relative(parent, child);
  return relative === "" || (!relative.startsWith("..") && !path.isAbsolute(relative));
}

async function exists(file: string): Promise<boolean> {
  return (await stat(file).catch(() => undefined)) !== undefined;
}

/** The toolchain's key (see the top of this file); undefined when there is no go. */
export async function goSeedKey(): Promise<string | undefined> {
  const go = await findExecutable("go");
  if (!go) return undefined;
  const real = await realpath(go).catch(() => undefined);
  const info = real ? await stat(real).catch(() => undefined) : undefined;
  if (!real || !info) return undefined;
  const identity = [SEED_FORMAT, real, info.size, info.mtimeMs, process.env.GOROOT ?? ""];
  return createHash("sha256").update(identity.join("\n")).digest("hex").slice(0, 16);
}

/** Where the seed of `key` is (its GOCACHE is `go-build` inside). */
export function goSeedDir(key: string): string {
  return path.join(sandboxCacheRoot(), SEED_FOLDER, key, "build");
}

/** The current toolchain's seed folder when it is built (touched); undefined otherwise. */
export async function readyGoSeed(): Promise<string | undefined> {
  const key = await goSeedKey();
  if (!key) return undefined;
  const seed = goSeedDir(key);
  if (!(await exists(path.join(seed, "go-build")))) return undefined;
  const now = new Date();
  await utimes(seed, now, now).catch(() => undefined);
  await utimes(path.dirname(seed), now, now).catch(() => undefined);
  return seed;
}

/**
 * The hook of util/sandbox.ts for a run whose build cache is `buildDir`: the seed's folder
 * to mount as the lower layer of the build cache's overlay (`overlay`: the run mounts one),
 * or undefined. Without an overlay the seed is copied into a build cache with no Go cache yet.
 * Starts the seed's build when Go is in use and there is none. Never throws.
 */
export async function goBuildSeedLayer(
  buildDir: string,
  overlay: boolean,
): Promise<string | undefined> {
  try {
    if (!goBuildSeedEnabled()) return undefined;
    const root = path.join(sandboxCacheRoot(), SEED_FOLDER);
    if (isInside(buildDir, root)) return undefined; // the seed's own build
    const own = path.join(buildDir, "go-build");
    const seed = await readyGoSeed();
    if (!seed) {
      if (await exists(own)) void buildGoSeed().catch(() => undefined);
      return undefined;
    }
    if (overlay) return seed;
    if (!(await exists(own)))
      await execFileAsync("cp", ["-a", "--reflink=auto", "--", `${seed}/.`, buildDir]);
    return undefined;
  } catch {
    return undefined;
  }
}

/**
 * Builds the current toolchain's seed unless it is there or being built (a lock folder, so
 * one build at a time on the host). Answers the seed's folder, or undefined when there is
 * no go, another build holds the lock, or the build failed. Imports util/sandbox.ts lazily
 * (sandbox.ts imports this file).
 */
export async function buildGoSeed(
  options: { timeoutMs?: number } = {},
): Promise<string | undefined> {
  const key = await goSeedKey();
  if (!key) return undefined;
  const seed = goSeedDir(key);
  if (await exists(path.join(seed, "go-build"))) return seed;
  const keyDir = path.dirname(seed);
  await mkdir(keyDir, { recursive: true, mode: 0o700 });
  const lock = path.join(keyDir, ".building");
  try {
    await mkdir(lock);
  } catch {
    const held = await stat(lock).catch(() => undefined);
    if (held && Date.now() - held.mtimeMs < LOCK_STALE_MS) return undefined;
    await rm(lock, { recursive: true, force: true });
    try {
      await mkdir(lock);
    } catch {
      return undefined;
    }
  }
  // Beside the seed, named as the budget's housekeeping removes a crash's leftovers.
  const partial = path.join(keyDir, `.partial-${randomBytes(6).toString("hex")}`);
  const work = await mkdtemp(path.join(os.tmpdir(), "foreman-go-seed-"));
  const empty = path.join(work, "none");
  const pkg = path.join(work, "seed");
  try {
    await mkdir(partial, { mode: 0o700 });
    await mkdir(empty);
    await mkdir(pkg);
    await writeFile(path.join(pkg, "go.mod"), "module foremanseed\n");
    await writeFile(path.join(pkg, "seed.go"), "package seed\n");
    await writeFile(path.join(pkg, "seed.sh"), SEED_SCRIPT);
    const { runSandboxed } = await import("./sandbox.js");
    const result = await runSandboxed("nice -n 10 sh seed.sh", {
      cwd: pkg,
      timeoutMs: options.timeoutMs ?? BUILD_TIMEOUT_MS,
      cache: { dir: empty, readOnly: true, build: partial },
    });
    if (!result.ok || !(await exists(path.join(partial, "go-build")))) return undefined;
    // Far-future times (see the top of this file), the folders' included.
    await execFileAsync("find", [
      partial,
      "-exec",
      "touch",
      "-h",
      "-d",
      FUTURE.toISOString(),
      "{}",
      "+",
    ]);
    await rename(partial, seed);
    const now = new Date();
    await utimes(seed, now, now).catch(() => undefined);
    return seed;
  } finally {
    await removeTree(partial);
    await removeTree(work);
    await rm(lock, { recursive: true, force: true });
  }
}
