/*
 * Localisation: does the index put the files a change needs in front of the model?
 *
 * On real repositories' history: for each bug-fix-like commit (message says fix/bug, it
 * changes 1–5 non-test source files that already existed), the index is built on the parent
 * commit and queried with the commit message. Gold: the non-test source files the commit
 * changed. Reported over all commits of all repositories:
 *   top N     every gold file is among the first N search hits (N = 1, 5, 10, 20)
 *   visible   every gold file appears in what the planning prompt shows before the first
 *             tool call (src/indexer/planning-context.ts: pre-search hits, the tree, the map)
 * and, per repository, buildIndex against listing and reading every file at HEAD.
 *
 * Settings: LOCALISATION_REPOS (comma-separated paths of git clones; without it the
 * benchmark is skipped with a message), LOCALISATION_COMMITS (per repository, default 100).
 * Clones are left untouched: each gets a detached `git worktree` in a temp folder.
 */
import { execFile } from "node:child_process";
import { readFile } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { promisify } from "node:util";
import { buildIndex } from "../src/indexer/index.js";
import { planningContext } from "../src/indexer/planning-context.js";
import { READ_CONCURRENCY } from "../src/indexer/read-files.js";
import { forEachConcurrently } from "../src/util/concurrency.js";
import {
  activeCleanups,
  BenchError,
  Cleanup,
  type Benchmark,
  type BenchReport,
  type Check,
} from "./lib/harness.js";

const execFileAsync = promisify(execFile);
const readFileAsync = promisify(readFile);

export const TARGET_TOP10 = 0.75;
export const TARGET_VISIBLE = 0.75;
export const TARGET_BUILD_RATIO = 3;

const SOURCE =
  /\.(?:[cm]?[jt]sx?|py|go|rs|java|kt|rb|php|cs|c|h|cc|cpp|hpp|swift|scala|ex|exs|lua|vue|svelte)$/;
const TEST =
  /(?:^|\/)(?:tests?|__tests__|__mocks__|spec|specs|testdata|testing|fixtures?|e2e|benchmarks?|examples?|docs?)\/|(?:^|\/)test_[^/]*$|(?:^|\/)(?:tests?|specs?)\.[a-z]+$|[._-](?:test|spec)s?\.[a-z]+$|_test\.go$|(?:^|\/)conftest\.py$/i;
const FIX = /\bfix|\bbug/i;

async function git(cwd: string, ...args: string[]): Promise<string> {
  const { stdout } = await execFileAsync("git", args, { cwd, maxBuffer: 256 << 20 });
  return stdout;
}

interface Case {
  commit: string;
  parent: string;
  message: string;
  gold: string[];
}

/** The most recent bug-fix-like commits of a repository (see the header). */
async function cases(repo: string, limit: number): Promise<Case[]> {
  const log = await git(repo, "log", "--no-merges", "--format=%x1e%H %P%x00%B", "HEAD");
  const out: Case[] = [];
  for (const entry of log.split("\x1e")) {
    if (out.length >= limit) break;
    const [ids, message] = entry.split("\0");
    if (!ids || message === undefined || !FIX.test(message)) continue;
    const [commit, parent, second] = ids.trim().split(" ");
    if (!commit || !parent || second) continue;
    const diff = await git(
      repo,
      "diff-tree",
      "-r",
      "--no-renames",
      "--name-status",
      parent,
      commit,
    );
    const changed = diff
      .split("\n")
      .filter((l) => l !== "")
      .map((l) => l.split("\t") as [string, string]);
    const source = changed.filter(([, p]) => SOURCE.test(p) && !TEST.test(p));
    // A new file cannot be found in the parent's index: such commits measure nothing here.
    if (source.length < 1 || source.length > 5 || source.some(([s]) => s !== "M")) continue;
    out.push({ commit, parent, message: message.trim(), gold: source.map(([, p]) => p) });
  }
  return out;
}

/** Relative paths of the files a rendered tree (summarizeTree) shows. */
export function treeFiles(tree: string): Set<string> {
  const files = new Set<string>();
  const dirs: string[] = [];
  for (const line of tree.split("\n").slice(1)) {
    const indent = line.length - line.trimStart().length;
    const depth = indent / 2;
    const text = line.trim();
    dirs.length = depth;
    const dir = /^(.+)\/ \(\d+ files?\)$/.exec(text);
    if (dir) dirs[depth] = dir[1]!;
    else if (!text.startsWith("… ")) files.add([...dirs, text].join("/"));
  }
  return files;
}

async function readEverything(dir: string): Promise<number> {
  const started = performance.now();
  const list = await git(dir, "ls-files", "-z", "--cached", "--others", "--exclude-standard");
  await forEachConcurrently(
    list.split("\0").filter((p) => p !== ""),
    READ_CONCURRENCY,
    async (rel) => {
      await readFileAsync(path.join(dir, rel)).catch(() => undefined);
    },
  );
  return performance.now() - started;
}

interface Tally {
  cases: number;
  top: Record<number, number>;
  visible: number;
}

const CUTS = [1, 5, 10, 20];

function pct(n: number, of: number): string {
  return `${((100 * n) / Math.max(of, 1)).toFixed(1)}%`;
}

