/*
 * The setup step (README, "Setup step"; docs/operations.md): once per working copy, before
 * any check and before the model runs anything, the repository's dependencies are installed
 * in the same sandbox as every other command, with a network that reaches only the package
 * registries of SANDBOX_SETUP_ALLOW, through the setup proxy (sandbox/setup-proxy.ts). What
 * runs: `.github/foreman.yml`'s `setup:` list (or its older `install:` list) when the
 * repository gives one, else what the ecosystems' files imply (ecosystems/*.ts: `npm ci`
 * from package-lock.json, `go mod download` from go.sum, `cargo fetch` from Cargo.lock, …).
 *
 * Downloads land in a package cache entry of the account and repository keyed by the hash
 * of the install inputs (lockfiles, setup commands; sandbox/cache.ts). A second
 * working copy with the same inputs installs from that entry, read-only; only a successful
 * setup with no entry yet writes a new one. Every later command (checks, run_command,
 * health-scan tests) gets the entry read-only and the network of SANDBOX_NETWORK.
 *
 * The pipeline (pipeline/stages/setup.ts) and the health scan (domain/health/scan.ts) call
 * runSetup; neither runs installs of its own.
 */
import { execFileAsync } from "../util/launcher.js";
import { createHash } from "node:crypto";
import { mkdir } from "node:fs/promises";
import path from "node:path";
import { ECOSYSTEMS, type Check } from "../ecosystems/index.js";
import type { CommandTimeBudget } from "../sandbox/command-time.js";
import { redactText } from "../util/redact.js";
import {
  describeResult,
  diskBudgetFailure,
  heartbeatLine,
  runSandboxed,
  sandboxSettings,
  type SandboxCache,
  type SandboxResult,
} from "../sandbox/index.js";
import {
  createCacheEntry,
  findCacheEntry,
  type CacheOwner,
  type NewCacheEntry,
} from "../sandbox/cache.js";
import { startSetupProxy, type SetupProxy } from "../sandbox/setup-proxy.js";
import { entryInfo, readBytes } from "../workcopy/fs.js";
import { DEFAULT_CONFIG_NAMES, readRepoConfig } from "./checks.js";

export interface SetupPlan {
  /** Where the steps came from: ".github/foreman.yml", "package.json, go.mod"; null: none. */
  source: string | null;
  steps: Check[];
  /** Sentences for the log: why each step runs. */
  notes: string[];
  /** The files whose bytes (with the steps) key the cache entry. */
  inputs: string[];
  /**
   * Folders the steps fill in the working copy (`node_modules`), kept in the entry and copied
   * from it next time instead of installing again; none for a config's own steps.
   */
  outputs: string[];
}

/**
 * The setup steps of `workdir`: the repository config's `setup:` (else `install:`) list, or
 * the install steps its ecosystems' files imply. Only reads files. Throws StageError for a
 * config file that is present but wrong.
 */
export async function detectSetup(
  workdir: string,
  options: { configNames?: string[] } = {},
): Promise<SetupPlan> {
  const { name, lists } = await readRepoConfig(
    workdir,
    options.configNames ?? DEFAULT_CONFIG_NAMES,
  );
  const notes: string[] = [];
  const found = [];
  for (const ecosystem of ECOSYSTEMS) {
    const detected = await ecosystem.verify?.detect(workdir, []);
    if (detected?.install?.length) found.push(detected);
  }
  // Lockfiles key the cache whoever names the commands.
  const inputs = [...new Set(found.flatMap((f) => f.installInputs ?? []))];
  const own = lists.setup ?? lists.install;
  if (name !== undefined && own !== undefined) {
    const key = lists.setup ? "setup" : "install";
    notes.push(
      own.length === 0
        ? `${name} has an empty ${key} list: nothing is installed.`
        : `Setup steps from ${name} (${key}:).`,
    );
    return { source: name, steps: own, notes, inputs: [name, ...inputs], outputs: [] };
  }
  if (found.length === 0) return { source: null, steps: [], notes, inputs, outputs: [] };
  notes.push(...found.flatMap((f) => f.installNotes ?? []));
  return {
    source: found.map((f) => f.source).join(", "),
    steps: found.flatMap((f) => f.install ?? []),
    notes,
    inputs,
    outputs: [...new Set(found.flatMap((f) => f.installOutputs ?? []))],
  };
}

/**
 * The variables every setup step gets from the service's configuration: GOPROXY (from
 * GOPROXY_URL) and, when set, pip's index (PIP_INDEX_URL).
 */
