/*
 * Priors on a file's kind, applied to its search score. Tests, fixtures, examples, docs and
 * changelogs repeat the words of the code they cover (a test of `parseConfig` says
 * parseConfig more often than parseConfig.ts does), so on a plain word match they fill the
 * first results; unless the query asks for them, the source should come first. Measured
 * with bench/localisation.ts.
 */

export type FileKind = "source" | "test" | "fixture" | "example" | "docs" | "changelog";

const CHANGELOG = /(?:^|\/)(?:changelog|changes|history|news|release[-_ ]?notes)(?:\.[a-z]+)?$/i;
const FIXTURE =
  /(?:^|\/)(?:fixtures?|testdata|test[-_]?data|__snapshots__|snapshots|golden|mocks?|__mocks__)\//i;
const TEST =
  /(?:^|\/)(?:tests?|__tests__|spec|specs|testing|e2e|integration[-_]tests?)\/|(?:^|\/)test_[^/]+$|(?:^|\/)(?:tests?|specs?)\.[a-z0-9]+$|[._-](?:test|spec)s?\.[a-z0-9]+$|_test\.go$|(?:^|\/)conftest\.py$/i;
const EXAMPLE = /(?:^|\/)(?:examples?|samples?|demos?|benchmarks?|bench)\//i;
const DOCS_DIR = /(?:^|\/)(?:docs?|documentation|website|site)\//i;
const DOCS_FILE = /\.(?:md|mdx|rst|txt|adoc|asciidoc|html?)$/i;

export function fileKind(path: string): FileKind {
  if (CHANGELOG.test(path)) return "changelog";
  if (FIXTURE.test(path)) return "fixture";
  if (TEST.test(path)) return "test";
  if (EXAMPLE.test(path)) return "example";
  if (DOCS_FILE.test(path) || DOCS_DIR.test(path)) return "docs";
  return "source";
}

/** Score factor of each kind when the query does not ask for it. */
const PENALTY: Record<FileKind, number> = {
  source: 1,
  test: 0.5,
  fixture: 0.35,
  example: 0.5,
  docs: 0.45,
  changelog: 0.3,
};

/** Query words (lower-case, any form) that ask for a kind: its files are not held back. */
const ASKS: Record<Exclude<FileKind, "source">, RegExp> = {
  test: /\b(?:tests?|testing|tested|specs?|unit[-_ ]?tests?)\b/i,
  fixture: /\b(?:fixtures?|testdata|snapshots?|mocks?)\b/i,
  example: /\b(?:examples?|samples?|demos?|bench(?:mark)?s?)\b/i,
  docs: /\b(?:docs?|documentation|readme|docstrings?|guide|tutorial|typos?|wording)\b/i,
  changelog: /\b(?:changelog|release notes|history)\b/i,
};

/** The score factor of each file kind for a query (1 for kinds the query asks for). */
export function kindFactors(query: string): Record<FileKind, number> {
  const factors = { ...PENALTY };
  for (const [kind, pattern] of Object.entries(ASKS)) {
    if (pattern.test(query)) factors[kind as FileKind] = 1;
  }
  return factors;
}