export const localisation: Benchmark = {
  name: "localisation",
  description: "commit message → changed source files on real repositories' history",
  async run(): Promise<BenchReport> {
    const repos = (process.env.LOCALISATION_REPOS ?? "")
      .split(",")
      .map((r) => r.trim())
      .filter((r) => r !== "");
    if (repos.length === 0) {
      console.log(
        "  skipped: set LOCALISATION_REPOS to comma-separated paths of git clones " +
          "(e.g. LOCALISATION_REPOS=/tmp/loc/express,/tmp/loc/click)",
      );
      return { subjects: [], checks: [], info: { skipped: "LOCALISATION_REPOS is not set" } };
    }
    const limit = Number(process.env.LOCALISATION_COMMITS ?? 100);
    if (!Number.isInteger(limit) || limit < 1) {
      throw new BenchError(`LOCALISATION_COMMITS must be a positive integer`);
    }
    const cleanup = new Cleanup();
    activeCleanups.add(cleanup);
    const total: Tally = { cases: 0, top: { 1: 0, 5: 0, 10: 0, 20: 0 }, visible: 0 };
    const perRepo: Record<string, unknown> = {};
    const checks: Check[] = [];
    const verbose = process.env.LOCALISATION_VERBOSE === "1";
    // Summed over the repositories: on a small one both take tens of milliseconds and the
    // ratio is mostly fixed costs (starting git), not indexing.
    let totalReadMs = 0;
    let totalIndexMs = 0;
    try {
      for (const repo of repos) {
        const name = path.basename(repo);
        const work = await mkdtemp(path.join(os.tmpdir(), `foreman-loc-${name}-`));
        cleanup.defer(`remove worktree of ${name}`, async () => {
          await git(repo, "worktree", "remove", "--force", work).catch(() => undefined);
          await rm(work, { recursive: true, force: true });
        });
        await git(repo, "worktree", "add", "--detach", "--force", work, "HEAD");

        // Build speed at HEAD: best of three of each, warm cache.
        let readMs = Infinity;
        let indexMs = Infinity;
        for (let round = 0; round < 3; round++) {
          readMs = Math.min(readMs, await readEverything(work));
          const started = performance.now();
          await buildIndex(work);
          indexMs = Math.min(indexMs, performance.now() - started);
        }
        totalReadMs += readMs;
        totalIndexMs += indexMs;

        const tally: Tally = { cases: 0, top: { 1: 0, 5: 0, 10: 0, 20: 0 }, visible: 0 };
        for (const c of await cases(repo, limit)) {
          await git(work, "checkout", "--quiet", "--detach", "--force", c.parent);
          const index = await buildIndex(work, { workers: false });
          const ranked = index.search(c.message, 20).map((h) => h.path);
          const rank = (gold: string) => {
            const at = ranked.indexOf(gold);
            return at < 0 ? Infinity : at + 1;
          };
          const worst = Math.max(...c.gold.map(rank));
          const view = planningContext(index, c.message);
          const shown = treeFiles(view.tree);
          for (const h of view.hits) shown.add(h.path);
          const map = `\n${view.map}\n`;
          const visible = c.gold.every((g) => shown.has(g) || map.includes(`\n${g}\n`));
          tally.cases++;
          for (const n of CUTS) if (worst <= n) tally.top[n]!++;
          if (visible) tally.visible++;
          if (verbose && worst > 10) {
            console.log(
              `    miss ${c.commit.slice(0, 8)} "${c.message.split("\n")[0]}" gold ${c.gold.join(", ")}` +
                ` ranks ${c.gold.map(rank).join(",")}; top: ${ranked.slice(0, 5).join(", ")}`,
            );
          }
        }
        total.cases += tally.cases;
        for (const n of CUTS) total.top[n]! += tally.top[n]!;
        total.visible += tally.visible;
        perRepo[name] = { ...tally, readMs, indexMs };
        console.log(
          `  ${name}: ${tally.cases} commits; top1 ${pct(tally.top[1]!, tally.cases)}, ` +
            `top5 ${pct(tally.top[5]!, tally.cases)}, top10 ${pct(tally.top[10]!, tally.cases)}, ` +
            `top20 ${pct(tally.top[20]!, tally.cases)}, visible ${pct(tally.visible, tally.cases)}; ` +
            `build ${indexMs.toFixed(0)} ms vs read ${readMs.toFixed(0)} ms`,
        );
      }
      if (total.cases === 0) throw new BenchError("no bug-fix commit found in LOCALISATION_REPOS");
      const top10 = total.top[10]! / total.cases;
      const visible = total.visible / total.cases;
      console.log(
        `  all: ${total.cases} commits; top1 ${pct(total.top[1]!, total.cases)}, top5 ` +
          `${pct(total.top[5]!, total.cases)}, top10 ${pct(total.top[10]!, total.cases)}, top20 ` +
          `${pct(total.top[20]!, total.cases)}, visible before first call ${pct(total.visible, total.cases)}`,
      );
      checks.unshift(
        {
          name: "all gold files in top 10",
          value: top10,
          target: TARGET_TOP10,
          pass: top10 >= TARGET_TOP10,
          detail: `${total.top[10]} of ${total.cases} commits`,
        },
        {
          name: "all gold visible before first tool call",
          value: visible,
          target: TARGET_VISIBLE,
          pass: visible >= TARGET_VISIBLE,
          detail: `${total.visible} of ${total.cases} commits`,
        },
      );
      const ratio = totalIndexMs / totalReadMs;
      checks.push({
        name: "index build / list and read every file",
        value: ratio,
        target: TARGET_BUILD_RATIO,
        atMost: true,
        pass: ratio <= TARGET_BUILD_RATIO,
        detail: `${totalIndexMs.toFixed(0)} ms vs ${totalReadMs.toFixed(0)} ms at HEAD, best of 3, summed over the repositories`,
      });
      return { subjects: [], checks, info: { total, perRepo, limit } };
    } finally {
      await cleanup.run();
      activeCleanups.delete(cleanup);
    }
  },
};
