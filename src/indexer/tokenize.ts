/*
 * Tokenization shared by the index and its queries. Text is cut into words (runs of ASCII
 * letters, digits and "_"); a word is split into parts at underscores and camelCase
 * boundaries, parts are lower-cased, stop words dropped and lightly stemmed, so
 * "RateLimiter", "rate_limiter" and "rate limiters" meet on the same terms. A word of several
 * parts is also indexed whole, under its compound key ("parseConfig" → parseconfig).
 */

/** Parts shorter or longer than this are not indexed (single letters, blobs). */
export const MIN_PART = 2;
export const MAX_PART = 48;
/** Longer words (base64, hashes, minified runs) are not indexed at all. */
export const MAX_WORD = 96;

/** Common English words (and query filler) that carry no meaning for code search. */
export const STOP_WORDS: ReadonlySet<string> = new Set(
  (
    "a about above after again against all am an and any are as at be because been before " +
    "being below between both but by can could did do does doing down during each few for " +
    "from further had has have having he her here hers him his how i if in into is it its " +
    "itself just me more most my no nor not now of off on once only or other our ours out " +
    "over own same she should so some such than that the their theirs them then there these " +
    "they this those through to too under until up very was we were what whats when where " +
    "which while who whom why will with would you your yours find locate located please show " +
    "tell"
  ).split(" "),
);

/**
 * Classes of bytes and of UTF-16 code units below 256: 0 separator, 1 lower-case letter,
 * 2 upper-case letter, 3 digit, 4 underscore (inside a word, between parts). Everything else,
 * including the bytes of multi-byte UTF-8 characters, separates words, the same way in text
 * and in raw bytes.
 */
export const CLASS = new Uint8Array(256);
for (let c = 97; c <= 122; c++) CLASS[c] = 1;
for (let c = 65; c <= 90; c++) CLASS[c] = 2;
for (let c = 48; c <= 57; c++) CLASS[c] = 3;
CLASS[95] = 4;

/** CLASS with "_" as a separator: the classes that matter for splitting words into parts. */
export const PART_CLASS = CLASS.map((c) => (c === 4 ? 0 : c));

export const FNV_SEED = 0x811c9dc5 | 0;
export const FNV_PRIME = 0x01000193;

/** FNV-1a of UTF-16 code units; equal to the hash of the same ASCII bytes. */
export function hashString(text: string, start = 0, end = text.length): number {
  let h = FNV_SEED;
  for (let k = start; k < end; k++) h = Math.imul(h ^ text.charCodeAt(k), FNV_PRIME);
  return h;
}

/** Reusable buffer of token boundaries, so scanning allocates nothing per token. */
export class TokenBuffer {
  start = new Int32Array(1024);
  end = new Int32Array(1024);

  push(count: number, start: number, end: number): void {
    if (count === this.start.length) {
      const starts = new Int32Array(count * 2);
      const ends = new Int32Array(count * 2);
      starts.set(this.start);
      ends.set(this.end);
      this.start = starts;
      this.end = ends;
    }
    this.start[count] = start;
    this.end[count] = end;
  }
}

/** Finds the words of `text` (not longer than MAX_WORD); returns how many were written. */
export function scanWords(text: string, buf: TokenBuffer): number {
  let count = 0;
  let start = -1;
  for (let i = 0; i <= text.length; i++) {
    const c = i < text.length ? text.charCodeAt(i) : 0;
    if (c < 256 && CLASS[c] !== 0) {
      if (start < 0) start = i;
    } else if (start >= 0) {
      if (i - start <= MAX_WORD) buf.push(count++, start, i);
      start = -1;
    }
  }
  return count;
}

/**
 * Finds the parts of a word: split at underscores, before an upper-case letter that follows a
 * lower-case letter or a digit ("parseConfig", "utf8Decode") and before the last capital of a
 * capital run ("HTTPServer" → HTTP, Server). Parts too short, too long or starting with a
 * digit ("404", "0x1f") are left out. Returns how many were written.
 */
export function scanParts(word: string, buf: TokenBuffer): number {
  let count = 0;
  let start = -1;
  let prev = 0;
  for (let i = 0; i <= word.length; i++) {
    const c = i < word.length ? word.charCodeAt(i) : 0;
    let cls = c < 256 ? CLASS[c]! : 0;
    if (cls === 4) cls = 0;
    let cut = -1;
    if (cls === 0) {
      if (start >= 0) cut = i;
    } else if (start < 0) {
      start = i;
    } else if (cls === 2 && prev !== 2) {
      cut = i;
    } else if (cls === 1 && prev === 2 && i - start > 1) {
      cut = i - 1;
    }
    if (cut >= 0) {
      const len = cut - start;
      if (len >= MIN_PART && len <= MAX_PART && CLASS[word.charCodeAt(start)] !== 3) {
        buf.push(count++, start, cut);
      }
      start = cls === 0 ? -1 : cut;
    }
    prev = cls;
  }
  return count;
}

