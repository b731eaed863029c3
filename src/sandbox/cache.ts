/*
 * Package caches of sandboxed commands (npm's cache, Go's build and module caches, pip's and
 * cargo's downloads), one folder per account and repository:
 *
 *   <root>/<account>/<repository key>/   (0700; root: DATA_DIR/sandbox-cache)
 *
 * mounted at /cache inside the sandbox (sandbox/run.ts). Nothing one account's command
 * writes there is ever read by another account's: Go trusts its build cache's outputs by
 * action id and npm trusts cached metadata when there is no lockfile, so a shared cache
 * would let one account plant what another's task runs.
 *
 * Inside a repository's folder:
 *
 *   k-<key>/        an entry: what the setup step (verify/setup.ts) downloaded for one set of
 *                   install inputs (`key`: a hash of the lockfiles and setup commands). Only
 *                   the setup step writes one, into `.partial-<key>-<random>/`, renamed into
 *                   place once its install succeeded; from then on every run gets it
 *                   read-only (`cache: { dir, readOnly: true }`: the run's writes land in a
 *                   layer of its own, sandbox/run.ts), so no task's command can plant
 *                   anything a later task's install trusts.
 *   k-<key>.json    its size, measured once, for the budget.
 *   rw/             the writable cache of sandboxCache() (runs outside a set-up working copy).
 *   build/          build caches (Go's GOCACHE): writable by every run of the account's tasks
 *                   on the repository (withBuildCache), so a run compiles only what changed
 *                   instead of the standard library and every dependency each time. Go keys its
 *                   outputs by a hash of their inputs; within one account and repository a
 *                   planted output is the account's own doing, which is why it is never
 *                   shared wider. Counted in the budget below like an entry, and removed whole
 *                   when it is the least recently used one over it. Also cargo's target/
 *                   and jest's cache, mounted where those tools look (buildCacheMounts).
 *
 * Housekeeping: a folder is touched each time a run gets it; entries untouched for
 * SANDBOX_CACHE_MAX_AGE_DAYS are removed, as are entries beyond SANDBOX_CACHE_MAX_MB in all
 * (least recently used first) and all but the newest KEEP_PER_REPO entries of a repository.
 * Checked at most once an hour by the next run that asks for a cache, and after each new
 * entry (each worker machine prunes its own).
 */
import { createHash } from "node:crypto";
import { execFile } from "../util/launcher.js";
import { randomBytes } from "node:crypto";
import {
  chmod,
  lstat,
  mkdir,
  readdir,
  readFile,
  rename,
  rm,
  stat,
  utimes,
  writeFile,
} from "node:fs/promises";
import os from "node:os";
import path from "node:path";

/** The package cache of a run: mounted at /cache (read-only when `readOnly`). */
export interface SandboxCache {
  dir: string;
  readOnly?: boolean;
  /** The owner's writable build-cache folder (BUILD_CACHE_MOUNT, sandbox/settings.ts), if any. */
  build?: string;
}

/** The build-cache folder's name in a repository's folder. */
const BUILD_FOLDER = "build";
/** Inside the build-cache folder: cargo's target/ and jest's cache (buildCacheMounts). */
const CARGO_TARGET = "cargo-target";
const JEST_CACHE = "jest";
/** An empty folder standing for "no package cache entry" beside a build cache. */
const NO_ENTRY_FOLDER = "none";

/** Whose cache: the account, and the repository (any stable identifier of it). */
export interface CacheOwner {
  account: string;
  repo: string;
}

interface CacheSettings {
  root: string;
  maxAgeDays: number;
  /** SANDBOX_CACHE_MAX_MB in bytes: what all entries together may take. */
  maxBytes: number;
}

const DEFAULT_MAX_AGE_DAYS = 14;
const PRUNE_EVERY_MS = 60 * 60_000;
/** Scratch folders of overlay mounts (sandbox/overlays.ts) left by a crash go after this. */
const SCRATCH_MAX_AGE_MS = 24 * 60 * 60_000;
/** Names of the overlay scratch folders, beside the folder they serve. */
export const OVERLAY_SCRATCH_PREFIX = ".foreman-overlay-";

const DEFAULT_MAX_MB = 10_240;
/** Entries kept per repository: older lockfiles are rarely installed again. */
export const KEEP_PER_REPO = 3;
/** An entry used this recently may be a running command's lower layer: the budget spares it. */
const IN_USE_MS = 30 * 60_000;

