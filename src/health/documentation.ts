/*
 * Documentation: a README with substance, and doc comments on the public API, read by
 * real parsers: JavaScript/TypeScript JSDoc through the TypeScript compiler API
 * (doc-js.ts), Python docstrings through `ast`, Go doc comments through go/ast (the
 * readers in tools/health). Examples, tests, fixtures, benchmarks, scripts and docs are
 * not public API.
 */
import { execFile } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type * as DocJs from "./doc-js.js";
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

/** Folders whose code is not a package's public API (examples, tests, tooling, docs). */
const NOT_API_DIR =
  /(^|\/)(examples?|demos?|samples?|tests?|testing|testdata|__tests__|__mocks__|spec|e2e|fixtures?|bench(marks?)?|perf|scripts?|tools?|docs?|website|site|\.github|coverage|node_modules|vendor)\//i;
/**
 * Root-level tooling files (`vite.config.ts`, `karma.sauce.conf.js`, `.eslintrc.js`,
 * `Gruntfile.js`, `benchmark.js`, `setup.py`).
 */
const NOT_API_FILE =
  /^([^/]*\.conf(ig)?\.[cm]?[jt]s|\.[^/]*rc\.[cm]?js|(gulp|grunt|jake)file\.[cm]?js|bench(mark)?s?\.[cm]?[jt]s|setup\.py|noxfile\.py|conftest\.py|fabfile\.py)$/i;

/** True for a file whose exported symbols are public API. */
export function isApiFile(file: ScanFile): boolean {
  if (file.test || file.generated || file.credentials || file.language === null) return false;
  if (NOT_API_DIR.test(file.path) || NOT_API_FILE.test(file.path)) return false;
  if (file.language === "python") {
    // Modules and packages named _private are not public API (`__init__.py` is).
    const parts = file.path.split("/");
    const base = parts.pop()!;
    return (
      !parts.some((p) => p.startsWith("_")) && (base === "__init__.py" || !base.startsWith("_"))
    );
  }
  if (file.language === "go") return !/(^|\/)(internal|cmd)\//.test(file.path);
  return file.language === "javascript" || file.language === "typescript";
}

/** The folder of the doc-comment readers shipped with the service (tools/health). */
export function toolsDir(): string {
  return path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "tools", "health");
}

const EXTRACT_TIMEOUT_MS = 120_000;

/** Runs one of the tools/health readers with the file list on stdin; its JSON answer. */
function runReader(
  command: string,
  args: string[],
  cwd: string,
  files: ScanFile[],
  env: NodeJS.ProcessEnv = process.env,
): Promise<{ symbols: ExportedSymbol[]; errors: Array<{ path: string; error: string }> }> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      command,
      args,
      { cwd, env, timeout: EXTRACT_TIMEOUT_MS, maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) => {
        if (error) {
          reject(new Error(`${command} failed: ${(stderr || error.message).slice(0, 300)}`));
          return;
        }
        try {
          resolve(
            JSON.parse(stdout) as {
              symbols: ExportedSymbol[];
              errors: Array<{ path: string; error: string }>;
            },
          );
        } catch {
          reject(new Error(`${command} printed no JSON`));
        }
      },
    );
    child.stdin?.end(JSON.stringify(files.map((f) => ({ path: f.path, text: f.text }))));
  });
}

/**
 * The interfaces and classes other files of the repository declare, for the docs a class
 * member inherits: a relative import (`./url`, `./url.js`, `../types`) resolved as
 * TypeScript does (the `.js` of an ES import names its `.ts` source, a folder its index).
 */