export function setupEnv(config: {
  goproxyUrl: string;
  pipIndexUrl: string | null;
}): Record<string, string> {
  return {
    GOPROXY: config.goproxyUrl,
    ...(config.pipIndexUrl ? { PIP_INDEX_URL: config.pipIndexUrl } : {}),
  };
}

/** Where an entry keeps the install's outputs (sandbox/cache.ts entries). */
const OUTPUTS = "outputs";

/** cp -a (links copied as links, never followed), copy-on-write where the filesystem can. */
async function copyTree(from: string, to: string): Promise<void> {
  await mkdir(path.dirname(to), { recursive: true });
  await execFileAsync("cp", ["-a", "--reflink=auto", "--", from, to]);
}

/** Keeps the steps' outputs (real folders only) in a new entry before it is put in place. */
async function saveOutputs(workdir: string, entry: string, outputs: string[]): Promise<void> {
  for (const output of outputs) {
    if ((await entryInfo(workdir, output))?.type !== "directory") continue;
    await copyTree(path.join(workdir, output), path.join(entry, OUTPUTS, output));
  }
}

/**
 * Copies an entry's outputs into the working copy; false (and nothing copied) unless the entry
 * has every one of them and the working copy none.
 */
async function restoreOutputs(workdir: string, entry: string, outputs: string[]): Promise<boolean> {
  if (outputs.length === 0) return false;
  for (const output of outputs) {
    if ((await entryInfo(entry, path.join(OUTPUTS, output)))?.type !== "directory") return false;
    if (await entryInfo(workdir, output)) return false;
  }
  for (const output of outputs)
    await copyTree(path.join(entry, OUTPUTS, output), path.join(workdir, output));
  return true;
}

/** Largest install input hashed (package-lock.json of big monorepos runs to tens of MiB). */
const MAX_INPUT_BYTES = 128 * 1024 * 1024;

let toolchain: Promise<string> | undefined;

/**
 * The runtimes an install's outputs are made for: Node (node_modules' native addons are built
 * for its ABI) and the `python3` on PATH (a venv links to its interpreter). Read once.
 */
function toolchainStamp(): Promise<string> {
  toolchain ??= execFileAsync("python3", ["-c", "import sys; print(sys.version)"], {
    timeout: 10_000,
  }).then(
    ({ stdout }) => `node ${process.versions.modules}; python ${stdout.trim()}`,
    () => `node ${process.versions.modules}; python none`,
  );
  return toolchain;
}

/**
 * The cache key of a plan: sha256 over its steps, its input files' bytes and, when it keeps
 * outputs, the runtimes they were made for (toolchainStamp): 32 hex digits.
 */
export async function setupKey(workdir: string, plan: SetupPlan): Promise<string> {
  const hash = createHash("sha256");
  hash.update(JSON.stringify(plan.steps.map((s) => s.command)));
  if (plan.outputs.length > 0) hash.update(`\0${await toolchainStamp()}\0`);
  for (const input of [...plan.inputs].sort()) {
    const bytes = await readBytes(workdir, input, { maxBytes: MAX_INPUT_BYTES });
    hash.update(`\0${input}\0`);
    hash.update(typeof bytes === "string" ? `(${bytes})` : bytes);
  }
  return hash.digest("hex").slice(0, 32);
}

export interface SetupOptions {
  workdir: string;
  /** Whose cache: the task's or scan's account and repository. */
  owner: CacheOwner;
  /** SANDBOX_SETUP_ALLOW; empty: the steps run with SANDBOX_NETWORK's network. */
  allow: readonly string[];
  /** For each step. */
  timeoutMs: number;
  signal?: AbortSignal;
  /** Extra variables for the steps (setupEnv: GOPROXY, PIP_INDEX_URL). */
  env?: Record<string, string>;
  configNames?: string[];
  /** Whose disk budget a step can exceed, for DiskBudgetError's sentence. */
  subject?: "task" | "scan";
  /** A line for the task's log (progress, heartbeats, the outcome). */
  log(message: string): Promise<void> | void;
  /** The task's TASK_COMMAND_TIME_LIMIT_S (sandbox/command-time.ts). */
  timeBudget?: CommandTimeBudget | undefined;
}

export interface SetupOutcome {
  ok: boolean;
  plan: SetupPlan;
  /** The cache key; null when there was nothing to install. */
  key: string | null;
  /** True when the install used an entry an earlier setup made. */
  fromCache: boolean;
  /** The entry for later runs (read-only); undefined when there is none. */
  cache: SandboxCache | undefined;
  /** Hosts the proxy refused (not on SANDBOX_SETUP_ALLOW). */
  refused: string[];
  /** Hosts the proxy connected to (empty: everything came from the cache). */
  contacted: string[];
  /** Why it failed, in sentences naming the step, the host or package, and the fix. */
  error?: string;
  results: Array<{ step: Check; result: SandboxResult }>;
  durationMs: number;
}