let settings: CacheSettings = {
  root: defaultRoot(),
  maxAgeDays: DEFAULT_MAX_AGE_DAYS,
  maxBytes: DEFAULT_MAX_MB * 1024 * 1024,
};
/** When repoFolder() last started a prune in the background, and that prune while it runs. */
let prune: { startedAt: number; running?: Promise<unknown> } = { startedAt: 0 };

/** Without a DATA_DIR (tests, benchmarks): the service user's cache folder or the temp dir. */
function defaultRoot(): string {
  return path.join(process.env.XDG_CACHE_HOME || os.tmpdir(), "foreman-sandbox-cache");
}

/** Sets where caches live and how long unused ones are kept (service start; tests). */
export function configureSandboxCaches(next: {
  root?: string;
  maxAgeDays?: number;
  maxMb?: number;
}): void {
  settings = {
    root: next.root ?? defaultRoot(),
    maxAgeDays: next.maxAgeDays ?? DEFAULT_MAX_AGE_DAYS,
    maxBytes: (next.maxMb ?? DEFAULT_MAX_MB) * 1024 * 1024,
  };
  prune = { startedAt: 0 };
}

export function sandboxCacheRoot(): string {
  return settings.root;
}

/** A path component from an identifier: readable, bounded, and never `.`/`..`. */
function component(value: string): string {
  const readable = value
    .replace(/[^A-Za-z0-9._-]+/g, "_")
    .replace(/^[.]+/, "_")
    .slice(0, 60);
  const hash = createHash("sha256").update(value).digest("hex").slice(0, 10);
  return `${readable}-${hash}`;
}

/**
 * The cache folder of `owner` (created 0700 and touched), for the `cache` run option. Starts
 * a prune of old caches in the background now and then.
 */
export async function sandboxCache(
  owner: CacheOwner,
  options: { readOnly?: boolean } = {},
): Promise<SandboxCache> {
  const dir = path.join(await repoFolder(owner), "rw");
  await mkdir(dir, { mode: 0o700 }).catch(() => undefined);
  await touch(dir);
  return { dir, ...(options.readOnly ? { readOnly: true } : {}) };
}

/** The repository's folder of `owner` (created 0700); starts a prune now and then. */
async function repoFolder(owner: CacheOwner): Promise<string> {
  const accountDir = path.join(settings.root, component(owner.account));
  const dir = path.join(accountDir, component(owner.repo));
  await mkdir(dir, { recursive: true, mode: 0o700 });
  // mkdir's mode applies only to what it creates; the root and the account's folder may
  // predate this code (or a umask) with wider bits.
  await Promise.all([chmod(settings.root, 0o700), chmod(accountDir, 0o700), chmod(dir, 0o700)]);
  await touch(dir);
  if (Date.now() - prune.startedAt >= PRUNE_EVERY_MS) {
    const run = pruneSandboxCaches()
      .catch(() => undefined)
      .finally(() => {
        if (prune.running === run) prune = { startedAt: prune.startedAt };
      });
    prune = { startedAt: Date.now(), running: run };
  }
  return dir;
}

/**
 * Resolves when the background prune (if one runs) has ended: what it listed before a
 * caller changed the caches can no longer remove anything after this.
 */
export async function backgroundPruneDone(): Promise<void> {
  while (prune.running) await prune.running;
}

async function touch(dir: string): Promise<void> {
  const now = new Date();
  await utimes(dir, now, now).catch(() => undefined);
}

/**
 * `entry` (the package cache a run gets, if any) with the build caches of `owner` beside it.
 * Without an entry the package cache is an empty read-only folder: what a run downloads
 * there goes with the run, as without a cache.
 */
export async function withBuildCache(
  owner: CacheOwner,
  entry: SandboxCache | undefined,
): Promise<SandboxCache> {
  const repoDir = await repoFolder(owner);
  const build = path.join(repoDir, BUILD_FOLDER);
  await mkdir(build, { mode: 0o700 }).catch(() => undefined);
  await Promise.all(
    [CARGO_TARGET, JEST_CACHE].map((name) =>
      mkdir(path.join(build, name), { mode: 0o700 }).catch(() => undefined),
    ),
  );
  await touch(build);
  if (entry) return { ...entry, build };
  const none = path.join(repoDir, NO_ENTRY_FOLDER);
  await mkdir(none, { mode: 0o700 }).catch(() => undefined);
  return { dir: none, readOnly: true, build };
}

