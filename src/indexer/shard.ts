/*
 * Indexing of a share of the files: the hot loop. A ShardBuilder turns files into postings
 * with local term ids; `finish` hands them over as plain arrays that can cross a worker
 * boundary without copying, and bm25.ts searches the shards together as one index.
 *
 * Written here rather than taken from minisearch because indexing must keep up with reading
 * the files, and minisearch turns every token into a string and inserts it into a radix tree:
 *   - content is scanned straight from the file's bytes; each part of a word is hashed as it
 *     is scanned and found in an open-addressing table of the parts seen so far (a few tens
 *     of thousands even in large repositories, so the table stays in cache); a known part
 *     costs no allocation;
 *   - term frequencies are counted in a typed array, and postings are appended as flat
 *     (term, doc, tf) triples.
 */
import {
  FNV_PRIME,
  FNV_SEED,
  hashString,
  MAX_PART,
  MIN_PART,
  PART_CLASS,
  scanParts,
  stem,
  STOP_WORDS,
  TokenBuffer,
} from "./tokenize.js";
import {
  hasGeneratedHeader,
  looksBinary,
  looksBuilt,
  underAmbiguousDir,
  type SkipReason,
} from "./skip.js";
import { IntMap } from "./int-map.js";
import { extractSymbols } from "./symbols.js";

/** Fields, in this order in every per-field array: path, symbol, content. */
export const FIELD_COUNT = 3;
const PATH = 0;
const SYMBOL = 1;
const CONTENT = 2;

/** Postings of one field: term t's documents are docs/tfs[offsets[t] .. offsets[t + 1]). */
export interface FieldPostings {
  offsets: Int32Array;
  docs: Int32Array;
  tfs: Int32Array;
}

/** The postings of a share of the files, with term ids local to it. */
export interface Shard {
  /** Path of each local document. */
  paths: string[];
  /** Local terms joined by "\n": a word term, or "" where the term is a compound. */
  words: string;
  /** Per local term: the hash of a compound's key (see compoundHash), 0 for a word. */
  compounds: Int32Array;
  /** Per local term: documents containing it in any field. */
  df: Int32Array;
  /** Per field (path, symbol, content). */
  postings: FieldPostings[];
  /** Per field: each document's length in tokens. */
  lengths: Int32Array[];
  bytes: number;
  skipped: Partial<Record<SkipReason, number>>;
}

function grow<T extends Int32Array | Uint8Array>(a: T, size: number): T {
  const b = (a instanceof Uint8Array ? new Uint8Array(size) : new Int32Array(size)) as T;
  b.set(a);
  return b;
}

export class ShardBuilder {
  // Parts seen (as written, case kept) → term id, in an open-addressing table of four ints
  // per slot: hash, term id + 2 (0: empty slot; 1: a stop word), start of its bytes in
  // `pool`, length.
  private table = new Int32Array(4 << 14);
  private partCount = 0;
  private pool = new Uint8Array(1 << 16);
  private poolUsed = 0;

  // Local terms.
  private readonly wordIds = new Map<string, number>();
  private readonly compoundIds = new IntMap();
  private readonly words: string[] = [];
  private compounds = new Int32Array(1024);
  private df = new Int32Array(1024);
  private lastDoc = new Int32Array(1024).fill(-1);

  // The document being added.
  private tf = new Int32Array(1024);
  private touched = new Int32Array(1024);
  private touchedCount = 0;
  private fieldLength = 0;
  private readonly parts = new TokenBuffer();

  private readonly postings = [
    new TripleLog(1 << 12),
    new TripleLog(1 << 14),
    new TripleLog(1 << 18),
  ];
  private readonly lengths = [new Int32Array(1024), new Int32Array(1024), new Int32Array(1024)];
  private readonly paths: string[] = [];
  private bytes = 0;
  private readonly skipped: Partial<Record<SkipReason, number>> = {};

  /** Counts a file left out. */
  skip(reason: SkipReason): void {
    this.skipped[reason] = (this.skipped[reason] ?? 0) + 1;
  }