function list(items: string[]): string {
  if (items.length <= 1) return items.join("");
  return `${items.slice(0, -1).join(", ")} and ${items.at(-1)}`;
}

/*
 * What the package managers print when a package is missing or a version does not exist
 * (npm's E404/ETARGET, pip's "No matching distribution", Go's "unknown revision", cargo's
 * "failed to select a version"): the package's name, for the failure's sentence.
 */
const MISSING_PACKAGE: RegExp[] = [
  /404 Not Found - GET \S+\/(@?[^\s/]+(?:%2[fF][^\s/]+)?)(?:\s|$)/,
  /No matching version found for (\S+)/,
  /No matching distribution found for (\S+)/,
  /go: ([^\s@]+@\S+): .*(?:unknown revision|not found)/,
  /failed to select a version for the requirement `([^`]+)`/,
];

/** The package a failed install names as missing, or undefined. */
export function missingPackage(output: string): string | undefined {
  for (const pattern of MISSING_PACKAGE) {
    const found = pattern.exec(output)?.[1];
    if (found) return decodeURIComponent(found.replace(/%2[fF]/, "/")).replace(/\.$/, "");
  }
  return undefined;
}

const OUTPUT_LINES = 15;

/** The failure's sentences: the step, then the host to allow or the package that is missing. */
export function setupFailure(
  step: Check,
  result: SandboxResult,
  refused: string[],
  allow: readonly string[],
): string {
  const head = `The setup step failed: ${describeResult(result)}.`;
  if (refused.length > 0) {
    const hosts = list(refused.map((h) => `\`${h}\``));
    const them = refused.length === 1 ? "it" : "them";
    const now = allow.length > 0 ? allow.join(",") : "(empty)";
    return `${head} It asked for ${hosts}, refused because ${refused.length === 1 ? "that host is" : "those hosts are"} not on SANDBOX_SETUP_ALLOW (now ${now}). If the repository may download from ${them}, add ${them} to SANDBOX_SETUP_ALLOW.`;
  }
  const missing = missingPackage(result.output);
  const tail = result.output.trimEnd().split("\n").slice(-OUTPUT_LINES).join("\n");
  const pkg = missing ? ` The package \`${missing}\` could not be found on the registry.` : "";
  const fix =
    ` Fix the repository's ${step.name === "install" ? "lockfile" : "setup"} or give .github/foreman.yml a \`setup:\` list.` +
    (allow.length === 0
      ? " SANDBOX_SETUP_ALLOW is empty: the setup step has no registry to reach."
      : "");
  return redactText(`${head}${pkg}${fix}${tail ? `\n${tail}` : ""}`);
}

/** Runs the setup of a working copy (see the top of this file). Never throws for a failed step. */
export async function runSetup(options: SetupOptions): Promise<SetupOutcome> {
  const started = performance.now();
  const plan = await detectSetup(options.workdir, {
    ...(options.configNames ? { configNames: options.configNames } : {}),
  });
  const outcome: SetupOutcome = {
    ok: true,
    plan,
    key: null,
    fromCache: false,
    cache: undefined,
    refused: [],
    contacted: [],
    results: [],
    durationMs: 0,
  };
  const done = () => ({ ...outcome, durationMs: Math.round(performance.now() - started) });
  for (const note of plan.notes) await options.log(`Setup: ${note}`);
  if (plan.steps.length === 0) {
    if (plan.source === null) await options.log("Setup: nothing to install.");
    return done();
  }
  const key = await setupKey(options.workdir, plan);
  outcome.key = key;
  const existing = await findCacheEntry(options.owner, key);
  let fresh: NewCacheEntry | undefined;
  if (existing) {
    outcome.fromCache = true;
    if (await restoredFromCache(options, plan, existing, key)) {
      outcome.cache = existing;
      return done();
    }
  } else {
    fresh = await createCacheEntry(options.owner, key);
    await options.log(
      `Setup: no package cache for these lockfiles yet (entry ${key.slice(0, 12)}); downloading ${options.allow.length > 0 ? `through the allowlist (${options.allow.join(", ")})` : "with SANDBOX_NETWORK's network (SANDBOX_SETUP_ALLOW is empty)"}.`,
    );
  }
  let proxy: SetupProxy | undefined;
  try {
    if (options.allow.length > 0) {
      try {
        proxy = await startSetupProxy(options.allow, sandboxSettings().setupAddresses);
      } catch (error) {
        outcome.ok = false;
        outcome.error = error instanceof Error ? error.message : String(error);
        return done();
      }
    }
    await runSetupSteps(options, existing ?? fresh!.cache, proxy, outcome);
    if (!outcome.ok) return done();
    await logDownloads(options, proxy, outcome);
    if (fresh) {
      await saveOutputs(options.workdir, fresh.cache.dir, plan.outputs);
      const saved = await fresh.commit();
      fresh = undefined;
      if (saved)
        await options.log("Setup: saved the package cache for later tasks of this repository.");
    }
    outcome.cache = existing ?? (await findCacheEntry(options.owner, key));
    return done();
  } finally {
    await proxy?.stop();
    await fresh?.discard();
  }
}

