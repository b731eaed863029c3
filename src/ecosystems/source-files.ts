import path from "node:path";

/*
 * Which language a repository file is in and whether it is a test, by extension and naming
 * convention. Shared by the health scan (health/files.ts) and the ecosystems' coverage
 * report parsers, which leave test files out of the figure.
 */

export type Language = "javascript" | "typescript" | "python" | "go" | "other-code";

const EXTENSIONS: Record<string, Language> = {
  ".js": "javascript",
  ".jsx": "javascript",
  ".mjs": "javascript",
  ".cjs": "javascript",
  ".ts": "typescript",
  ".tsx": "typescript",
  ".mts": "typescript",
  ".cts": "typescript",
  ".py": "python",
  ".go": "go",
};

/** Code in languages the scan only counts (markers, long files, duplication). */
const OTHER_CODE = new Set([
  ".java",
  ".kt",
  ".kts",
  ".scala",
  ".rb",
  ".rs",
  ".c",
  ".h",
  ".cc",
  ".cpp",
  ".hpp",
  ".cs",
  ".php",
  ".swift",
  ".m",
  ".sh",
  ".bash",
]);

/** The language of a path by its extension; `.d.ts` declarations are not code here. */
export function languageOf(rel: string): Language | null {
  if (/\.d\.[cm]?ts$/.test(rel)) return null;
  const ext = path.posix.extname(rel).toLowerCase();
  return EXTENSIONS[ext] ?? (OTHER_CODE.has(ext) ? "other-code" : null);
}

const TEST_DIR = /(^|\/)(__tests__|__mocks__|tests?|spec|e2e)\//;

/** True for a test file by the naming conventions of its language. */
export function isTestPath(rel: string, language: Language | null): boolean {
  const name = path.posix.basename(rel);
  switch (language) {
    case "javascript":
    case "typescript":
      return (
        /\.(test|spec)\.[cm]?[jt]sx?$/.test(name) ||
        // tsd's type tests (`index.test-d.ts`), and a root `test.js` (ava's default).
        /\.test-d\.[cm]?tsx?$/.test(name) ||
        (rel === name && /^tests?\.[cm]?[jt]sx?$/.test(name)) ||
        TEST_DIR.test(rel)
      );
    case "python":
      return (
        /^test_.*\.py$/.test(name) ||
        /_test\.py$/.test(name) ||
        name === "conftest.py" ||
        TEST_DIR.test(rel)
      );
    case "go":
      return name.endsWith("_test.go");
    case "other-code":
      return TEST_DIR.test(rel) || /(Test|Spec|_test|_spec)\.[a-z]+$/.test(name);
    default:
      return false;
  }
}
