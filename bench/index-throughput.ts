/*
 * buildIndex against plain reading of the same files.
 *
 * The corpus is a generated tree of source-like files (TypeScript-ish text of 1–8 KB: imports,
 * interfaces, functions, comments), committed to a git repository in a temp folder. Each
 * round measures, one after the other on the same warm page cache:
 *   baseline  `git ls-files` and every listed file's bytes read (same concurrency as the index)
 *   index     buildIndex on the repository
 * The best round of each is reported (BENCH_ROUNDS rounds, default 3), with their ratio.
 * buildIndex runs on its worker pool (one thread per core): the pool is started by an
 * unmeasured first build, as a service starts it once; that build's time is reported too.
 *
 * BENCH_INDEX_FILES sets the corpus size (default 20000).
 */
import { execFile } from "node:child_process";
import { readFile } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { promisify } from "node:util";
import { buildIndex } from "../src/indexer/index.js";
import { READ_CONCURRENCY } from "../src/indexer/read-files.js";
import { forEachConcurrently } from "../src/util/concurrency.js";
import {
  activeCleanups,
  BenchError,
  Cleanup,
  envInt,
  summariseThroughput,
  type Benchmark,
  type BenchReport,
  type BenchSettings,
  type ThroughputRound,
} from "./lib/harness.js";

const execFileAsync = promisify(execFile);
// The callback form: fs/promises' readFile is markedly slower, which would flatter the index.
const readFileAsync = promisify(readFile);

/** Indexing must reach at least this share of plain reading's throughput. */
export const TARGET_RATIO = 0.3;

const GIT = ["-c", "user.email=bench@example.com", "-c", "user.name=bench"];

const WORDS = (
  "account action adapter address agent alert allocate allow analytics apply archive " +
  "attempt audit auth backoff batch binary bind block branch bucket buffer build bundle " +
  "cache callback cancel channel check chunk claim client clone close cluster commit " +
  "compare config connect consume context convert cookie count create credential cursor " +
  "daemon data decode default defer delete delivery deploy detect digest dispatch " +
  "document download draft emit encode endpoint entry error event expire export fetch " +
  "field filter flush format frame gateway graph guard handle hash header health history " +
  "hook identity import index input install invoke issue item job journal key label " +
  "latency layout lease limit listen loader lock logger lookup manifest mapper match " +
  "merge message metric migrate mirror model monitor mount network node notify object " +
  "offset option order origin output owner packet page parse partition patch payload " +
  "peer pending permission pipeline plan policy poll pool port prefix probe process " +
  "profile project prompt provider proxy publish pull push query queue quota range rate " +
  "reader receive record redact refresh region registry release remote render replica " +
  "report repository request resolve resource response retry review revoke route rule " +
  "runner sample schedule schema scope search secret segment select sender session " +
  "settle shard signal signature slot snapshot socket source span split stage state " +
  "status storage stream subject summary sync table target task template tenant thread " +
  "throttle ticket timer token topic trace tracker transform tree trigger update upload " +
  "usage user validate value vector verify version view watch webhook window worker " +
  "workspace writer"
).split(" ");

const TYPES = ["string", "number", "boolean", "Date", "Buffer", "unknown", "string[]"];