/**
 * What the install made last time for the same inputs, copied into the working copy: nothing
 * run, no network. False (and a line saying the install runs from the cache) when the entry
 * does not hold them.
 */
async function restoredFromCache(
  options: SetupOptions,
  plan: SetupPlan,
  existing: SandboxCache,
  key: string,
): Promise<boolean> {
  if (await restoreOutputs(options.workdir, existing.dir, plan.outputs)) {
    await options.log(
      `Setup: no registry was contacted: ${list(plan.outputs)} restored from the package cache (entry ${key.slice(0, 12)}) in place of ${list(plan.steps.map((s) => `\`${redactText(s.command)}\``))}.`,
    );
    return true;
  }
  await options.log(`Setup: installing from the package cache (entry ${key.slice(0, 12)}).`);
  return false;
}

/**
 * Runs the plan's steps in order through the proxy (when there is one), keeping each result
 * and the hosts asked for on `outcome`; the first failing step sets `outcome.ok` false and
 * ends the run. A step past the disk budget throws.
 */
async function runSetupSteps(
  options: SetupOptions,
  cache: SandboxCache,
  proxy: SetupProxy | undefined,
  outcome: SetupOutcome,
): Promise<void> {
  let blockedLogged = 0;
  for (const step of outcome.plan.steps) {
    options.signal?.throwIfAborted();
    await options.log(`Setup: running ${step.name}: \`${redactText(step.command)}\``);
    const result = await runSandboxed(step.command, {
      cwd: options.workdir,
      timeoutMs: options.timeoutMs,
      maxOutputBytes: 256 * 1024,
      ...(options.signal ? { signal: options.signal } : {}),
      cache,
      timeBudget: options.timeBudget,
      ...(proxy ? { proxy: { port: proxy.port } } : {}),
      env: { GOFLAGS: "-mod=mod", GOTOOLCHAIN: "local", ...options.env },
      onHeartbeat: (ms) =>
        void Promise.resolve(options.log(`Setup: ${heartbeatLine(step.command, ms)}`)).catch(
          () => undefined,
        ),
    });
    if (result.aborted) options.signal?.throwIfAborted();
    outcome.results.push({ step, result });
    const overBudget = diskBudgetFailure(result, options.subject ?? "task");
    if (overBudget) throw overBudget;
    const report = proxy ? await proxy.report() : { refused: [], blocked: [], contacted: [] };
    outcome.refused = report.refused;
    outcome.contacted = report.contacted;
    // On the allowlist by name, but at an address the guard refuses (setup-proxy-guard.ts).
    const blocked = report.blocked;
    if (blocked.length > blockedLogged)
      await options.log(`Setup: the proxy refused ${list(blocked.slice(blockedLogged))}.`);
    blockedLogged = blocked.length;
    if (!result.ok) {
      outcome.ok = false;
      outcome.error = setupFailure(step, result, outcome.refused, options.allow);
      await options.log(`Setup: ${step.name}: ${describeResult(result)}`);
      return;
    }
    await options.log(`Setup: ${step.name}: ${describeResult(result)}`);
  }
}

/** After a successful install: where the proxy downloaded from, and what it refused. */
async function logDownloads(
  options: SetupOptions,
  proxy: SetupProxy | undefined,
  outcome: SetupOutcome,
): Promise<void> {
  if (proxy)
    await options.log(
      outcome.contacted.length > 0
        ? `Setup: downloaded from ${list(outcome.contacted)}.`
        : "Setup: no registry was contacted: everything came from the package cache.",
    );
  if (outcome.refused.length > 0)
    await options.log(
      `Setup: the proxy refused ${list(outcome.refused)} (not on SANDBOX_SETUP_ALLOW); the install succeeded without ${outcome.refused.length === 1 ? "it" : "them"}.`,
    );
}
