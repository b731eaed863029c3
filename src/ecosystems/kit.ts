import path from "node:path";
import { describeResult, type SandboxResult } from "../sandbox/index.js";
import {
  entryInfo,
  exists as entryExists,
  readBytes,
  readText as readCopyText,
  relativeInside,
  removeFile,
} from "../workcopy/fs.js";
import { isTestPath, languageOf } from "./source-files.js";
import type { CoverageAttempt } from "./types.js";

/*
 * Small helpers the ecosystem modules share: bounded reads of a working copy's files for
 * detection, and the pieces of a coverage run every adapter needs. Every read goes through
 * workcopy/fs.ts: the working copy is written by the repository's own commands, and a
 * manifest or report swapped for a link to a host file must not be read.
 */

// --- reading files for detection ----------------------------------------------------------

/*
 * The repository is untrusted: a multi-gigabyte "package.json" must not be read into memory.
 * Real config and manifest files are a few KiB.
 */
const MAX_FILE_BYTES = 1024 * 1024;

export const TOO_LARGE = Symbol("too large");

/** A file's text; null when it is missing, a link, not a regular file or unreadable. */
export async function readText(
  workdir: string,
  name: string,
): Promise<string | null | typeof TOO_LARGE> {
  const bytes = await readBytes(workdir, name, { maxBytes: MAX_FILE_BYTES });
  if (bytes === "too-large") return TOO_LARGE;
  return typeof bytes === "string" ? null : bytes.toString("utf8");
}

/** A regular file (not a link to one) at `name`. */
export async function isFile(workdir: string, name: string): Promise<boolean> {
  return (await entryInfo(workdir, name))?.type === "file";
}

/** A folder (not a link to one) at `name`. */
export async function isDirectory(workdir: string, name: string): Promise<boolean> {
  return (await entryInfo(workdir, name))?.type === "directory";
}

export async function containsText(
  workdir: string,
  name: string,
  needle: string,
): Promise<boolean> {
  const text = await readText(workdir, name);
  return typeof text === "string" && text.includes(needle);
}

// --- coverage runs ------------------------------------------------------------------------

/** Scratch folder for the coverage tools' reports, inside the working copy. */
export const REPORT_DIR = ".foreman-coverage";

/**
 * Whether anything (a link too) is at `file`, a path under `root`, reached without following
 * a link on the way.
 */
export async function exists(root: string, file: string): Promise<boolean> {
  const rel = relativeInside(root, file);
  return rel !== undefined && (await entryExists(root, rel));
}

/** Largest report read (coverage summaries and profiles of big repositories). */
const MAX_REPORT_BYTES = 128 * 1024 * 1024;

/** A report's text, `file` a path under `root`; undefined when missing, a link or too large. */
export async function readReport(root: string, file: string): Promise<string | undefined> {
  const rel = relativeInside(root, file);
  return rel === undefined ? undefined : readCopyText(root, rel, { maxBytes: MAX_REPORT_BYTES });
}

/**
 * Removes an earlier report at `file`, a path under `root`, before a run writes it again;
 * only inside the working copy. Where the report goes comes from the repository (a coverage
 * script's `--report-dir`, a committed `.foreman-coverage` link): a path with `..` or through
 * a link is left alone (readReport refuses to read it as well).
 */
export async function removeReport(root: string, file: string): Promise<void> {
  const rel = relativeInside(root, file);
  if (rel !== undefined) await removeFile(root, rel);
}

/** A JSON report at `file`, a path under `root`; undefined when unreadable or not JSON. */
export async function readJson(root: string, file: string): Promise<unknown> {
  const text = await readReport(root, file);
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/** Relative posix path of a report entry, or null when it lies outside the repository. */
export function relativeTo(root: string, file: string): string | null {
  const rel = path.isAbsolute(file) ? path.relative(root, file) : file;
  const posix = rel.split(path.sep).join("/").replace(/^\.\//, "");
  if (posix.startsWith("../") || posix === ".." || posix.startsWith("node_modules/")) return null;
  return posix;
}

export function isTestFile(rel: string): boolean {
  return isTestPath(rel, languageOf(rel));
}

export function timedOutAttempt(
  result: SandboxResult,
  command: string,
  notes: string[],
): CoverageAttempt {
  return {
    ok: false,
    reason: `the tests did not finish within the coverage time budget (HEALTH_COVERAGE_TIMEOUT_S): ${describeResult(result)}`,
    command,
    notes,
  };
}