/** Deterministic pseudo-random numbers (mulberry32), so every run indexes the same text. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function generateFile(rnd: () => number, targetBytes: number): string {
  const pick = <T>(list: readonly T[]) => list[Math.floor(rnd() * list.length)]!;
  const cap = (w: string) => w[0]!.toUpperCase() + w.slice(1);
  const camel = (n: number) => {
    let s = pick(WORDS);
    for (let i = 1; i < n; i++) s += cap(pick(WORDS));
    return s;
  };
  const sentence = (n: number) => Array.from({ length: n }, () => pick(WORDS)).join(" ");
  const out: string[] = [];
  for (let i = 0, n = 2 + Math.floor(rnd() * 5); i < n; i++) {
    out.push(`import { ${camel(2)}, ${camel(2)} } from "../${pick(WORDS)}/${pick(WORDS)}.js";`);
  }
  out.push("");
  let size = out.join("\n").length;
  while (size < targetBytes) {
    const kind = rnd();
    let block: string;
    if (kind < 0.25) {
      const name = cap(camel(2));
      const fields = Array.from(
        { length: 2 + Math.floor(rnd() * 5) },
        () => `  ${camel(2)}${rnd() < 0.3 ? "?" : ""}: ${pick(TYPES)};`,
      );
      block = `/** ${cap(sentence(8))}. */\nexport interface ${name} {\n${fields.join("\n")}\n}\n`;
    } else if (kind < 0.85) {
      const name = camel(2 + Math.floor(rnd() * 2));
      const args = Array.from({ length: 1 + Math.floor(rnd() * 3) }, () => camel(1)).join(", ");
      const body: string[] = [];
      for (let i = 0, n = 3 + Math.floor(rnd() * 8); i < n; i++) {
        const r = rnd();
        if (r < 0.4)
          body.push(
            `  const ${camel(2)} = await ${camel(2)}(${camel(1)}, ${Math.floor(rnd() * 1000)});`,
          );
        else if (r < 0.6) body.push(`  if (!${camel(1)}) throw new Error("${sentence(5)}");`);
        else if (r < 0.8) body.push(`  // ${cap(sentence(10))}.`);
        else
          body.push(
            `  ${camel(1)}.${camel(2)}("${pick(WORDS)}-${pick(WORDS)}", { ${camel(1)}: ${rnd() < 0.5} });`,
          );
      }
      block = `/**\n * ${cap(sentence(12))}.\n * ${cap(sentence(9))}.\n */\nexport async function ${name}(${args}) {\n${body.join("\n")}\n  return ${camel(2)};\n}\n`;
    } else {
      block = `export const ${camel(3).toUpperCase()} = ${Math.floor(rnd() * 100000)};\n`;
    }
    out.push(block);
    size += block.length + 1;
  }
  return out.join("\n");
}

/** Writes `count` files under packages/…/src/…, 20 to a directory, and commits them. */
async function createCorpus(dir: string, count: number): Promise<number> {
  const rnd = random(20_000);
  const jobs: Array<{ rel: string; text: string }> = [];
  let bytes = 0;
  for (let i = 0; i < count; i++) {
    const pkg = `pkg-${String(Math.floor(i / 1000)).padStart(2, "0")}`;
    const mod = `${WORDS[Math.floor(i / 20) % WORDS.length]!}-${Math.floor(i / 20)}`;
    const rel = `packages/${pkg}/src/${mod}/${WORDS[i % WORDS.length]!}-${i}.ts`;
    // Sizes spread over 1–8 KB, weighted towards the small end as in real trees.
    const target = 1024 + Math.floor(rnd() * rnd() * 7 * 1024);
    const text = generateFile(rnd, target);
    bytes += Buffer.byteLength(text);
    jobs.push({ rel, text });
  }
  const dirs = new Set(jobs.map((j) => path.dirname(path.join(dir, j.rel))));
  for (const d of dirs) await mkdir(d, { recursive: true });
  await forEachConcurrently(jobs, 64, (j) => writeFile(path.join(dir, j.rel), j.text));
  await execFileAsync("git", [...GIT, "init", "-q", "-b", "main"], { cwd: dir });
  await execFileAsync("git", [...GIT, "add", "-A"], { cwd: dir, maxBuffer: 64 << 20 });
  await execFileAsync("git", [...GIT, "commit", "-q", "-m", "corpus"], {
    cwd: dir,
    maxBuffer: 64 << 20,
  });
  return bytes;
}

/** What any indexer has to do at least: list the files with git and read every byte. */
async function readEverything(dir: string): Promise<ThroughputRound> {
  const started = performance.now();
  const { stdout } = await execFileAsync(
    "git",
    ["ls-files", "-z", "--cached", "--others", "--exclude-standard"],
    { cwd: dir, maxBuffer: 512 << 20 },
  );
  const files = stdout.split("\0").filter((p) => p !== "");
  let bytes = 0;
  await forEachConcurrently(files, READ_CONCURRENCY, async (rel) => {
    const content = await readFileAsync(path.join(dir, rel));
    bytes += content.length;
  });
  return { ms: performance.now() - started, files: files.length, bytes };
}