  /** Indexes one file from its bytes, or counts it as skipped (binary, generated). */
  addFile(rel: string, content: Buffer): void {
    if (looksBinary(content)) return this.skip("binary");
    if (hasGeneratedHeader(content)) return this.skip("generated");
    if (underAmbiguousDir(rel) && looksBuilt(content)) return this.skip("generated");
    const doc = this.paths.length;
    this.paths.push(rel);
    this.bytes += content.length;

    let from = 0;
    for (let slash = rel.indexOf("/"); slash >= 0; slash = rel.indexOf("/", from)) {
      this.addName(rel.slice(from, slash));
      from = slash + 1;
    }
    const file = rel.slice(from);
    const dot = file.lastIndexOf(".");
    if (dot > 0) {
      this.addName(file.slice(0, dot));
      this.addName(file.slice(dot + 1));
    } else {
      this.addName(file);
    }
    this.endField(doc, PATH);

    for (const name of extractSymbols(rel, content)) this.addName(name);
    this.endField(doc, SYMBOL);

    this.addContent(content);
    this.endField(doc, CONTENT);
  }

  private newTerm(word: string, compound: number): number {
    const id = this.words.length;
    this.words.push(word);
    if (id === this.tf.length) {
      this.tf = grow(this.tf, id * 2);
      this.touched = grow(this.touched, id * 2);
      this.df = grow(this.df, id * 2);
      this.compounds = grow(this.compounds, id * 2);
      const lastDoc = new Int32Array(id * 2).fill(-1);
      lastDoc.set(this.lastDoc);
      this.lastDoc = lastDoc;
    }
    this.compounds[id] = compound;
    return id;
  }

  private wordId(term: string): number {
    let id = this.wordIds.get(term);
    if (id === undefined) {
      // Short strings are copies; longer slices would keep the whole file's text alive.
      const owned = term.length < 13 ? term : Buffer.from(term, "latin1").toString("latin1");
      id = this.newTerm(owned, 0);
      this.wordIds.set(owned, id);
    }
    return id;
  }

  private compoundId(hash: number): number {
    let id = this.compoundIds.get(hash);
    if (id === undefined) {
      id = this.newTerm("", hash);
      this.compoundIds.set(hash, id);
    }
    return id;
  }

  /**
   * Counts a symbol or path segment in the current field: its parts, and its compound (see
   * compoundKey), hashed as the parts go by rather than built as a string.
   */
  private addName(name: string): void {
    const buf = this.parts;
    const n = scanParts(name, buf);
    let key = FNV_SEED;
    for (let i = 0; i < n; i++) {
      const start = buf.start[i]!;
      const end = buf.end[i]!;
      const id = this.namePartId(name, start, end);
      if (id >= 0) this.count(id);
      if (n === 1) break;
      if (i < n - 1 || id < 0) {
        for (let k = start; k < end; k++) {
          const c = name.charCodeAt(k);
          key = Math.imul(key ^ (c >= 65 && c <= 90 ? c + 32 : c), FNV_PRIME);
        }
      } else {
        const term = this.words[id]!;
        for (let k = 0; k < term.length; k++) key = Math.imul(key ^ term.charCodeAt(k), FNV_PRIME);
      }
    }
    if (n > 1) this.count(this.compoundId(key || 1));
  }

  /** partId for a part of a string (ASCII letters and digits, as scanParts yields). */
  private namePartId(name: string, start: number, end: number): number {
    const h = hashString(name, start, end);
    const len = end - start;
    const table = this.table;
    const pool = this.pool;
    const mask = (table.length >> 2) - 1;
    for (let slot = h & mask; ; slot = (slot + 1) & mask) {
      const at = slot << 2;
      const entry = table[at + 1]!;
      if (entry === 0) {
        return this.addPart(at, h, Buffer.from(name.slice(start, end), "latin1"), 0, len);
      }
      if (table[at] === h && table[at + 3] === len) {
        const from = table[at + 2]!;
        let k = 0;
        while (k < len && pool[from + k] === name.charCodeAt(start + k)) k++;
        if (k === len) return entry - 2;
      }
    }
  }

