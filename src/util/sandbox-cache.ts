/*
 * Package caches of sandboxed commands (npm's cache, Go's build and module caches, pip's and
 * cargo's downloads), one folder per account and repository:
 *
 *   <root>/<account>/<repository key>/   (0700; root: DATA_DIR/sandbox-cache)
 *
 * mounted at /cache inside the sandbox (util/sandbox.ts). Nothing one account's command
 * writes there is ever read by another account's: Go trusts its build cache's outputs by
 * action id and npm trusts cached metadata when there is no lockfile, so a shared cache
 * would let one account plant what another's task runs.
 *
 * The run option is `cache: { dir, readOnly? }`: a later change can key a cache by the
 * repository's lockfile and hand it out read-only once the service has filled it.
 *
 * Housekeeping: a cache folder is touched each time a run gets it; folders untouched for
 * SANDBOX_CACHE_MAX_AGE_DAYS are removed, checked at most once an hour by the next run that
 * asks for a cache (each worker machine prunes its own).
 */
import { createHash } from "node:crypto";
import { execFile } from "node:child_process";
import { chmod, mkdir, readdir, rm, stat, utimes } from "node:fs/promises";
import os from "node:os";
import path from "node:path";

/** The package cache of a run: mounted at /cache (read-only when `readOnly`). */
export interface SandboxCache {
  dir: string;
  readOnly?: boolean;
}

/** Whose cache: the account, and the repository (any stable identifier of it). */
export interface CacheOwner {
  account: string;
  repo: string;
}

interface CacheSettings {
  root: string;
  maxAgeDays: number;
}

const DEFAULT_MAX_AGE_DAYS = 14;
const PRUNE_EVERY_MS = 60 * 60_000;
/** Scratch folders of overlay mounts (util/sandbox.ts) left by a crash go after this. */
const SCRATCH_MAX_AGE_MS = 24 * 60 * 60_000;
/** Names of the overlay scratch folders, beside the folder they serve. */
export const OVERLAY_SCRATCH_PREFIX = ".foreman-overlay-";

let settings: CacheSettings = {
  root: defaultRoot(),
  maxAgeDays: DEFAULT_MAX_AGE_DAYS,
};
let lastPrune = 0;

/** Without a DATA_DIR (tests, benchmarks): the service user's cache folder or the temp dir. */
function defaultRoot(): string {
  return path.join(process.env.XDG_CACHE_HOME || os.tmpdir(), "foreman-sandbox-cache");
}

/** Sets where caches live and how long unused ones are kept (service start; tests). */
export function configureSandboxCaches(next: { root?: string; maxAgeDays?: number }): void {
  settings = {
    root: next.root ?? defaultRoot(),
    maxAgeDays: next.maxAgeDays ?? DEFAULT_MAX_AGE_DAYS,
  };
  lastPrune = 0;
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
  const accountDir = path.join(settings.root, component(owner.account));
  const dir = path.join(accountDir, component(owner.repo));
  await mkdir(dir, { recursive: true, mode: 0o700 });
  // mkdir's mode applies only to what it creates; the root and the account's folder may
  // predate this code (or a umask) with wider bits.
  await Promise.all([chmod(settings.root, 0o700), chmod(accountDir, 0o700), chmod(dir, 0o700)]);
  const now = new Date();
  await utimes(dir, now, now);
  if (Date.now() - lastPrune >= PRUNE_EVERY_MS) {
    lastPrune = Date.now();
    void pruneSandboxCaches().catch(() => undefined);
  }
  return { dir, ...(options.readOnly ? { readOnly: true } : {}) };
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
      if (!old) continue;
      await removeTree(dir);
      removed.push(dir);
      left--;
    }
    if (left === 0) await rm(accountDir, { recursive: true, force: true }).catch(() => undefined);
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
    execFile("chmod", ["-R", "u+rwX", "--", dir], () => resolve()),
  );
  await rm(dir, { recursive: true, force: true }).catch(() => undefined);
}
