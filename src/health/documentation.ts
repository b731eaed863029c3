/*
 * Documentation: a README with substance, and doc comments on exported symbols
 * (JavaScript/TypeScript `/** … *\/` before an export, Python docstrings on public
 * module-level functions and classes, Go comments before exported declarations).
 */
import path from "node:path";
import type { RepoFiles, ScanFile } from "./files.js";
import { clampScore, type MetricResult } from "./types.js";

export interface ExportedSymbol {
  path: string;
  line: number;
  name: string;
  documented: boolean;
}

/** A README with this many words or more earns all the length points. */
export const README_FULL_WORDS = 300;

export interface ReadmeAssessment {
  path: string | null;
  words: number;
  headings: number;
  has_code_or_usage: boolean;
  score: number;
}

/**
 * The README's points: 20 for being there, up to 50 for length (README_FULL_WORDS words),
 * 15 for two or more headings, 15 for a code block or an install/usage section.
 */
export function assessReadme(repo: RepoFiles): ReadmeAssessment {
  const readme = repo.files
    .filter(
      (f) => !f.path.includes("/") && /^readme(\.(md|markdown|rst|txt|adoc|org))?$/i.test(f.path),
    )
    .sort((a, b) =>
      a.path.toLowerCase().endsWith(".md") ? -1 : b.path.toLowerCase().endsWith(".md") ? 1 : 0,
    )[0];
  if (!readme) return { path: null, words: 0, headings: 0, has_code_or_usage: false, score: 0 };
  const words = (readme.text.match(/[A-Za-z0-9][\w'’-]*/g) ?? []).length;
  const headings = readme.lines.filter(
    (l, i) =>
      /^#{1,6}\s+\S/.test(l) ||
      // reStructuredText / setext underlines
      (i > 0 && /^(=+|-+|~+)\s*$/.test(l) && (readme.lines[i - 1] ?? "").trim() !== ""),
  ).length;
  const hasCodeOrUsage =
    /^(```|~~~|\.\. code|::\s*$)/m.test(readme.text) ||
    /^#{1,6}\s+.*\b(install|installation|usage|getting started|quick ?start)\b/im.test(readme.text);
  const score =
    20 +
    Math.min(50, (50 * words) / README_FULL_WORDS) +
    (headings >= 2 ? 15 : 0) +
    (hasCodeOrUsage ? 15 : 0);
  return {
    path: readme.path,
    words,
    headings,
    has_code_or_usage: hasCodeOrUsage,
    score: Math.round(score * 10) / 10,
  };
}

const JS_EXPORT =
  /^\s*export\s+(?:declare\s+)?(?:default\s+)?(?:async\s+)?(?:abstract\s+)?(?:function\s*\*?|class|const|let|var|interface|type|enum)\s+([A-Za-z_$][\w$]*)/;
const CJS_EXPORT = /^\s*(?:module\.)?exports\.([A-Za-z_$][\w$]*)\s*=/;

/** True when a `/** … *\/` block ends right above `line` (decorators may sit between). */
function jsDocAbove(lines: string[], line: number): boolean {
  let i = line - 1;
  while (i >= 0 && /^\s*@/.test(lines[i]!)) i--;
  if (i < 0 || !/\*\/\s*$/.test(lines[i]!)) return false;
  for (let j = i; j >= 0 && j >= i - 200; j--) {
    const text = lines[j]!;
    if (text.includes("/**")) return true;
    if (text.includes("/*")) return false;
  }
  return false;
}

function jsExports(file: ScanFile): ExportedSymbol[] {
  const out: ExportedSymbol[] = [];
  file.lines.forEach((text, i) => {
    const match = JS_EXPORT.exec(text) ?? CJS_EXPORT.exec(text);
    if (!match) return;
    out.push({
      path: file.path,
      line: i + 1,
      name: match[1]!,
      documented: jsDocAbove(file.lines, i),
    });
  });
  return out;
}

const PY_DEF = /^(?:async\s+)?(def|class)\s+([A-Za-z_]\w*)/;

function pythonExports(file: ScanFile): ExportedSymbol[] {
  const out: ExportedSymbol[] = [];
  const { lines } = file;
  for (let i = 0; i < lines.length; i++) {
    const match = PY_DEF.exec(lines[i]!);
    if (!match || match[2]!.startsWith("_")) continue;
    // The signature may span lines; the body starts after the line ending in ":".
    let j = i;
    while (j < lines.length && !/:\s*(#.*)?$/.test(lines[j]!)) j++;
    let k = j + 1;
    while (k < lines.length && lines[k]!.trim() === "") k++;
    const first = lines[k]?.trim() ?? "";
    const documented = /^[rRbBuUfF]{0,2}("""|'''|"|')/.test(first);
    out.push({ path: file.path, line: i + 1, name: match[2]!, documented });
  }
  return out;
}

const GO_DECL = /^(?:func\s+(?:\([^)]*\)\s*)?|type\s+|var\s+|const\s+)([A-Z]\w*)/;

function goExports(file: ScanFile): ExportedSymbol[] {
  const out: ExportedSymbol[] = [];
  file.lines.forEach((text, i) => {
    const match = GO_DECL.exec(text);
    if (!match) return;
    const above = i > 0 ? file.lines[i - 1]!.trim() : "";
    out.push({ path: file.path, line: i + 1, name: match[1]!, documented: above.startsWith("//") });
  });
  return out;
}

/** Exported symbols of the repository's non-test source files. */
export function findExports(repo: RepoFiles): ExportedSymbol[] {
  const out: ExportedSymbol[] = [];
  for (const file of repo.files) {
    if (file.test || file.generated || file.credentials) continue;
    if (file.language === "javascript" || file.language === "typescript")
      out.push(...jsExports(file));
    else if (file.language === "python") {
      // Modules named _private are not public API.
      if (!path.posix.basename(file.path).startsWith("_") || file.path.endsWith("__init__.py"))
        out.push(...pythonExports(file));
    } else if (file.language === "go") out.push(...goExports(file));
  }
  return out;
}

/** The documentation metric: 30% README, 70% documented exports (README alone without exports). */
export function measureDocumentation(repo: RepoFiles): MetricResult {
  const readme = assessReadme(repo);
  const exports = findExports(repo);
  const documented = exports.filter((e) => e.documented).length;
  const percent = exports.length > 0 ? (100 * documented) / exports.length : null;
  const score = clampScore(percent === null ? readme.score : 0.3 * readme.score + 0.7 * percent);
  const readmeText = readme.path
    ? `README ${readme.path} (${readme.words} words, ${readme.score}/100)`
    : "no README";
  const exportText =
    percent === null
      ? "no exported symbols found"
      : `${documented} of ${exports.length} exported symbols documented (${Math.round(percent * 10) / 10}%)`;
  return {
    score,
    summary: `${readmeText}; ${exportText}.`,
    details: {
      readme,
      exports: {
        total: exports.length,
        documented,
        percent: percent === null ? null : Math.round(percent * 10) / 10,
        undocumented: exports
          .filter((e) => !e.documented)
          .slice(0, 30)
          .map(({ path: p, line, name }) => ({ path: p, line, name })),
      },
      weights: percent === null ? { readme: 1 } : { readme: 0.3, exports: 0.7 },
    },
    measured: true,
  };
}