/**
 * bwrap's arguments mounting the build cache's folders where the tools look for their
 * outputs, so what runs and what it sees stay as without a cache (paths as the command sees
 * them: `workspaceAt` is the working copy, `uid` the command's user):
 *
 * - cargo's `target/` of a Rust working copy (a Cargo.toml at its root; `target` absent or a
 *   folder): the kept target folder, bound over `<workspaceAt>/target`. Not CARGO_TARGET_DIR:
 *   a check running `./target/debug/app` still finds it. Cargo keys its fingerprints by
 *   path, and the working copy is always at the same path inside the sandbox, so the
 *   dependencies built by an earlier task (or the base's run) are fresh; the repository's own
 *   crates are rebuilt when their files are newer than the outputs (a new clone's are).
 *   Concurrent runs of the account's repository take cargo's lock on it in turn. One
 *   difference: `cargo clean` cannot remove the mount point itself and fails.
 * - jest's default cache folder (`<tmpdir>/jest_<uid in base 36>`), which would be the run's
 *   empty /tmp otherwise: its transform cache is keyed by file contents and configuration.
 */
export async function buildCacheMounts(
  build: string,
  hostWorkspace: string,
  workspaceAt: string,
  uid: number,
): Promise<string[]> {
  const args = ["--bind", path.join(build, JEST_CACHE), `/tmp/jest_${uid.toString(36)}`];
  const manifest = await lstat(path.join(hostWorkspace, "Cargo.toml")).catch(() => undefined);
  const target = await lstat(path.join(hostWorkspace, "target")).catch(() => undefined);
  if (manifest?.isFile() && (!target || target.isDirectory()))
    args.push("--bind", path.join(build, CARGO_TARGET), path.join(workspaceAt, "target"));
  return args;
}

/** A cache key as a folder name: hex only, bounded. */
function entryName(key: string): string {
  if (!/^[0-9a-f]{8,64}$/.test(key)) throw new Error("cache key must be 8-64 hex digits");
  return `k-${key}`;
}

/**
 * The entry of `owner` for `key`, read-only, when the setup step made one (touched);
 * undefined otherwise.
 */
export async function findCacheEntry(
  owner: CacheOwner,
  key: string,
): Promise<SandboxCache | undefined> {
  const dir = path.join(await repoFolder(owner), entryName(key));
  const info = await stat(dir).catch(() => undefined);
  if (!info?.isDirectory()) return undefined;
  await touch(dir);
  return { dir, readOnly: true };
}

/** A new entry being filled by the setup step: writable until commit() or discard(). */
export interface NewCacheEntry {
  cache: SandboxCache;
  /** Puts the entry in place (false when another run put one there first) and prunes. */
  commit(): Promise<boolean>;
  discard(): Promise<void>;
}

/** Starts a new entry of `owner` for `key` (only the setup step calls this). */
export async function createCacheEntry(owner: CacheOwner, key: string): Promise<NewCacheEntry> {
  const repoDir = await repoFolder(owner);
  const name = entryName(key);
  const dir = path.join(repoDir, `.partial-${key}-${randomBytes(6).toString("hex")}`);
  await mkdir(dir, { mode: 0o700 });
  return {
    cache: { dir },
    async commit() {
      const bytes = await measure(dir);
      try {
        await rename(dir, path.join(repoDir, name));
      } catch {
        await removeTree(dir); // another run of the same key was first: its entry stays
        return false;
      }
      await writeFile(
        path.join(repoDir, `${name}.json`),
        JSON.stringify({ bytes, created_at: new Date().toISOString() }),
      );
      await enforceCacheBudget().catch(() => undefined);
      return true;
    },
    discard: () => removeTree(dir),
  };
}

/** Bytes under `dir` (du: apparent sizes of what is on disk). */
function measure(dir: string): Promise<number> {
  return new Promise((resolve) =>
    execFile("du", ["-sk", "--", dir], {}, (error, stdout) => {
      const kib = Number(/^(\d+)/.exec(String(stdout))?.[1]);
      resolve(error || !Number.isFinite(kib) ? 0 : kib * 1024);
    }),
  );
}

interface EntryInfo {
  dir: string;
  repoDir: string;
  bytes: number;
  usedMs: number;
  /** The repository's build caches (not counted in KEEP_PER_REPO). */
  build: boolean;
}

