import { writeFile } from "node:fs/promises";
import path from "node:path";
import type { CacheOwner, SandboxCache } from "../../util/sandbox-cache.js";
import { findCacheEntry } from "../../util/sandbox-cache.js";
import { readText } from "../../util/workcopy-fs.js";
import { configNames } from "../../verify/index.js";
import { runSetup, setupEnv } from "../../verify/setup.js";
import { excludeBuildOutput } from "../diff.js";
import { StageError } from "../errors.js";
import type { StageContext } from "../stage.js";

/*
 * The setup step of a task's working copy (verify/setup.ts): run by whatever makes the
 * working copy (CLONING, and a stage that clones it again on another worker), on the
 * repository's own files before the model has written anything, so the registries' network
 * is never open to code the model wrote. Its cache key is kept in the working copy's `.git`
 * (read-only inside the sandbox, and gone with the working copy), where the later stages
 * find it (setupCache).
 */

/** In the working copy's .git: which cache entry its setup used. */
const MARKER = ".git/foreman-setup.json";

function owner(ctx: StageContext): CacheOwner {
  return { account: ctx.task.account_id, repo: `${ctx.task.workspace_id}/${ctx.task.repo_id}` };
}

/**
 * Installs the working copy's dependencies through the allowlist (SANDBOX_SETUP_ALLOW).
 * Throws StageError naming the step, the refused host or missing package, and the fix.
 */
export async function setUpWorkingCopy(ctx: StageContext): Promise<void> {
  // Before anything is installed or staged: what setup puts in the tree is never committed.
  await excludeBuildOutput(ctx.workdir);
  const outcome = await runSetup({
    workdir: ctx.workdir,
    owner: owner(ctx),
    allow: ctx.config.sandbox.setupAllow,
    timeoutMs: ctx.config.pipeline.commandTimeoutS * 1000,
    signal: ctx.signal,
    env: setupEnv({
      goproxyUrl: ctx.config.health.registry.goproxyUrl,
      pipIndexUrl: ctx.config.sandbox.pipIndexUrl,
    }),
    configNames: configNames(ctx.config.github?.slug),
    log: (message) => ctx.log(message),
  });
  if (!outcome.ok) throw new StageError(outcome.error ?? "The setup step failed.");
  await writeFile(
    path.join(ctx.workdir, MARKER),
    JSON.stringify({ key: outcome.key, from_cache: outcome.fromCache }),
  );
  if (outcome.key)
    await ctx.log(
      `Setup done in ${(outcome.durationMs / 1000).toFixed(1)} s${outcome.fromCache ? " (from the package cache)" : ""}.`,
    );
}

/**
 * The package cache of the task's later commands (checks, run_command): the entry its setup
 * used, read-only, never another account's; undefined when setup installed nothing (each
 * run then gets an empty cache of its own).
 */
export async function setupCache(ctx: StageContext): Promise<SandboxCache | undefined> {
  const text = await readText(ctx.workdir, MARKER, { maxBytes: 4096 });
  if (!text) return undefined;
  let key: unknown;
  try {
    key = (JSON.parse(text) as { key?: unknown }).key;
  } catch {
    return undefined;
  }
  if (typeof key !== "string" || !/^[0-9a-f]{32}$/.test(key)) return undefined;
  return findCacheEntry(owner(ctx), key);
}