  /** Records the part bytes[start, start + len) in the empty slot at `at`; returns its term. */
  private addPart(at: number, h: number, bytes: Buffer, start: number, len: number): number {
    const lower = bytes.toString("latin1", start, start + len).toLowerCase();
    const id = STOP_WORDS.has(lower) ? -1 : this.wordId(stem(lower));
    if (this.poolUsed + len > this.pool.length) this.pool = grow(this.pool, this.pool.length * 2);
    this.pool.set(bytes.subarray(start, start + len), this.poolUsed);
    const table = this.table;
    table[at] = h;
    table[at + 1] = id + 2;
    table[at + 2] = this.poolUsed;
    table[at + 3] = len;
    this.poolUsed += len;
    // Kept at most half full so probes stay short.
    if (++this.partCount * 8 > table.length) this.rehash();
    return id;
  }

  private rehash(): void {
    const old = this.table;
    const table = new Int32Array(old.length * 2);
    const mask = (table.length >> 2) - 1;
    for (let at = 0; at < old.length; at += 4) {
      if (old[at + 1] === 0) continue;
      let slot = old[at]! & mask;
      while (table[(slot << 2) + 1] !== 0) slot = (slot + 1) & mask;
      table.set(old.subarray(at, at + 4), slot << 2);
    }
    this.table = table;
  }

  /**
   * Counts every part of every word of `bytes` in the current field. The scan follows
   * scanParts (same classes, same splits) and hashes each part as it goes, so a part seen
   * before is found in the table without a string being made.
   */
  private addContent(b: Buffer): void {
    const n = b.length;
    let i = 0;
    for (;;) {
      // Skip to the next letter or digit.
      let c = 0;
      let cls = 0;
      while (i < n) {
        c = b[i]!;
        cls = PART_CLASS[c]!;
        if (cls !== 0) break;
        i++;
      }
      if (i >= n) return;
      // A run of letters and digits: cut into parts at case changes, each hashed as it goes.
      let start = i;
      let prev = cls;
      let before = FNV_SEED; // hash of the part without its last byte, for "HTTPServer"
      let h = Math.imul(FNV_SEED ^ c, FNV_PRIME);
      for (i++; i < n; i++) {
        c = b[i]!;
        cls = PART_CLASS[c]!;
        if (cls === 0) break;
        if (cls === 2) {
          if (prev !== 2) {
            this.contentPart(b, start, i, h);
            start = i;
            h = FNV_SEED;
          }
        } else if (cls === 1 && prev === 2 && i - start > 1) {
          this.contentPart(b, start, i - 1, before);
          start = i - 1;
          h = Math.imul(FNV_SEED ^ b[i - 1]!, FNV_PRIME);
        }
        before = h;
        h = Math.imul(h ^ c, FNV_PRIME);
        prev = cls;
      }
      this.contentPart(b, start, i, h);
    }
  }

  private contentPart(b: Buffer, start: number, end: number, h: number): void {
    const len = end - start;
    // Parts starting with a digit are numbers ("404", "0x1f"): not worth a posting.
    if (len < MIN_PART || len > MAX_PART || PART_CLASS[b[start]!] === 3) return;
    const id = this.partId(b, start, len, h);
    if (id >= 0) this.count(id);
  }

  /** Term id of the part bytes[start, start + len) with hash h; -1 for a stop word. */
  private partId(bytes: Buffer, start: number, len: number, h: number): number {
    const table = this.table;
    const pool = this.pool;
    const mask = (table.length >> 2) - 1;
    for (let slot = h & mask; ; slot = (slot + 1) & mask) {
      const at = slot << 2;
      const entry = table[at + 1]!;
      if (entry === 0) return this.addPart(at, h, bytes, start, len);
      if (table[at] === h && table[at + 3] === len) {
        const from = table[at + 2]!;
        let k = 0;
        while (k < len && pool[from + k] === bytes[start + k]) k++;
        if (k === len) return entry - 2;
      }
    }
  }

