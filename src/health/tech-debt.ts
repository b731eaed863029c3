/*
 * Tech debt: debt markers in comments, very long files and functions, duplicated blocks.
 * Every figure is a count over the repository's own code (vendored and generated code
 * excluded), so the metric is always measured; the thresholds are documented in
 * docs/api.md ("Health reports and analytics").
 */
import { findDuplication } from "./duplication.js";
import { codeFiles, type RepoFiles, type ScanFile } from "./files.js";
import { clampScore, type MetricResult } from "./types.js";

export const MARKER_KINDS = ["TODO", "FIXME", "HACK", "XXX"] as const;
/** A source file longer than this many lines is "very long". */
export const LONG_FILE_LINES = 500;
/** A function longer than this many lines is "very long". */
export const LONG_FUNCTION_LINES = 80;
const LIST_LIMIT = 20;

const MARKER = /\b(TODO|FIXME|HACK|XXX)\b/g;
const COMMENT_START = /(\/\/|#|\/\*|<!--|--\s)/;

/** True when the text before a marker on its line opens or continues a comment. */
function inComment(before: string): boolean {
  const trimmed = before.trimStart();
  return trimmed.startsWith("*") || COMMENT_START.test(before);
}

export interface FunctionSpan {
  name: string;
  /** 1-based line of the declaration. */
  line: number;
  lines: number;
}

/** A line without string literals and comments, for counting braces. */
function stripLine(line: string, state: { inBlock: boolean }): string {
  let out = "";
  let i = 0;
  while (i < line.length) {
    if (state.inBlock) {
      const end = line.indexOf("*/", i);
      if (end < 0) return out;
      state.inBlock = false;
      i = end + 2;
      continue;
    }
    const c = line[i]!;
    const next = line[i + 1];
    if (c === "/" && next === "/") return out;
    if (c === "/" && next === "*") {
      state.inBlock = true;
      i += 2;
      continue;
    }
    if (c === '"' || c === "'" || c === "`") {
      let j = i + 1;
      while (j < line.length && line[j] !== c) j += line[j] === "\\" ? 2 : 1;
      i = j + 1;
      continue;
    }
    out += c;
    i++;
  }
  return out;
}

/** The last line (0-based) of a brace-delimited body starting at or after `start`, or -1. */
function braceBodyEnd(lines: string[], start: number): number {
  const state = { inBlock: false };
  let depth = 0;
  let opened = false;
  for (let i = start; i < lines.length; i++) {
    const code = stripLine(lines[i]!, state);
    for (const c of code) {
      if (c === "{") {
        depth++;
        opened = true;
      } else if (c === "}") {
        depth--;
        if (opened && depth === 0) return i;
      }
    }
    // An arrow function with an expression body, or a declaration without a body.
    if (!opened && (i - start >= 3 || /;\s*$/.test(code))) return -1;
  }
  return -1;
}

const JS_FUNCTION = [
  /^\s*(?:export\s+)?(?:default\s+)?(?:async\s+)?function\s*\*?\s*([A-Za-z_$][\w$]*)?\s*[<(]/,
  /^\s*(?:export\s+)?(?:const|let|var)\s+([A-Za-z_$][\w$]*)\s*(?::[^=]+)?=\s*(?:async\s+)?(?:function\b|\([^)]*\)\s*(?::\s*[^=]+)?=>|[A-Za-z_$][\w$]*\s*=>)/,
  /^\s*(?:(?:public|private|protected|static|async|override|readonly|get|set)\s+)*([A-Za-z_$][\w$]*)\s*\([^;]*\)\s*(?::\s*[^{;=]+)?\{\s*$/,
];
const NOT_A_METHOD = new Set([
  "if",
  "for",
  "while",
  "switch",
  "catch",
  "function",
  "return",
  "with",
]);
const GO_FUNCTION = /^func\s+(?:\([^)]*\)\s*)?([A-Za-z_]\w*)/;
const PY_FUNCTION = /^(\s*)(?:async\s+)?def\s+([A-Za-z_]\w*)/;

/** Functions of a file with their length in lines (a heuristic per language, see docs). */
export function findFunctions(file: Pick<ScanFile, "language" | "lines">): FunctionSpan[] {
  const { lines } = file;
  const found: FunctionSpan[] = [];
  if (file.language === "python") {
    for (let i = 0; i < lines.length; i++) {
      const match = PY_FUNCTION.exec(lines[i]!);
      if (!match) continue;
      const indent = match[1]!.length;
      let last = i;
      for (let j = i + 1; j < lines.length; j++) {
        const line = lines[j]!;
        if (line.trim() === "") continue;
        const lineIndent = line.length - line.trimStart().length;
        if (lineIndent <= indent) break;
        last = j;
      }
      found.push({ name: match[2]!, line: i + 1, lines: last - i + 1 });
    }
    return found;
  }
  if (file.language === "go") {
    for (let i = 0; i < lines.length; i++) {
      const match = GO_FUNCTION.exec(lines[i]!);
      if (!match) continue;
      const end = braceBodyEnd(lines, i);
      if (end >= 0) found.push({ name: match[1]!, line: i + 1, lines: end - i + 1 });
    }
    return found;
  }
  if (file.language === "javascript" || file.language === "typescript") {
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i]!;
      let name: string | undefined;
      for (const pattern of JS_FUNCTION) {
        const match = pattern.exec(line);
        if (!match) continue;
        const candidate = match[1] ?? "(anonymous)";
        if (NOT_A_METHOD.has(candidate)) continue;
        name = candidate;
        break;
      }
      if (name === undefined) continue;
      const end = braceBodyEnd(lines, i);
      if (end >= 0) found.push({ name, line: i + 1, lines: end - i + 1 });
    }
  }
  return found;
}