function importedTypeDocs(
  repo: RepoFiles,
  declaredTypeDocs: typeof DocJs.declaredTypeDocs,
): (from: string, specifier: string, name: string) => DocJs.MemberDocs | null {
  const byPath = new Map(
    repo.files
      .filter((f) => f.language === "javascript" || f.language === "typescript")
      .map((f) => [f.path, f]),
  );
  const parsed = new Map<string, Map<string, DocJs.MemberDocs>>();
  return (from, specifier, name) => {
    if (!specifier.startsWith(".")) return null;
    const base = path.posix.join(path.posix.dirname(from), specifier);
    const stem = base.replace(/\.[cm]?jsx?$/, "");
    const candidates = [
      base,
      ...[".ts", ".tsx", ".d.ts", ".mts", ".cts", ".js", ".jsx", ".mjs", ".cjs"].map(
        (ext) => stem + ext,
      ),
      ...["index.ts", "index.tsx", "index.d.ts", "index.js"].map((f) => `${base}/${f}`),
    ];
    for (const candidate of candidates) {
      const file = byPath.get(candidate);
      if (!file) continue;
      let types = parsed.get(file.path);
      if (!types) {
        types = declaredTypeDocs(file.path, file.text);
        parsed.set(file.path, types);
      }
      return types.get(name) ?? null;
    }
    return null;
  };
}

export interface ExportScan {
  symbols: ExportedSymbol[];
  /** Per language: the reader used, or why the language was not read. */
  readers: Record<string, string>;
  unreadable: Array<{ path: string; error: string }>;
}

/**
 * Public symbols of the repository's API files: JavaScript/TypeScript with the TypeScript
 * parser, Python with its `ast` module (tools/health/pydoc_symbols.py), Go with go/ast
 * (tools/health/godoc_symbols.go). Python and Go are read when their toolchains exist.
 */
export async function findExports(repo: RepoFiles): Promise<ExportScan> {
  const scan: ExportScan = { symbols: [], readers: {}, unreadable: [] };
  const api = repo.files.filter(isApiFile);
  const js = api.filter((f) => f.language === "javascript" || f.language === "typescript");
  if (js.length > 0) {
    scan.readers.javascript = "TypeScript compiler API (JSDoc)";
    // Loaded here, not at import: the TypeScript compiler takes about a second to load, which
    // every process of the service paid at start, scanning or not.
    const { declaredTypeDocs, jsDocSymbols } = await import("./doc-js.js");
    const imported = importedTypeDocs(repo, declaredTypeDocs);
    for (const file of js)
      for (const s of jsDocSymbols(file.path, file.text, (specifier, name) =>
        imported(file.path, specifier, name),
      ))
        scan.symbols.push({ path: file.path, ...s });
  }
  const dir = toolsDir();
  const readers = [
    {
      language: "python",
      name: "Python ast (docstrings)",
      command: "python3",
      args: [path.join(dir, "pydoc_symbols.py")],
      env: { ...process.env, PYTHONDONTWRITEBYTECODE: "1" },
    },
    {
      language: "go",
      name: "go/ast (doc comments)",
      command: "go",
      args: ["run", path.join(dir, "godoc_symbols.go")],
      // A standalone file of the standard library only: no module, no download.
      env: { ...process.env, GOTOOLCHAIN: "local", GOFLAGS: "", GO111MODULE: "off" },
    },
  ] as const;
  for (const reader of readers) {
    const files = api.filter((f) => f.language === reader.language);
    if (files.length === 0) continue;
    try {
      const answer = await runReader(reader.command, [...reader.args], dir, files, reader.env);
      scan.symbols.push(...answer.symbols);
      scan.unreadable.push(...answer.errors);
      scan.readers[reader.language] = reader.name;
    } catch (error) {
      scan.readers[reader.language] = `not read: ${(error as Error).message}`;
    }
  }
  scan.symbols.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : a.line - b.line));
  return scan;
}

/** The documentation metric: 30% README, 70% documented exports (README alone without exports). */
export async function measureDocumentation(repo: RepoFiles): Promise<MetricResult> {
  const readme = assessReadme(repo);
  const scan = await findExports(repo);
  const exports = scan.symbols;
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
      readers: scan.readers,
      unreadable: scan.unreadable.slice(0, 20),
      weights: percent === null ? { readme: 1 } : { readme: 0.3, exports: 0.7 },
    },
    measured: true,
  };
}
