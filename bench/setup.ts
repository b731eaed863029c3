/*
 * `npm run bench -- setup`: what the setup step (src/verify/setup.ts) costs on a real install.
 *
 * - Through the allowlist vs unrestricted: `npm ci` of the same lockfile, each time with an
 *   empty package cache (so every tarball is downloaded), in the sandbox with the setup
 *   network (per-run tinyproxy with SANDBOX_SETUP_ALLOW's default list, sandbox/setup-proxy.ts)
 *   and with SANDBOX_NETWORK=public (slirp4netns straight out). Alternated run by run so the
 *   registry's and the machine's moods weigh on both alike. Target: at most 1.2×.
 * - The second install from the cache vs the first: runSetup on a fresh working copy twice
 *   with the same account and repository (the first downloads and saves the entry, the
 *   second installs from it read-only). Target: at most 0.3×.
 *
 * The repository: BENCH_SETUP_REPO (a folder with package.json and package-lock.json), else
 * a small web service declaring express 4 (its lockfile resolved once from the registry at
 * the start: about 65 packages). BENCH_SETUP_RUNS (default 3) pairs; figures are medians.
 */
import { execFile } from "node:child_process";
import { cp, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { checkSandbox, configureSandbox, runSandboxed } from "../src/sandbox/index.js";
import { configureSandboxCaches } from "../src/sandbox/cache.js";
import { DEFAULT_SETUP_ALLOW, startSetupProxy } from "../src/sandbox/setup-proxy.js";
import { runSetup } from "../src/verify/setup.js";
import { BenchError, summariseLatencies, type Benchmark, type BenchReport } from "./lib/harness.js";

const TARGET_ALLOWLIST_RATIO = 1.2;
const TARGET_CACHE_RATIO = 0.3;
const INSTALL = "npm ci --no-audit --no-fund";
const run = promisify(execFile);

function runs(): number {
  const raw = process.env.BENCH_SETUP_RUNS;
  const value = raw === undefined || raw.trim() === "" ? 3 : Number(raw);
  if (!Number.isInteger(value) || value < 1 || value > 50)
    throw new Error(`BENCH_SETUP_RUNS must be an integer from 1 to 50, got "${raw}"`);
  return value;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** The repository to install: BENCH_SETUP_REPO, or express 4's dependencies, locked now. */
async function prepareRepo(dir: string): Promise<string> {
  const given = process.env.BENCH_SETUP_REPO?.trim();
  const repo = path.join(dir, "repo");
  if (given) {
    await cp(given, repo, {
      recursive: true,
      filter: (src) => !src.includes(`${path.sep}node_modules`),
    });
  } else {
    await run("mkdir", ["-p", repo]);
    await writeFile(
      path.join(repo, "package.json"),
      `${JSON.stringify({ name: "bench-web", version: "1.0.0", private: true, dependencies: { express: "4.21.2" } }, null, 2)}\n`,
    );
    await run("npm", ["install", "--package-lock-only", "--no-audit", "--no-fund"], {
      cwd: repo,
      env: { ...process.env, npm_config_cache: path.join(dir, "lock-cache") },
    });
  }
  await run("git", ["init", "-q"], { cwd: repo });
  return repo;
}

/** A fresh copy of the repository (no node_modules). */
async function copy(repo: string, dir: string, name: string): Promise<string> {
  const to = path.join(dir, name);
  await rm(to, { recursive: true, force: true });
  await cp(repo, to, { recursive: true, filter: (src) => !src.includes("node_modules") });
  return to;
}

const fmt = (n: number) => `${(n / 1000).toFixed(2)} s`;

export const setupBench: Benchmark = {
  name: "setup",
  description:
    "the setup step: a real npm ci through the allowlist's proxy vs unrestricted, and the second install from the package cache vs the first",
  async run(): Promise<BenchReport> {
    const n = runs();
    const dir = await mkdtemp(path.join(os.tmpdir(), "foreman-bench-setup-"));
    try {
      const repo = await prepareRepo(dir);
      const lock = JSON.parse(await readFile(path.join(repo, "package-lock.json"), "utf8")) as {
        packages?: Record<string, unknown>;
      };
      const packages = Object.keys(lock.packages ?? {}).length - 1;
      configureSandbox({ network: "public" });
      await checkSandbox({ setupProxy: true });
      configureSandbox({});

      const allowlist: number[] = [];
      const open: number[] = [];
      const install = async (mode: "allowlist" | "public", i: number): Promise<number> => {
        const cwd = await copy(repo, dir, `ws-${mode}-${i}`);
        const cache = path.join(dir, `cache-${mode}-${i}`);
        await run("mkdir", ["-p", cache]);
        configureSandbox(mode === "public" ? { network: "public" } : {});
        const started = performance.now();
        const proxy = mode === "allowlist" ? await startSetupProxy(DEFAULT_SETUP_ALLOW) : undefined;
        try {
          const result = await runSandboxed(INSTALL, {
            cwd,
            timeoutMs: 600_000,
            cache: { dir: cache },
            ...(proxy ? { proxy: { port: proxy.port } } : {}),
          });
          if (!result.ok)
            throw new BenchError(`${INSTALL} (${mode}) failed:\n${result.output.slice(-2000)}`);
        } finally {
          await proxy?.stop();
          configureSandbox({});
        }
        const ms = performance.now() - started;
        await rm(cwd, { recursive: true, force: true });
        await rm(cache, { recursive: true, force: true });
        return ms;
      };
      for (let i = 0; i < n; i++) {
        // Rotate which goes first: the registry's CDN warms to whichever asked first.
        if (i % 2 === 0) {
          allowlist.push(await install("allowlist", i));
          open.push(await install("public", i));
        } else {
          open.push(await install("public", i));
          allowlist.push(await install("allowlist", i));
        }
      }

      const first: number[] = [];
      const second: number[] = [];
      const contacted: string[][] = [];
      for (let i = 0; i < n; i++) {
        configureSandboxCaches({ root: path.join(dir, `entries-${i}`) });
        const owner = { account: "bench", repo: `setup-${i}` };
        for (const round of [first, second]) {
          const cwd = await copy(repo, dir, `ws-cache-${i}`);
          const started = performance.now();
          const outcome = await runSetup({
            workdir: cwd,
            owner,
            allow: DEFAULT_SETUP_ALLOW,
            timeoutMs: 600_000,
            log: () => undefined,
          });
          round.push(performance.now() - started);
          if (!outcome.ok) throw new BenchError(`runSetup failed: ${outcome.error}`);
          if (round === second) {
            if (!outcome.fromCache) throw new BenchError("the second install missed the cache");
            contacted.push(outcome.contacted);
          }
        }
      }
      configureSandboxCaches({});

      const allowRatio = median(allowlist) / median(open);
      const cacheRatio = median(second) / median(first);
      console.log(
        `  ${INSTALL} (${packages} packages): through the allowlist ${fmt(median(allowlist))}, ` +
          `unrestricted ${fmt(median(open))} (${allowRatio.toFixed(2)}×, medians of ${n})`,
      );
      console.log(
        `  setup step: first install ${fmt(median(first))}, second from the cache ${fmt(median(second))} ` +
          `(${cacheRatio.toFixed(2)}×); hosts contacted by the second: ${JSON.stringify(contacted)}`,
      );
      return {
        subjects: [],
        latencies: [
          summariseLatencies("npm ci, allowlist proxy", [Float64Array.from(allowlist)]),
          summariseLatencies("npm ci, SANDBOX_NETWORK=public", [Float64Array.from(open)]),
          summariseLatencies("setup, first (downloads)", [Float64Array.from(first)]),
          summariseLatencies("setup, second (cache)", [Float64Array.from(second)]),
        ],
        checks: [
          {
            name: "install through the allowlist vs unrestricted",
            value: allowRatio,
            target: TARGET_ALLOWLIST_RATIO,
            atMost: true,
            pass: allowRatio <= TARGET_ALLOWLIST_RATIO,
            detail: `median ${fmt(median(allowlist))} vs ${fmt(median(open))}, ${packages} packages`,
          },
          {
            name: "second install from the cache vs the first",
            value: cacheRatio,
            target: TARGET_CACHE_RATIO,
            atMost: true,
            pass: cacheRatio <= TARGET_CACHE_RATIO,
            detail: `median ${fmt(median(second))} vs ${fmt(median(first))}`,
          },
        ],
        info: {
          runs: n,
          packages,
          allowlistMs: allowlist,
          publicMs: open,
          firstMs: first,
          secondMs: second,
          secondContacted: contacted,
          cpus: os.availableParallelism(),
          load: os.loadavg(),
        },
      };
    } finally {
      configureSandbox({});
      configureSandboxCaches({});
      await rm(dir, { recursive: true, force: true });
    }
  },
};