/** The tech-debt metric of a repository's files. */
export async function measureTechDebt(repo: RepoFiles): Promise<MetricResult> {
  const code = codeFiles(repo);
  if (code.length === 0)
    return {
      score: null,
      summary: "No source code found; tech debt not scored.",
      details: { reason: "no source files in a known language", files_scanned: 0 },
      measured: true,
    };
  const sources = code.filter((f) => !f.test);
  const codeLines = code.reduce((sum, f) => sum + f.codeLines, 0);

  const byKind: Record<string, number> = Object.fromEntries(MARKER_KINDS.map((k) => [k, 0]));
  const markerList: Array<{ path: string; line: number; kind: string }> = [];
  let markers = 0;
  for (const file of code) {
    file.lines.forEach((line, i) => {
      for (const match of line.matchAll(MARKER)) {
        if (!inComment(line.slice(0, match.index))) continue;
        markers++;
        byKind[match[1]!] = (byKind[match[1]!] ?? 0) + 1;
        if (markerList.length < 50)
          markerList.push({ path: file.path, line: i + 1, kind: match[1]! });
      }
    });
  }
  const perKloc = codeLines > 0 ? (markers * 1000) / codeLines : 0;

  const longFiles = sources
    .filter((f) => f.lines.length > LONG_FILE_LINES)
    .map((f) => ({ path: f.path, lines: f.lines.length }));
  let functionCount = 0;
  const longFunctions: Array<{ path: string; line: number; name: string; lines: number }> = [];
  for (const file of sources) {
    for (const fn of findFunctions(file)) {
      functionCount++;
      if (fn.lines > LONG_FUNCTION_LINES) longFunctions.push({ path: file.path, ...fn });
    }
  }
  const duplication = await findDuplication(sources);
  const duplicationPercent = duplication.percent;

  const penalties = {
    markers: Math.min(30, 2 * perKloc),
    long_files: Math.min(20, sources.length > 0 ? (50 * longFiles.length) / sources.length : 0),
    long_functions: Math.min(
      20,
      functionCount > 0 ? (100 * longFunctions.length) / functionCount : 0,
    ),
    duplication: Math.min(30, 1.5 * duplicationPercent),
  };
  const score = clampScore(100 - Object.values(penalties).reduce((a, b) => a + b, 0));
  const round = (n: number) => Math.round(n * 100) / 100;
  return {
    score,
    summary:
      `${markers} debt marker${markers === 1 ? "" : "s"} (${round(perKloc)} per 1,000 lines), ` +
      `${longFiles.length} file${longFiles.length === 1 ? "" : "s"} over ${LONG_FILE_LINES} lines, ` +
      `${longFunctions.length} function${longFunctions.length === 1 ? "" : "s"} over ${LONG_FUNCTION_LINES} lines, ` +
      `${round(duplicationPercent)}% duplicated lines.`,
    details: {
      files_scanned: code.length,
      code_lines: codeLines,
      markers: {
        total: markers,
        by_kind: byKind,
        per_kloc: round(perKloc),
        locations: markerList,
      },
      long_files: {
        threshold_lines: LONG_FILE_LINES,
        count: longFiles.length,
        source_files: sources.length,
        files: longFiles.slice(0, LIST_LIMIT),
      },
      long_functions: {
        threshold_lines: LONG_FUNCTION_LINES,
        count: longFunctions.length,
        functions_found: functionCount,
        functions: longFunctions.slice(0, LIST_LIMIT),
      },
      duplication: {
        tool: "jscpd (default options: 5 lines, 50 tokens)",
        lines: duplication.lines,
        files: duplication.sources,
        duplicated_lines: duplication.duplicatedLines,
        percent: round(duplicationPercent),
        blocks: duplication.blockCount,
        examples: duplication.blocks,
      },
      penalties: Object.fromEntries(Object.entries(penalties).map(([k, v]) => [k, round(v)])),
    },
    measured: true,
  };
}
