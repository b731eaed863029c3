/*
 * BM25F over three fields of a document (path, symbols, content). The index is the shards as
 * they were built (each with its own term ids and per-term postings runs); a term is found
 * in each by its key, and statistics (df, average lengths) are summed over all of them, so
 * scores are those of one index while nothing is re-sorted after the workers are done.
 *
 * A term key is the term itself for a word ("config") and "#" + its hash for a compound
 * (a whole identifier, see compoundKey), which the index knows by hash only.
 */
import { IntMap } from "./int-map.js";
import { FIELD_COUNT, type FieldPostings, type Shard } from "./shard.js";
import { compoundHash, STOP_WORDS, stem } from "./tokenize.js";

/** Field weight (path boosted most, then symbols) and length normalisation; k1 as usual. */
const WEIGHT = [5, 3, 1];
/**
 * A term found in the file's own path also adds this share of its idf outside the BM25F
 * saturation: a word of the file name is strong evidence however often the content repeats
 * other query words.
 */
const PATH_BONUS = 1;
const B = [0.3, 0.5, 0.75];
const K1 = 1.2;

/** Words a query word may expand to by prefix ("limit" → limiter), and their weight. */
const MAX_EXPANSIONS = 30;
const EXPANSION_WEIGHT = 0.4;
const MIN_PREFIX = 4;

export interface WeightedTerm {
  key: string;
  weight: number;
  /**
   * Terms with the same group (a query word's prefix expansions) are scored as one term:
   * their frequencies summed and saturated once, under the idf of the group as a whole.
   * Scored apart, thirty rare expansions ("valid0" … "validate10") would each add a full
   * rare-term score and lift generated files and fixtures above the source.
   */
  group?: string;
}

export interface ScoredDoc {
  doc: number;
  score: number;
}

interface Segment {
  /** Number of this segment's first document in the whole index. */
  base: number;
  words: Map<string, number>;
  compounds: IntMap;
  df: Int32Array;
  postings: FieldPostings[];
  lengths: Int32Array[];
}

export class Bm25Index {
  readonly paths: string[] = [];
  readonly bytes: number = 0;
  private readonly segments: Segment[] = [];
  private readonly average: number[] = [];
  private sortedWords: string[] | undefined;

  constructor(shards: readonly Shard[]) {
    const totals = new Array<number>(FIELD_COUNT).fill(0);
    for (const shard of shards) {
      const words = new Map<string, number>();
      const compounds = new IntMap();
      const terms = shard.compounds.length;
      let t = 0;
      for (let from = 0; t < terms; t++) {
        let to = shard.words.indexOf("\n", from);
        if (to < 0) to = shard.words.length;
        if (to === from) compounds.set(shard.compounds[t]!, t);
        else words.set(shard.words.slice(from, to), t);
        from = to + 1;
      }
      this.segments.push({
        base: this.paths.length,
        words,
        compounds,
        df: shard.df,
        postings: shard.postings,
        lengths: shard.lengths,
      });
      for (const p of shard.paths) this.paths.push(p);
      this.bytes += shard.bytes;
      for (let f = 0; f < FIELD_COUNT; f++) {
        for (const n of shard.lengths[f]!) totals[f]! += n;
      }
    }
    for (const total of totals) this.average.push(Math.max(total / Math.max(this.docCount, 1), 1));
  }

  get docCount(): number {
    return this.paths.length;
  }

  /** Key of a part as written (as in a snippet's line), or undefined for a stop word. */
  static partKey(part: string): string | undefined {
    const lower = part.toLowerCase();
    return STOP_WORDS.has(lower) ? undefined : stem(lower);
  }

  /** Key of a compound (see compoundKey). */
  static compoundKey(compound: string): string {
    return `#${compoundHash(compound)}`;
  }

  private localId(segment: Segment, key: string): number | undefined {
    return key.charCodeAt(0) === 35
      ? segment.compounds.get(Number(key.slice(1)))
      : segment.words.get(key);
  }

  /** Documents containing the term, over all segments. */
  df(key: string): number {
    let df = 0;
    for (const segment of this.segments) {
      const id = this.localId(segment, key);
      if (id !== undefined) df += segment.df[id]!;
    }
    return df;
  }

