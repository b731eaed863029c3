/*
 * The index of a working copy: which files it holds (git's list minus vendored, generated,
 * binary and oversized files) and a BM25F ranking over their paths, defined symbols and
 * content. Large repositories are tokenized on worker threads (workers.ts), small ones
 * in-process; either way each file is tokenized as soon as its bytes are read.
 */
import path from "node:path";
import { performance } from "node:perf_hooks";
import { Bm25Index, type WeightedTerm } from "./bm25.js";
import { listRepoFiles } from "./file-list.js";
import { forEachConcurrently } from "../util/concurrency.js";
import { entryInfo, readTextSync } from "../workcopy/fs.js";
import { READ_CONCURRENCY, readBounded } from "./read-files.js";
import { ShardBuilder, type Shard } from "./shard.js";
import { fileKind, kindFactors } from "./ranking.js";
import { skipByPath } from "./skip.js";
import { summarizeTree } from "./summary.js";
import { compoundKey, queryTerms, scanWords, TokenBuffer, wordParts } from "./tokenize.js";
import { indexOnWorkers } from "./workers.js";

export type { SkipReason } from "./skip.js";

/** Files larger than this are left out of the index unless the caller says otherwise. */
export const DEFAULT_MAX_FILE_BYTES = 1024 * 1024;

/** Below this many files, starting workers costs more than it saves. */
const WORKER_MIN_FILES = 1000;

export interface BuildIndexOptions {
  /** Larger files are left out (default 1 MiB). */
  maxFileBytes?: number;
  /** False: never use worker threads (default: for repositories of 1000 files or more). */
  workers?: boolean;
}

export interface SearchHit {
  /** Relative posix path. */
  path: string;
  score: number;
  /** A few numbered lines around the line that best matches the query ("12: const x = …"). */
  snippet: string;
}

export interface IndexStats {
  files: number;
  bytes: number;
  /** Files left out, by reason (see SkipReason); only reasons that occurred. */
  skipped: Record<string, number>;
  ms: number;
  /** Worker threads that did the tokenizing; 0 when it ran in-process. */
  workers: number;
}

export interface RepoIndex {
  root: string;
  /** Indexed paths: relative, posix separators, sorted. */
  files: string[];
  stats: IndexStats;
  search(query: string, limit?: number): SearchHit[];
  /** Indexed files under a relative directory, or all of them. */
  listFiles(dir?: string): string[];
  has(path: string): boolean;
  /**
   * A compact tree of the repository for a prompt: directory counts and the first files;
   * the directories of `focus` files are opened first and those files listed.
   */
  summary(maxEntries?: number, focus?: readonly string[]): string;
}

const SNIPPET_CONTEXT = 2;
const SNIPPET_LINE_CHARS = 200;

/** Lists, filters, reads and indexes the files of the working copy at `root`. */
export async function buildIndex(
  root: string,
  options: BuildIndexOptions = {},
): Promise<RepoIndex> {
  const started = performance.now();
  const absRoot = path.resolve(root);
  if ((await entryInfo(absRoot, ""))?.type !== "directory")
    throw new Error(`${absRoot} is not a directory`);
  const maxFileBytes = options.maxFileBytes ?? DEFAULT_MAX_FILE_BYTES;

  const listing = await listRepoFiles(absRoot);
  const skipped: Record<string, number> = {};
  const skip = (reason: string, n: number) => {
    skipped[reason] = (skipped[reason] ?? 0) + n;
  };
  for (const [reason, n] of Object.entries(listing.prunedDirs)) skip(reason, n);
  const candidates: string[] = [];
  const tracked = listing.source === "git";
  for (const rel of listing.paths) {
    const reason = skipByPath(rel, tracked);
    if (reason === undefined) candidates.push(rel);
    else skip(reason, 1);
  }

  let shards: Shard[] | undefined;
  if (options.workers !== false && candidates.length >= WORKER_MIN_FILES) {
    shards = await indexOnWorkers(absRoot, candidates, maxFileBytes);
  }
  const workers = shards?.length ?? 0;
  shards ??= [await indexInProcess(absRoot, candidates, maxFileBytes)];
  for (const shard of shards) {
    for (const [reason, n] of Object.entries(shard.skipped)) skip(reason, n);
  }
  const index = new Bm25Index(shards);

  const files = [...index.paths].sort();
  const indexed = new Set(files);
  const stats: IndexStats = {
    files: files.length,
    bytes: index.bytes,
    skipped,
    ms: performance.now() - started,
    workers,
  };
  return {
    root: absRoot,
    files,
    stats,
    search: (query, limit = 10) => search(index, absRoot, maxFileBytes, query, limit),
    listFiles: (dir) => listUnder(files, dir),
    has: (p) => indexed.has(normalizeRel(p)),
    summary: (maxEntries = 200, focus = []) =>
      summarizeTree(files, maxEntries, summaryHeader(stats), focus),
  };
}

async function indexInProcess(root: string, paths: string[], maxFileBytes: number): Promise<Shard> {
  const builder = new ShardBuilder();
  await forEachConcurrently(paths, READ_CONCURRENCY, async (rel) => {
    const content = await readBounded(root, rel, maxFileBytes);
    if (typeof content === "string") builder.skip(content);
    else builder.addFile(rel, content);
  });
  return builder.finish();
}