async function indexEverything(dir: string): Promise<ThroughputRound> {
  const started = performance.now();
  const index = await buildIndex(dir);
  return { ms: performance.now() - started, files: index.stats.files, bytes: index.stats.bytes };
}

const fmt = (r: ThroughputRound) =>
  `${r.ms.toFixed(0).padStart(5)} ms  ${(r.files / (r.ms / 1000)).toFixed(0).padStart(6)} files/s  ` +
  `${(r.bytes / 1e6 / (r.ms / 1000)).toFixed(1).padStart(6)} MB/s`;

export const indexThroughput: Benchmark = {
  name: "index-throughput",
  description: "buildIndex vs git ls-files + reading every file, on a generated 20k-file repo",
  async run(settings: BenchSettings): Promise<BenchReport> {
    const cleanup = new Cleanup();
    activeCleanups.add(cleanup);
    try {
      const count = envInt("BENCH_INDEX_FILES", 20_000, 100, 200_000);
      const dir = await mkdtemp(path.join(os.tmpdir(), "foreman-bench-index-"));
      cleanup.defer("remove temp dir", () => rm(dir, { recursive: true, force: true }));
      const setupStarted = performance.now();
      const corpusBytes = await createCorpus(dir, count);
      console.log(
        `  corpus: ${count} files, ${(corpusBytes / 1e6).toFixed(1)} MB, committed in ` +
          `${((performance.now() - setupStarted) / 1000).toFixed(1)} s`,
      );

      // One unmeasured pass of each: page cache, JIT, and the index's worker pool, which a
      // service starts once and keeps (its start is reported, not counted in the rounds).
      await readEverything(dir);
      const first = await indexEverything(dir);
      const warm = await buildIndex(dir);
      if (warm.stats.files !== count) {
        throw new BenchError(
          `buildIndex indexed ${warm.stats.files} of ${count} files: ${JSON.stringify(warm.stats.skipped)}`,
        );
      }
      console.log(
        `  first build (starts ${warm.stats.workers} worker threads) ${fmt(first)}; ` +
          `${warm.stats.workers} workers`,
      );
      const query = "retry backoff webhook delivery";
      const searchStarted = performance.now();
      const hit = warm.search(query, 10)[0];
      console.log(
        `  sanity: top hit for "${query}": ${hit?.path ?? "none"} ` +
          `(${(performance.now() - searchStarted).toFixed(0)} ms with snippets)`,
      );

      const baseline: ThroughputRound[] = [];
      const indexed: ThroughputRound[] = [];
      for (let round = 1; round <= settings.rounds; round++) {
        const b = await readEverything(dir);
        baseline.push(b);
        console.log(`  round ${round}/${settings.rounds} baseline ${fmt(b)}`);
        const i = await indexEverything(dir);
        indexed.push(i);
        console.log(`  round ${round}/${settings.rounds} index    ${fmt(i)}`);
      }
      const base = summariseThroughput("git ls-files + read all", baseline);
      const index = summariseThroughput("buildIndex", indexed);
      const ratio = index.mbPerSec / base.mbPerSec;
      return {
        subjects: [],
        throughput: [base, index],
        checks: [
          {
            name: "index/read throughput",
            value: ratio,
            target: TARGET_RATIO,
            pass: ratio >= TARGET_RATIO,
            detail:
              `${index.mbPerSec.toFixed(1)} / ${base.mbPerSec.toFixed(1)} MB/s, ` +
              `${index.filesPerSec.toFixed(0)} / ${base.filesPerSec.toFixed(0)} files/s (best rounds)`,
          },
        ],
        info: {
          files: count,
          firstBuildMs: first.ms,
          workers: warm.stats.workers,
          corpusBytes,
          rounds: settings.rounds,
          readConcurrency: READ_CONCURRENCY,
          cpus: os.availableParallelism(),
          node: process.version,
        },
      };
    } finally {
      await cleanup.run();
      activeCleanups.delete(cleanup);
    }
  },
};
