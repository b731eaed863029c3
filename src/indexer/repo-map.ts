/*
 * A repository map for a prompt: for each of the likely files (best search hits first), the
 * lines that declare something (functions, classes, methods, types), so the model sees
 * where the code it needs is defined before its first tool call. Light per-language
 * patterns over each line, like symbols.ts: a view for a reader, not a symbol table.
 */
import path from "node:path";
import { readTextSync } from "../workcopy/fs.js";

const JS =
  /^\s*(?:export\s+)?(?:default\s+)?(?:declare\s+)?(?:abstract\s+)?(?:async\s+)?(?:function\b|class\s|interface\s|type\s+\w+\s*[=<]|enum\s|namespace\s)|^(?:export\s+)?(?:const|let|var)\s+[\w$]+\s*(?::[^=]+)?=\s*(?:async\s+)?(?:function\b|\([^)]*\)\s*(?::[^=]+)?=>|[\w$]+\s*=>)|^[\w$]+(?:\.[\w$]+)+\s*=\s*(?:async\s+)?function\b|^\s{2,4}(?:(?:public|private|protected|static|async|override|get|set)\s+)*\*?[\w$]+\s*(?:<[^>]*>)?\([^)]*\)\s*(?::\s*[^{]+)?\{\s*$/;
const PYTHON = /^\s*(?:async\s+)?def\s+\w+|^\s*class\s+\w+/;
const GO = /^func\s|^type\s+\w+\s/;
const RUST =
  /^\s*(?:pub(?:\([^)]*\))?\s+)?(?:(?:async|unsafe|const)\s+)*(?:fn|struct|enum|trait|impl|mod|type)\b/;
const JAVA_LIKE =
  /^\s*(?:(?:public|private|protected|internal|static|final|abstract|sealed|open|data|override|suspend|virtual|async)\s+)*(?:class|interface|enum|record|object|fun)\s+\w+|^\s+(?:(?:public|private|protected|internal|static|final|abstract|synchronized|override|virtual|async)\s+)+[\w.<>[\],\s]+?\s+\w+\s*\(/;
const RUBY = /^\s*(?:def|class|module)\s+\S/;
const PHP =
  /^\s*(?:(?:abstract|final|public|private|protected|static)\s+)*(?:function|class|interface|trait)\s+\w+/;

const BY_EXTENSION: Record<string, RegExp> = {};
for (const ext of ["js", "jsx", "mjs", "cjs", "ts", "tsx", "mts", "cts", "vue", "svelte"]) {
  BY_EXTENSION[ext] = JS;
}
for (const ext of ["py", "pyi"]) BY_EXTENSION[ext] = PYTHON;
BY_EXTENSION.go = GO;
BY_EXTENSION.rs = RUST;
for (const ext of ["java", "kt", "kts", "cs", "scala", "swift"]) BY_EXTENSION[ext] = JAVA_LIKE;
BY_EXTENSION.rb = RUBY;
BY_EXTENSION.php = PHP;

const NOT_METHODS = /^\s*(?:if|for|while|switch|catch|with|return|function|else|do)\b/;
const LINE_CHARS = 120;
/** Files larger than this are not read for the map (the index leaves them out anyway). */
const MAX_FILE_BYTES = 1024 * 1024;

/** The declaring lines of a file's text, trimmed on the right and capped in length. */
export function declarations(file: string, text: string): string[] {
  const pattern = BY_EXTENSION[path.extname(file).slice(1).toLowerCase()];
  if (pattern === undefined) return [];
  const out: string[] = [];
  for (const raw of text.split("\n")) {
    if (raw.length > 400 || !pattern.test(raw) || NOT_METHODS.test(raw)) continue;
    let line = raw.replace(/\s*\{?\s*$/, "").replace(/\t/g, "  ");
    if (line.length > LINE_CHARS) line = `${line.slice(0, LINE_CHARS)}…`;
    out.push(line);
  }
  return out;
}

export interface RepoMapOptions {
  /** Total characters of the map at most (paths are always listed). */
  maxChars: number;
  /** Declarations listed per file at most. */
  maxLinesPerFile: number;
}

/**
 * The map of `files` (relative paths under `root`, most relevant first): each path on a line
 * of its own, its declarations indented below, until the character budget is spent; after
 * that, paths only.
 */
export function repoMap(root: string, files: readonly string[], options: RepoMapOptions): string {
  const blocks: string[] = [];
  let budget = options.maxChars;
  for (const file of files) {
    // Through workcopy/fs.ts: a file swapped for a link since it was indexed is skipped.
    const text = readTextSync(root, file, { maxBytes: MAX_FILE_BYTES });
    if (text === undefined) continue;
    const lines = declarations(file, text);
    const shown: string[] = [];
    for (const line of lines.slice(0, options.maxLinesPerFile)) {
      if (budget - line.length - 3 < 0) break;
      budget -= line.length + 3;
      shown.push(`  ${line}`);
    }
    if (lines.length > shown.length && shown.length > 0) {
      shown.push(`  … ${lines.length - shown.length} more`);
    }
    budget -= file.length + 1;
    blocks.push([file, ...shown].join("\n"));
  }
  return blocks.join("\n");
}