  /** Inverse document frequency of a term. */
  idf(key: string): number {
    const df = this.df(key);
    return Math.log(1 + (this.docCount - df + 0.5) / (df + 0.5));
  }

  /** The words a query word matches: itself and, at lower weight, those it is a prefix of. */
  expand(word: string, weight: number): WeightedTerm[] {
    const matches: WeightedTerm[] = [];
    if (this.df(word) > 0) matches.push({ key: word, weight });
    if (word.length < MIN_PREFIX) return matches;
    if (this.sortedWords === undefined) {
      const all = new Set<string>();
      for (const segment of this.segments) for (const w of segment.words.keys()) all.add(w);
      this.sortedWords = [...all].sort();
    }
    const sorted = this.sortedWords;
    let lo = 0;
    let hi = sorted.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (sorted[mid]! < word) lo = mid + 1;
      else hi = mid;
    }
    const candidates: Array<{ key: string; df: number }> = [];
    for (let i = lo; i < sorted.length && sorted[i]!.startsWith(word); i++) {
      if (sorted[i] !== word) candidates.push({ key: sorted[i]!, df: this.df(sorted[i]!) });
    }
    // With many candidates the most widespread are kept: rare ones are usually noise.
    candidates.sort((a, b) => b.df - a.df);
    for (const { key } of candidates.slice(0, MAX_EXPANSIONS)) {
      matches.push({ key, weight: weight * EXPANSION_WEIGHT, group: `${word}*` });
    }
    return matches;
  }

  /** BM25F scores of every document matching any of the weighted terms (see WeightedTerm). */
  score(terms: readonly WeightedTerm[]): ScoredDoc[] {
    const n = this.docCount;
    if (n === 0) return [];
    const scores = new Float64Array(n);
    const pseudo = new Float64Array(n);
    const inPath = new Uint8Array(n);
    const hit = new Uint8Array(n);
    const matched: number[] = [];
    const docs: number[] = [];
    const groups = new Map<string, WeightedTerm[]>();
    for (const term of terms) {
      const key = term.group ?? `=${term.key}`;
      const members = groups.get(key);
      if (members === undefined) groups.set(key, [term]);
      else members.push(term);
    }
    for (const members of groups.values()) {
      // The group's weight is its strongest member's; members count by their share of it.
      const weight = Math.max(...members.map((m) => m.weight));
      let df = 0;
      for (const { key, weight: w } of members) {
        const share = w / weight;
        df += this.df(key);
        for (const segment of this.segments) {
          const id = this.localId(segment, key);
          if (id === undefined) continue;
          for (let f = 0; f < FIELD_COUNT; f++) {
            const { offsets, docs: local, tfs } = segment.postings[f]!;
            const lengths = segment.lengths[f]!;
            const fw = WEIGHT[f]! * share;
            const b = B[f]!;
            const a = this.average[f]!;
            for (let p = offsets[id]!, end = offsets[id + 1]!; p < end; p++) {
              const doc = segment.base + local[p]!;
              if (pseudo[doc] === 0) docs.push(doc);
              pseudo[doc]! += (fw * tfs[p]!) / (1 - b + (b * lengths[local[p]!]!) / a);
              if (f === 0) inPath[doc] = 1;
            }
          }
        }
      }
      // BM25F: field-weighted frequencies are summed first, then saturated once per term.
      df = Math.min(df, n);
      const idf = Math.log(1 + (n - df + 0.5) / (df + 0.5));
      for (const doc of docs) {
        const t = pseudo[doc]!;
        scores[doc]! += (weight * idf * (t * (K1 + 1))) / (K1 + t);
        if (inPath[doc] === 1) scores[doc]! += weight * idf * PATH_BONUS;
        pseudo[doc] = 0;
        inPath[doc] = 0;
        if (hit[doc] === 0) {
          hit[doc] = 1;
          matched.push(doc);
        }
      }
      docs.length = 0;
    }
    return matched.map((doc) => ({ doc, score: scores[doc]! }));
  }
}
