/*
 * The files of a cloned repository as the health metrics see them. Listing reuses the
 * indexer's (git's list, .gitignore respected) and its rules for vendored, generated and
 * lock files. Unlike the index, credential files (`.env`, private keys) are kept: the
 * security metric must see them. Their text stays in this process; reports carry only
 * paths, line numbers and masked previews.
 */
import { listRepoFiles } from "../indexer/file-list.js";
import { readBounded } from "../indexer/read-files.js";
import { forEachConcurrently } from "../util/concurrency.js";
import { hasGeneratedHeader, looksBinary, mayHoldSecrets, skipByPath } from "../indexer/skip.js";
import { isTestPath, languageOf, type Language } from "../ecosystems/source-files.js";

export { isTestPath, languageOf, type Language };

export interface ScanFile {
  /** Relative posix path. */
  path: string;
  text: string;
  lines: string[];
  /** Null for files that are not code (docs, config, data). */
  language: Language | null;
  /** A test file (by the language's naming conventions). */
  test: boolean;
  /** Marked generated in its first lines ("@generated", "Code generated … DO NOT EDIT"). */
  generated: boolean;
  /** A path that conventionally holds credentials (see indexer/skip.ts mayHoldSecrets). */
  credentials: boolean;
  /** Lines with something other than whitespace. */
  codeLines: number;
}

export interface RepoFiles {
  files: ScanFile[];
  /** Files listed but not read, by reason. */
  skipped: Record<string, number>;
  /** True when the file or byte limit stopped the reading early. */
  truncated: boolean;
}

export const MAX_FILES = 20_000;
export const MAX_FILE_BYTES = 1024 * 1024;
export const MAX_TOTAL_BYTES = 128 * 1024 * 1024;

function countCodeLines(lines: string[]): number {
  let n = 0;
  for (const line of lines) if (line.trim() !== "") n++;
  return n;
}

/** Splits text into lines without the final empty one a trailing newline leaves. */
export function splitLines(text: string): string[] {
  const lines = text.split(/\r?\n/);
  if (lines.length > 0 && lines[lines.length - 1] === "") lines.pop();
  return lines;
}

/**
 * Lists and reads the repository's files: vendored, generated and lock files are left out,
 * binary and oversized files counted as skipped; credential files are read.
 */
export async function readRepoFiles(root: string): Promise<RepoFiles> {
  const listed = await listRepoFiles(root);
  const skipped: Record<string, number> = {};
  const bump = (reason: string) => (skipped[reason] = (skipped[reason] ?? 0) + 1);
  const wanted: string[] = [];
  for (const rel of listed.paths.sort()) {
    const reason = skipByPath(rel);
    // Credential files are skipped by the index only so search cannot show their values.
    if (reason !== undefined && reason !== "credentials") {
      bump(reason);
      continue;
    }
    wanted.push(rel);
  }
  let truncated = false;
  if (wanted.length > MAX_FILES) {
    truncated = true;
    skipped["over-file-limit"] = wanted.length - MAX_FILES;
    wanted.length = MAX_FILES;
  }
  const files: ScanFile[] = [];
  let totalBytes = 0;
  await forEachConcurrently(wanted, 16, async (rel) => {
    if (totalBytes > MAX_TOTAL_BYTES) {
      truncated = true;
      bump("over-byte-limit");
      return;
    }
    const bytes = await readBounded(root, rel, MAX_FILE_BYTES);
    if (typeof bytes === "string") {
      bump(bytes);
      return;
    }
    if (looksBinary(bytes)) {
      bump("binary");
      return;
    }
    totalBytes += bytes.length;
    const text = bytes.toString("utf8");
    const lines = splitLines(text);
    const language = languageOf(rel);
    files.push({
      path: rel,
      text,
      lines,
      language,
      test: isTestPath(rel, language),
      generated: hasGeneratedHeader(bytes),
      credentials: mayHoldSecrets(rel),
      codeLines: countCodeLines(lines),
    });
  });
  files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  return { files, skipped, truncated };
}

/** Code files that count for code metrics: a known language, not generated. */
export function codeFiles(repo: RepoFiles): ScanFile[] {
  return repo.files.filter((f) => f.language !== null && !f.generated && !f.credentials);
}