async function listEntries(): Promise<EntryInfo[]> {
  const found: EntryInfo[] = [];
  for (const account of await readdir(settings.root).catch(() => [] as string[])) {
    const accountDir = path.join(settings.root, account);
    for (const repo of await readdir(accountDir).catch(() => [] as string[])) {
      const repoDir = path.join(accountDir, repo);
      for (const name of await readdir(repoDir).catch(() => [] as string[])) {
        const build = name === BUILD_FOLDER;
        if (!build && (!name.startsWith("k-") || name.endsWith(".json"))) continue;
        const dir = path.join(repoDir, name);
        const info = await stat(dir).catch(() => undefined);
        if (!info?.isDirectory()) continue;
        // A build cache grows with every run: measured each time.
        const meta = build ? "" : await readFile(`${dir}.json`, "utf8").catch(() => "");
        let bytes = Number((/"bytes":(\d+)/.exec(meta) ?? [])[1]);
        if (!Number.isFinite(bytes)) bytes = await measure(dir);
        found.push({ dir, repoDir, bytes, usedMs: info.mtimeMs, build });
      }
    }
  }
  return found;
}

async function removeEntry(entry: EntryInfo): Promise<void> {
  await removeTree(entry.dir);
  await rm(`${entry.dir}.json`, { force: true });
}

/**
 * Keeps the entries within SANDBOX_CACHE_MAX_MB and KEEP_PER_REPO: the least recently used
 * go first; an entry used in the last IN_USE_MS is spared (a command may be reading it).
 * Returns the entries removed.
 */
export async function enforceCacheBudget(now = Date.now()): Promise<string[]> {
  const entries = (await listEntries()).sort((a, b) => b.usedMs - a.usedMs);
  const removed: string[] = [];
  const perRepo = new Map<string, number>();
  let total = 0;
  for (const entry of entries) {
    const count = (perRepo.get(entry.repoDir) ?? 0) + (entry.build ? 0 : 1);
    perRepo.set(entry.repoDir, count);
    const busy = now - entry.usedMs < IN_USE_MS;
    const extra = !entry.build && count > KEEP_PER_REPO;
    if (!busy && (extra || total + entry.bytes > settings.maxBytes)) {
      await removeEntry(entry);
      removed.push(entry.dir);
      continue;
    }
    total += entry.bytes;
  }
  return removed;
}

/**
 * Removes cache folders untouched for SANDBOX_CACHE_MAX_AGE_DAYS (and overlay scratch
 * folders a crash left); returns the folders removed.
 */
export async function pruneSandboxCaches(now = Date.now()): Promise<string[]> {
  const cutoff = now - settings.maxAgeDays * 86_400_000;
  const removed: string[] = [];
  const accounts = await readdir(settings.root).catch(() => [] as string[]);
  for (const account of accounts) {
    const accountDir = path.join(settings.root, account);
    const repos = await readdir(accountDir).catch(() => undefined);
    if (!repos) continue;
    let left = repos.length;
    for (const repo of repos) {
      const dir = path.join(accountDir, repo);
      const info = await stat(dir).catch(() => undefined);
      if (!info) continue;
      const scratch = repo.startsWith(OVERLAY_SCRATCH_PREFIX);
      const old = scratch ? info.mtimeMs < now - SCRATCH_MAX_AGE_MS : info.mtimeMs < cutoff;
      if (!old) {
        if (!scratch) removed.push(...(await pruneRepoFolder(dir, cutoff, now)));
        continue;
      }
      await removeTree(dir);
      removed.push(dir);
      left--;
    }
    if (left === 0) await rm(accountDir, { recursive: true, force: true }).catch(() => undefined);
  }
  removed.push(...(await enforceCacheBudget(now)));
  return removed;
}

/** Inside a repository's folder: old entries, and scratch or partial folders a crash left. */
async function pruneRepoFolder(repoDir: string, cutoff: number, now: number): Promise<string[]> {
  const removed: string[] = [];
  for (const name of await readdir(repoDir).catch(() => [] as string[])) {
    const dir = path.join(repoDir, name);
    const info = await stat(dir).catch(() => undefined);
    if (!info?.isDirectory()) continue;
    const leftover = name.startsWith(OVERLAY_SCRATCH_PREFIX) || name.startsWith(".partial-");
    const old = leftover ? info.mtimeMs < now - SCRATCH_MAX_AGE_MS : info.mtimeMs < cutoff;
    if (!old) continue;
    await removeTree(dir);
    await rm(`${dir}.json`, { force: true });
    removed.push(dir);
  }
  return removed;
}

/**
 * `rm -rf` that also takes what a command made hard to remove: Go's module cache is
 * read-only by design, and an overlay's work folder is mode 000.
 */
export async function removeTree(dir: string): Promise<void> {
  try {
    await rm(dir, { recursive: true, force: true });
    return;
  } catch {
    // fall through: make every folder writable, then again
  }
  await new Promise<void>((resolve) =>
    execFile("chmod", ["-R", "u+rwX", "--", dir], {}, () => resolve()),
  );
  await rm(dir, { recursive: true, force: true }).catch(() => undefined);
}
