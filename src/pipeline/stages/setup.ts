import { execFileAsync } from "../../util/launcher.js";
import { mkdir, rename, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { isDeepStrictEqual } from "node:util";
import type { CacheOwner, SandboxCache } from "../../sandbox/cache.js";
import { findCacheEntry } from "../../sandbox/cache.js";
import { entryInfo, readText } from "../../workcopy/fs.js";
import { configNames } from "../../verify/index.js";
import { runGit } from "../../util/git.js";
import { detectSetup, runSetup, setupEnv, setupKey } from "../../verify/setup.js";
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

/** Whose caches a task's commands get: its account's, for the workspace's repository. */
export function owner(ctx: StageContext): CacheOwner {
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
    timeBudget: ctx.commandTime,
  });
  if (!outcome.ok) throw new StageError(outcome.error ?? "The setup step failed.");
  await writeFile(
    path.join(ctx.workdir, MARKER),
    JSON.stringify({
      key: outcome.key,
      from_cache: outcome.fromCache,
      outputs: outcome.key ? outcome.plan.outputs : [],
    }),
  );
  if (outcome.key)
    await ctx.log(
      `Setup done in ${(outcome.durationMs / 1000).toFixed(1)} s${outcome.fromCache ? " (from the package cache)" : ""}.`,
    );
}

interface SetupMarker {
  key: string;
  /** The folders that setup filled (SetupPlan.outputs). */
  outputs: string[];
}

/** What the working copy's setup used and made (MARKER), or null. */
async function readSetupMarker(ctx: StageContext): Promise<SetupMarker | null> {
  const text = await readText(ctx.workdir, MARKER, { maxBytes: 4096 });
  if (!text) return null;
  try {
    const { key, outputs } = JSON.parse(text) as { key?: unknown; outputs?: unknown };
    if (typeof key !== "string" || !/^[0-9a-f]{32}$/.test(key)) return null;
    const names = Array.isArray(outputs)
      ? outputs.filter((o): o is string => typeof o === "string")
      : [];
    // Folder names at the tree's top (node_modules, .venv), nothing that leads elsewhere.
    return { key, outputs: names.filter((o) => /^\.?[A-Za-z0-9_][\w.-]*$/.test(o)) };
  } catch {
    return null;
  }
}

/** The folders the working copy's setup filled (node_modules, .venv): none without a setup. */
export async function setupOutputs(ctx: StageContext): Promise<string[]> {
  return (await readSetupMarker(ctx))?.outputs ?? [];
}

/** Where setup's outputs wait while the tree is cleaned: in `.git`, on the same file system. */
const ASIDE = ".git/foreman-outputs";

/**
 * The setup of a working copy a follow-up took over from its parent (stages/clone.ts), now at
 * the branch's head: everything that is not the branch's goes (`git clean -x`: the parent's
 * build output, the model's untracked files), and the setup's outputs (`node_modules`,
 * `.venv`) stay only when the setup a fresh copy of this tree would run is the one that made
 * them (the same steps and lockfiles: the same cache key); then nothing is installed.
 * Otherwise the setup runs as for a fresh copy.
 */
export async function setUpAdoptedWorkingCopy(
  ctx: StageContext,
  /** keptOutputs(ctx), started while the branch was fetched. */
  found: Promise<KeptOutputs>,
): Promise<void> {
  const { marker, untouched, touched } = await found;
  const aside = path.join(ctx.workdir, ASIDE);
  await rm(aside, { recursive: true, force: true });
  const moved: string[] = [];
  for (const output of untouched) {
    await mkdir(aside, { recursive: true });
    await rename(path.join(ctx.workdir, output), path.join(aside, output));
    moved.push(output);
  }
  await runGit(["clean", "-ffdxq"], { cwd: ctx.workdir, signal: ctx.signal });
  // The tree as a fresh clone of the branch has it: what would its setup be?
  const plan = await detectSetup(ctx.workdir, {
    configNames: configNames(ctx.config.github?.slug),
  });
  const same =
    marker !== null &&
    touched.length === 0 &&
    moved.length > 0 &&
    plan.steps.length > 0 &&
    isDeepStrictEqual([...plan.outputs].sort(), [...moved].sort()) &&
    (await setupKey(ctx.workdir, plan)) === marker.key;
  if (same) {
    for (const output of moved)
      await rename(path.join(aside, output), path.join(ctx.workdir, output));
    await rm(aside, { recursive: true, force: true });
    await ctx.log(
      `Setup: ${moved.join(", ")} kept from the working copy taken over, set up from the same lockfiles (entry ${marker.key.slice(0, 12)}); nothing installed.`,
    );
    return;
  }
  await rm(aside, { recursive: true, force: true });
  if (touched.length > 0)
    await ctx.log(
      `Setup: ${touched.join(", ")} of the working copy taken over changed after its setup (a command wrote there), so it is set up again.`,
    );
  await setUpWorkingCopy(ctx);
}

export interface KeptOutputs {
  marker: SetupMarker | null;
  /** The setup's output folders there, unchanged since it ran. */
  untouched: string[];
  /** Those written to since (a check's cache, a command of the model). */
  touched: string[];
}

/**
 * The setup's outputs in a working copy taken over, and which of them something wrote to after
 * that setup: those are not what a fresh copy would get from the package cache, so they are
 * not kept. A walk of every file (node_modules runs to tens of thousands): the caller may
 * start it while it fetches (it never rejects).
 */
export async function keptOutputs(ctx: StageContext): Promise<KeptOutputs> {
  const marker = await readSetupMarker(ctx).catch(() => null);
  const found: KeptOutputs = { marker, untouched: [], touched: [] };
  for (const output of marker?.outputs ?? []) {
    const info = await entryInfo(ctx.workdir, output).catch(() => undefined);
    if (info?.type !== "directory") continue;
    const changed = await changedSince(
      path.join(ctx.workdir, output),
      path.join(ctx.workdir, MARKER),
    );
    (changed ? found.touched : found.untouched).push(output);
  }
  return found;
}

/**
 * True when anything under `dir` changed after `reference` was written: its status change
 * time (ctime, which no command can set back, unlike mtime) is later. find(1) walks without
 * following links and stops at the first; an error counts as changed.
 */
async function changedSince(dir: string, reference: string): Promise<boolean> {
  try {
    const { stdout } = await execFileAsync(
      "find",
      ["-P", dir, "-cnewer", reference, "-print", "-quit"],
      { timeout: 60_000, maxBuffer: 1024 * 1024 },
    );
    return stdout.trim() !== "";
  } catch {
    return true;
  }
}

/**
 * The package cache of the task's later commands (checks, run_command): the entry its setup
 * used, read-only, never another account's; undefined when setup installed nothing (each
 * run then gets an empty cache of its own).
 */
export async function setupCache(ctx: StageContext): Promise<SandboxCache | undefined> {
  const marker = await readSetupMarker(ctx);
  return marker ? findCacheEntry(owner(ctx), marker.key) : undefined;
}