function summaryHeader(stats: IndexStats): string {
  const skipped = Object.entries(stats.skipped).sort(([a], [b]) => compare(a, b));
  const total = skipped.reduce((sum, [, n]) => sum + n, 0);
  const detail = skipped.map(([reason, n]) => `${reason} ${n}`).join(", ");
  return `${stats.files} files indexed${total > 0 ? `; ${total} left out (${detail})` : ""}`;
}

function normalizeRel(p: string): string {
  let rel = p.replace(/\\/g, "/");
  while (rel.startsWith("./")) rel = rel.slice(2);
  rel = rel.replace(/\/+$/, "");
  return rel === "." ? "" : rel;
}

function listUnder(files: string[], dir: string | undefined): string[] {
  const rel = normalizeRel(dir ?? "");
  if (rel === "") return [...files];
  const prefix = `${rel}/`;
  let lo = 0;
  let hi = files.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (files[mid]! < prefix) lo = mid + 1;
    else hi = mid;
  }
  const out: string[] = [];
  for (let i = lo; i < files.length && files[i]!.startsWith(prefix); i++) out.push(files[i]!);
  return out;
}

function search(
  index: Bm25Index,
  root: string,
  maxFileBytes: number,
  query: string,
  limit: number,
): SearchHit[] {
  const terms = new Map<string, WeightedTerm>();
  const use = (term: WeightedTerm) => {
    const known = terms.get(term.key);
    // A word asked for itself scores as itself, not as another word's expansion.
    if (known === undefined || known.weight < term.weight) terms.set(term.key, term);
  };
  for (const { term, weight, compound } of queryTerms(query)) {
    if (compound) use({ key: Bm25Index.compoundKey(term), weight });
    else index.expand(term, weight).forEach(use);
  }
  if (terms.size === 0 || limit <= 0) return [];
  const weights = new Map([...terms.values()].map((t) => [t.key, t.weight]));
  const scored = index.score([...terms.values()]);
  const paths = index.paths;
  const factors = kindFactors(query);
  for (const s of scored) s.score *= factors[fileKind(paths[s.doc]!)];
  scored.sort((a, b) => b.score - a.score || compare(paths[a.doc]!, paths[b.doc]!));
  return scored.slice(0, limit).map(({ doc, score }) => ({
    path: paths[doc]!,
    score,
    snippet: snippet(index, readTextSync(root, paths[doc]!, { maxBytes: maxFileBytes }), weights),
  }));
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

const lineWords = new TokenBuffer();

/**
 * The numbered lines around the line with the most (idf-weighted) distinct query terms, in
 * `text` read from the working copy now (the index keeps no file contents) through
 * workcopy/fs.ts: a file swapped for a link, a FIFO or anything else since the index was
 * built gives an empty snippet, never the text of what the link points to.
 */
function snippet(index: Bm25Index, text: string | undefined, weights: Map<string, number>): string {
  if (text === undefined) return "";
  const lines = text.split("\n");
  // Words repeat within a file: each distinct one is split and looked up once.
  const keysOfWord = new Map<string, string[]>();
  const queryKeys = (word: string): string[] => {
    let keys = keysOfWord.get(word);
    if (keys === undefined) {
      const parts = wordParts(word);
      keys = [];
      for (const part of parts) {
        const key = Bm25Index.partKey(part);
        if (key !== undefined && weights.has(key)) keys.push(key);
      }
      const compound = compoundKey(parts);
      const key = compound === undefined ? undefined : Bm25Index.compoundKey(compound);
      if (key !== undefined && weights.has(key)) keys.push(key);
      keysOfWord.set(word, keys);
    }
    return keys;
  };
  const idf = new Map([...weights.keys()].map((key) => [key, index.idf(key)]));
  let best = -1;
  let bestScore = 0;
  const seen = new Set<string>();
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.slice(0, 2000);
    const count = scanWords(line, lineWords);
    let score = 0;
    seen.clear();
    for (let w = 0; w < count; w++) {
      for (const key of queryKeys(line.slice(lineWords.start[w], lineWords.end[w]))) {
        if (seen.has(key)) continue;
        seen.add(key);
        score += weights.get(key)! * idf.get(key)!;
      }
    }
    if (score > bestScore) {
      bestScore = score;
      best = i;
    }
  }
  const from = best < 0 ? 0 : Math.max(0, best - SNIPPET_CONTEXT);
  const to = Math.min(lines.length, best < 0 ? 3 : best + SNIPPET_CONTEXT + 1);
  const out: string[] = [];
  for (let i = from; i < to; i++) {
    let line = lines[i]!.replace(/\r$/, "");
    if (line.length > SNIPPET_LINE_CHARS) line = `${line.slice(0, SNIPPET_LINE_CHARS)}…`;
    out.push(`${i + 1}: ${line}`);
  }
  // A file ending in a newline has an empty last "line" that is not worth showing.
  while (out.length > 1 && /^\d+: $/.test(out[out.length - 1]!)) out.pop();
  return out.join("\n");
}