  private count(id: number): void {
    const tf = this.tf[id]!;
    this.tf[id] = tf + 1;
    if (tf === 0) this.touched[this.touchedCount++] = id;
    this.fieldLength++;
  }

  /** Closes field `f` of document `doc`: its counted terms become postings. */
  private endField(doc: number, f: number): void {
    const log = this.postings[f]!;
    const raw = log.reserve(this.touchedCount);
    let at = log.used;
    const tf = this.tf;
    const touched = this.touched;
    const lastDoc = this.lastDoc;
    const df = this.df;
    for (let i = 0; i < this.touchedCount; i++) {
      const id = touched[i]!;
      raw[at++] = id;
      raw[at++] = doc;
      raw[at++] = tf[id]!;
      tf[id] = 0;
      if (lastDoc[id] !== doc) {
        lastDoc[id] = doc;
        df[id] = df[id]! + 1;
      }
    }
    log.used = at;
    this.touchedCount = 0;
    let lengths = this.lengths[f]!;
    if (doc >= lengths.length) {
      lengths = grow(lengths, Math.max(lengths.length * 2, doc + 1));
      this.lengths[f] = lengths;
    }
    lengths[doc] = this.fieldLength;
    this.fieldLength = 0;
  }

  /**
   * The finished shard, postings sorted into per-term runs (counting sort: triples were
   * appended in document order, so each run comes out in document order). Its typed arrays
   * are its own, so they can be transferred.
   */
  finish(): Shard {
    const terms = this.words.length;
    const docCount = this.paths.length;
    const postings = this.postings.map((log): FieldPostings => {
      const chunks = log.chunks();
      const offsets = new Int32Array(terms + 1);
      let total = 0;
      for (const { data, used } of chunks) {
        for (let i = 0; i < used; i += 3) offsets[data[i]! + 1]!++;
        total += used / 3;
      }
      for (let t = 0; t < terms; t++) offsets[t + 1]! += offsets[t]!;
      const cursor = offsets.slice(0, terms);
      const docs = new Int32Array(total);
      const tfs = new Int32Array(total);
      for (const { data, used } of chunks) {
        for (let i = 0; i < used; i += 3) {
          const p = cursor[data[i]!]!++;
          docs[p] = data[i + 1]!;
          tfs[p] = data[i + 2]!;
        }
      }
      return { offsets, docs, tfs };
    });
    return {
      paths: this.paths,
      words: this.words.join("\n"),
      compounds: this.compounds.slice(0, terms),
      df: this.df.slice(0, terms),
      postings,
      lengths: this.lengths.map((l) => l.slice(0, docCount)),
      bytes: this.bytes,
      skipped: this.skipped,
    };
  }
}

/** (term, doc, tf) triples appended in chunks, so that growing never copies. */
class TripleLog {
  private readonly full: Array<{ data: Int32Array; used: number }> = [];
  private data: Int32Array;
  used = 0;

  constructor(private readonly triples: number) {
    this.data = new Int32Array(triples * 3);
  }

  /** The chunk to append `count` more triples to, from index `used`. */
  reserve(count: number): Int32Array {
    if (this.used + count * 3 > this.data.length) {
      this.full.push({ data: this.data, used: this.used });
      this.data = new Int32Array(Math.max(this.triples, count) * 3);
      this.used = 0;
    }
    return this.data;
  }

  chunks(): Array<{ data: Int32Array; used: number }> {
    return [...this.full, { data: this.data, used: this.used }];
  }
}

/** The typed arrays of a shard, for postMessage's transfer list. */
export function shardBuffers(shard: Shard): ArrayBuffer[] {
  const arrays = [shard.compounds, shard.df, ...shard.lengths];
  for (const p of shard.postings) arrays.push(p.offsets, p.docs, p.tfs);
  return arrays.map((a) => a.buffer as ArrayBuffer);
}
