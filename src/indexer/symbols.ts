/*
 * Names a file defines, found line by line with light patterns per language: a scanner over
 * the bytes for JavaScript and TypeScript (most of what this service sees, and the hot path:
 * no decoding, no regex), regexes over the decoded text for the others. They miss things a
 * parser would find; they are a ranking signal, not a symbol table.
 */

const PYTHON = [
  /^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+([A-Za-z_]\w*)/gm,
  // Module-level assignments: constants and module state.
  /^([A-Za-z_]\w*)[ \t]*(?::[^=\n]*)?=(?!=)/gm,
];

const GO = [
  /^func[ \t]*(?:\([^)\n]*\)[ \t]*)?([A-Za-z_]\w*)/gm,
  /^[ \t]*type[ \t]+([A-Za-z_]\w*)/gm,
  /^(?:const|var)[ \t]+([A-Za-z_]\w*)/gm,
];

const RUST = [
  /^[ \t]*(?:pub(?:\([^)\n]*\))?[ \t]+)?(?:(?:async|unsafe|const|extern[ \t]+"[^"\n]*")[ \t]+)*(?:fn|struct|enum|trait|type|mod|const|static|union)[ \t]+([A-Za-z_]\w*)/gm,
  /^[ \t]*macro_rules![ \t]*([A-Za-z_]\w*)/gm,
];

