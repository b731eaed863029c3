import { readFile, stat } from "node:fs/promises";
import path from "node:path";
import { describeResult, type SandboxResult } from "../util/sandbox.js";
import { isTestPath, languageOf } from "./source-files.js";
import type { CoverageAttempt } from "./types.js";

/*
 * Small helpers the ecosystem modules share: bounded reads of a working copy's files for
 * detection, and the pieces of a coverage run every adapter needs.
 */

// --- reading files for detection ----------------------------------------------------------

/*
 * The repository is untrusted: a multi-gigabyte "package.json" must not be read into memory.
 * Real config and manifest files are a few KiB.
 */
const MAX_FILE_BYTES = 1024 * 1024;

export const TOO_LARGE = Symbol("too large");

/** A file's text; null when it is missing, not a regular file or unreadable. */
export async function readText(
  workdir: string,
  name: string,
): Promise<string | null | typeof TOO_LARGE> {
  const file = path.join(workdir, name);
  try {
    const info = await stat(file);
    if (!info.isFile()) return null;
    if (info.size > MAX_FILE_BYTES) return TOO_LARGE;
    return await readFile(file, "utf8");
  } catch {
    return null;
  }
}

export async function isFile(workdir: string, name: string): Promise<boolean> {
  return stat(path.join(workdir, name)).then(
    (info) => info.isFile(),
    () => false,
  );
}

export async function isDirectory(workdir: string, name: string): Promise<boolean> {
  return stat(path.join(workdir, name)).then(
    (info) => info.isDirectory(),
    () => false,
  );
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

export async function exists(file: string): Promise<boolean> {
  return stat(file).then(
    () => true,
    () => false,
  );
}

export async function readJson(file: string): Promise<unknown> {
  try {
    return JSON.parse(await readFile(file, "utf8")) as unknown;
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