const shared = new TokenBuffer();

/** The parts of one word or identifier, as written. */
export function wordParts(word: string): string[] {
  const count = scanParts(word, shared);
  const parts: string[] = [];
  for (let i = 0; i < count; i++) parts.push(word.slice(shared.start[i], shared.end[i]));
  return parts;
}

function hasVowel(word: string, end: number): boolean {
  for (let i = 0; i < end; i++) {
    const c = word.charCodeAt(i);
    // a e i o u y
    if (c === 97 || c === 101 || c === 105 || c === 111 || c === 117 || c === 121) return true;
  }
  return false;
}

/**
 * A deliberately small suffix stripper (plurals, -ed, -ing, -ation, -ate, final e): enough for
 * "configured"/"configuration"/"configure" to meet, predictable enough to reason about.
 */
export function stem(word: string): string {
  let w = word;
  let n = w.length;
  if (n <= 3) return w;
  if (w.endsWith("ies") && n > 4) w = `${w.slice(0, -3)}y`;
  else if (w.endsWith("sses")) w = w.slice(0, -2);
  else if (w.endsWith("ing") && n > 5 && hasVowel(w, n - 3)) w = w.slice(0, -3);
  else if (w.endsWith("ed") && n > 4 && hasVowel(w, n - 2)) w = w.slice(0, -2);
  else if (w.endsWith("s") && !w.endsWith("ss") && !w.endsWith("us") && !w.endsWith("is")) {
    w = w.slice(0, -1);
  }
  n = w.length;
  if (w.endsWith("ation") && n > 7) w = w.slice(0, -5);
  else if (w.endsWith("ate") && n > 6) w = w.slice(0, -3);
  else if (w.endsWith("e") && n > 4) w = w.slice(0, -1);
  return w;
}

/** Lower-cased, stemmed term of one part, or undefined for a stop word. */
export function termOf(part: string): string | undefined {
  const lower = part.toLowerCase();
  if (STOP_WORDS.has(lower)) return undefined;
  return stem(lower);
}

/**
 * The key under which a word of several parts is indexed whole: its parts lower-cased and
 * joined, the last one stemmed (so "rateLimiters" meets "RateLimiter"); undefined for fewer
 * than two parts.
 */
export function compoundKey(parts: readonly string[]): string | undefined {
  if (parts.length < 2) return undefined;
  let key = "";
  for (let i = 0; i < parts.length - 1; i++) key += parts[i]!.toLowerCase();
  const last = parts[parts.length - 1]!;
  return key + (termOf(last) ?? last.toLowerCase());
}

/** The hash under which a compound key is stored (never 0, which marks a plain word). */
export function compoundHash(key: string): number {
  return hashString(key) || 1;
}

/**
 * Words of a request that say what kind of change it is, not where: "Fix the bug in …",
 * "closes #12". Left out of queries only (a file may well define `fix` or `Issue`); they
 * matched changelog tooling and issue templates first (bench/localisation.ts).
 */
const QUERY_FILLER: ReadonlySet<string> = new Set(
  "fix fixes fixed fixing bug bugs bugfix issue issues close closes closed resolve resolves".split(
    " ",
  ),
);

/** A term of a query with its weight; a compound is looked up as a whole word. */
export interface QueryTerm {
  term: string;
  weight: number;
  compound: boolean;
}

/**
 * Terms of a natural-language or identifier query: the parts of each word, each word of
 * several parts as a compound ("parseConfig" → parseconfig), and neighbouring words as a
 * compound at half weight ("rate limiter" → ratelimiter), to meet names written as one word.
 */
export function queryTerms(query: string): QueryTerm[] {
  const byKey = new Map<string, QueryTerm>();
  const add = (term: string, weight: number, compound: boolean) => {
    const key = `${compound ? "+" : "-"}${term}`;
    const known = byKey.get(key);
    if (known === undefined || known.weight < weight) byKey.set(key, { term, weight, compound });
  };
  let previous: string[] = [];
  for (const word of query.split(/[^A-Za-z0-9_]+/)) {
    if (QUERY_FILLER.has(word.toLowerCase())) {
      previous = [];
      continue;
    }
    const parts = wordParts(word);
    const terms = parts.map(termOf).filter((t) => t !== undefined);
    if (terms.length === 0) {
      previous = [];
      continue;
    }
    for (const term of terms) add(term, 1, false);
    const whole = compoundKey(parts);
    if (whole !== undefined) add(whole, 1, true);
    const pair = previous.length > 0 ? compoundKey([...previous, ...parts]) : undefined;
    if (pair !== undefined) add(pair, 0.5, true);
    previous = parts;
  }
  return [...byKey.values()];
}