const JAVA = [
  /^[ \t]*(?:(?:public|private|protected|static|final|abstract|sealed|non-sealed|strictfp)[ \t]+)*(?:class|interface|enum|record|@interface)[ \t]+([A-Za-z_]\w*)/gm,
  /^[ \t]+(?:(?:public|private|protected|static|final|abstract|synchronized|native|default)[ \t]+)+(?:<[^>\n]*>[ \t]+)?[\w.$]+(?:<[^(\n]*?>)?(?:\[\])*[ \t]+([A-Za-z_]\w*)[ \t]*\(/gm,
];

const KOTLIN = [
  /^[ \t]*(?:(?:public|private|protected|internal|open|abstract|data|sealed|enum|inline|override|suspend|const)[ \t]+)*(?:fun|class|interface|object|val|var|typealias)[ \t]+(?:<[^>\n]*>[ \t]*)?(?:[\w.]+\.)?([A-Za-z_]\w*)/gm,
];

const BY_EXTENSION: Record<string, RegExp[]> = {
  py: PYTHON,
  pyi: PYTHON,
  go: GO,
  rs: RUST,
  java: JAVA,
  kt: KOTLIN,
  kts: KOTLIN,
};

const JS_EXTENSIONS: ReadonlySet<string> = new Set([
  "js",
  "jsx",
  "mjs",
  "cjs",
  "ts",
  "tsx",
  "mts",
  "cts",
  "vue",
  "svelte",
]);

// Control-flow keywords the method pattern picks up from `if (…) {` and the like.
const NOT_NAMES: ReadonlySet<string> = new Set([
  "if",
  "for",
  "while",
  "switch",
  "catch",
  "with",
  "function",
  "return",
  "else",
  "do",
  "enum",
  "constructor",
]);

/** Names defined in a file, by the rules of its extension (none for other files). */
export function extractSymbols(path: string, content: Buffer): string[] {
  const dot = path.lastIndexOf(".");
  const ext = dot >= 0 ? path.slice(dot + 1) : "";
  if (JS_EXTENSIONS.has(ext)) return jsSymbols(content);
  const rules = BY_EXTENSION[ext];
  if (rules === undefined) return [];
  // Latin-1 decodes fastest; the patterns look at ASCII only.
  const text = content.toString("latin1");
  const names: string[] = [];
  for (const rule of rules) {
    rule.lastIndex = 0;
    for (let m = rule.exec(text); m !== null; m = rule.exec(text)) {
      const name = m[1];
      if (name !== undefined && !NOT_NAMES.has(name)) names.push(name);
    }
  }
  return names;
}

const SPACE = 32;
const TAB = 9;
const NEWLINE = 10;

function bytesOf(words: string[]): Uint8Array[] {
  return words.map((w) => Buffer.from(w, "latin1"));
}

const DECLARATION_MODIFIERS = bytesOf(["export", "default", "declare", "abstract", "async"]);
const DECLARATIONS = bytesOf(["function", "class", "interface", "type", "enum", "namespace"]);
const VARIABLES = bytesOf(["const", "let", "var"]);
const METHOD_MODIFIERS = bytesOf([
  "public",
  "private",
  "protected",
  "static",
  "async",
  "override",
  "readonly",
  "get",
  "set",
]);

// Identifier bytes: 1 may start an identifier (letters, _, $), 2 may continue one (digits).
const IDENT = new Uint8Array(256);
for (let c = 0; c < 128; c++) {
  const ch = String.fromCharCode(c);
  if (/[A-Za-z_$]/.test(ch)) IDENT[c] = 1;
  else if (/[0-9]/.test(ch)) IDENT[c] = 2;
}

const KEYWORD_START = new Uint8Array(256);
for (const word of [...DECLARATION_MODIFIERS, ...DECLARATIONS, ...VARIABLES]) {
  KEYWORD_START[word[0]!] = 1;
}

function endsWithBrace(b: Buffer, first: number, end: number): boolean {
  let last = end - 1;
  while (last > first && (b[last] === SPACE || b[last] === TAB)) last--;
  return b[last] === 123;
}

function skipBlanks(b: Buffer, i: number, end: number): number {
  while (i < end && (b[i] === SPACE || b[i] === TAB)) i++;
  return i;
}

/** Index after `word` at b[i] when it is there as a whole word, else -1. */
function matchWord(b: Buffer, i: number, end: number, word: Uint8Array): number {
  const after = i + word.length;
  if (after > end) return -1;
  for (let k = 0; k < word.length; k++) if (b[i + k] !== word[k]) return -1;
  return after < end && IDENT[b[after]!] !== 0 ? -1 : after;
}

/** Words by their first byte, so a line is compared only with the words it could start. */
function byFirstByte(words: Uint8Array[]): Uint8Array[][] {
  const table: Uint8Array[][] = Array.from({ length: 256 }, () => []);
  for (const word of words) table[word[0]!]!.push(word);
  return table;
}

const MODIFIERS_BY_FIRST = byFirstByte(DECLARATION_MODIFIERS);
const DECLARATIONS_BY_FIRST = byFirstByte(DECLARATIONS);
const VARIABLES_BY_FIRST = byFirstByte(VARIABLES);
const METHOD_MODIFIERS_BY_FIRST = byFirstByte(METHOD_MODIFIERS);

/** Index after the one of `words` at b[i] that is followed by blanks, else -1. */
function matchKeyword(b: Buffer, i: number, end: number, words: Uint8Array[][]): number {
  if (i >= end) return -1;
  for (const word of words[b[i]!]!) {
    const after = matchWord(b, i, end, word);
    if (after >= 0 && after < end && (b[after] === SPACE || b[after] === TAB)) {
      return skipBlanks(b, after, end);
    }
  }
  return -1;
}

function identifierEnd(b: Buffer, i: number, end: number): number {
  if (i >= end || IDENT[b[i]!] !== 1) return -1;
  let j = i + 1;
  while (j < end && IDENT[b[j]!] !== 0) j++;
  return j;
}

/**
 * JavaScript/TypeScript declarations, one line at a time: functions, classes, interfaces,
 * types, enums and namespaces at any depth (with export/default/declare/abstract/async),
 * variables at the top level only (locals are not what a file defines), and class methods
 * written as an indented `name(args) {` line (with modifiers, type parameters, return type).
 */
function jsSymbols(b: Buffer): string[] {
  const names: string[] = [];
  const add = (start: number, end: number) => {
    const name = b.toString("latin1", start, end);
    if (!NOT_NAMES.has(name)) names.push(name);
  };
  for (let lineStart = 0; lineStart < b.length;) {
    let lineEnd = b.indexOf(NEWLINE, lineStart);
    if (lineEnd < 0) lineEnd = b.length;
    const next = lineEnd + 1;
    if (lineEnd > lineStart && b[lineEnd - 1] === 13) lineEnd--;
    const first = skipBlanks(b, lineStart, lineEnd);
    const indented = first > lineStart;
    // Most lines can be neither: no keyword starts with their first letter, and they do not
    // end with "{" as a method's first line does.
    if (KEYWORD_START[b[first]!] === 0 && (!indented || !endsWithBrace(b, first, lineEnd))) {
      lineStart = next;
      continue;
    }

    let i = first;
    for (let after = matchKeyword(b, i, lineEnd, MODIFIERS_BY_FIRST); after >= 0;) {
      i = after;
      after = matchKeyword(b, i, lineEnd, MODIFIERS_BY_FIRST);
    }
    let nameAt = -1;
    const fn = matchWord(b, i, lineEnd, DECLARATIONS[0]!);
    if (fn >= 0) {
      // "function name", "function* name", "function *name"
      let j = skipBlanks(b, fn, lineEnd);
      if (b[j] === 42) j = skipBlanks(b, j + 1, lineEnd);
      if (j > fn || b[fn] === 42) nameAt = j;
    } else {
      nameAt = matchKeyword(b, i, lineEnd, DECLARATIONS_BY_FIRST);
      if (nameAt < 0 && !indented) nameAt = matchKeyword(b, i, lineEnd, VARIABLES_BY_FIRST);
    }
    const nameEnd = nameAt >= 0 ? identifierEnd(b, nameAt, lineEnd) : -1;
    if (nameEnd >= 0) {
      add(nameAt, nameEnd);
    } else if (indented && endsWithBrace(b, first, lineEnd)) {
      const method = jsMethodName(b, first, lineEnd);
      if (method >= 0) add(method, identifierEnd(b, method, lineEnd));
    }
    lineStart = next;
  }
  return names;
}

/** Start of the method name when b[i, end) reads `name(args) {` (see jsSymbols), else -1. */
function jsMethodName(b: Buffer, i: number, end: number): number {
  let last = end - 1;
  while (last > i && (b[last] === SPACE || b[last] === TAB)) last--;
  if (b[last] !== 123) return -1;
  for (let after = matchKeyword(b, i, end, METHOD_MODIFIERS_BY_FIRST); after >= 0;) {
    i = after;
    after = matchKeyword(b, i, end, METHOD_MODIFIERS_BY_FIRST);
  }
  if (b[i] === 42) i++;
  const name = i;
  let j = identifierEnd(b, i, end);
  if (j < 0) return -1;
  j = skipBlanks(b, j, end);
  if (b[j] === 60) {
    const close = b.indexOf(62, j);
    if (close < 0 || close >= end) return -1;
    j = close + 1;
  }
  if (b[j] !== 40) return -1;
  const paren = b.indexOf(41, j);
  if (paren < 0 || paren >= end) return -1;
  j = skipBlanks(b, paren + 1, end);
  if (b[j] === 58) {
    // A return type runs up to the first "{", which must be the one ending the line.
    const brace = b.indexOf(123, j);
    return brace === last ? name : -1;
  }
  return j === last ? name : -1;
}
