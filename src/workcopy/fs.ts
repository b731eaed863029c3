/*
 * The one way the service reads a working copy from its own side (the indexer and its
 * snippets, the read tools, instruction files, the health scan and coverage reports). A
 * working copy is written by untrusted code: the model's `run_command`, the repository's
 * own tests, or simply its commits can turn any file or folder into a symbolic link to
 * something of the host's (`/proc/self/environ`, a file under DATA_DIR, the database's
 * WAL). A plain `readFileSync(path.join(root, rel))` follows such a link with the service's
 * own rights, and whatever it read may then reach a prompt, a task event or a pushed branch.
 *
 * So every read here walks the relative path one component at a time from a descriptor of
 * the root, never by the path string: each folder is opened with `O_DIRECTORY | O_NOFOLLOW`
 * relative to the descriptor of the folder before it (through `/proc/self/fd/<fd>/<name>`,
 * Linux's way to say openat from Node), and the last component with `O_NOFOLLOW |
 * O_NONBLOCK`, then fstat-ed and read from that same descriptor. Nothing outside the working
 * copy is ever opened, not even for a moment, and a file or folder swapped for a link after
 * it was listed is refused when it is read (no check-then-open race).
 *
 * Decisions:
 * - **Every symbolic link is refused, also one that stays inside the working copy.** Its
 *   target is in the working copy under its own name, and is read there; following only
 *   inside links would need a resolver of our own, and the indexer has always skipped links.
 *   The tools tell the model to use the file a link points to.
 * - **Only regular files are read.** A FIFO would hang the reader, a device could do
 *   anything: the last component is opened non-blocking and refused unless fstat says it is
 *   a regular file.
 * - **Paths are relative**: absolute paths, `..` components and NUL bytes are refused before
 *   anything is opened ("invalid-path"). `.` and empty components are dropped.
 * - Where `/proc/self/fd` is missing (not Linux: a developer's machine; the sandbox needs
 *   Linux anyway), each prefix of the path is opened by name with the same flags, which
 *   still refuses a link that is there when it is opened but not one swapped in between.
 *
 * Example:
 *
 *   const text = await readText(workdir, "AGENTS.md", { maxBytes: 64 * 1024, partial: true });
 *   if (text === undefined) return ""; // missing, a link, a FIFO, unreadable
 *
 *   const bytes = readBytesSync(root, "src/a.ts", { maxBytes: 1 << 20 });
 *   if (typeof bytes === "string") skip(bytes); // why: "symlink", "too-large", …
 *
 * Git reads of a working copy need none of this: git stores a link's target, never reads
 * through it. This module is the one exception to the lint rule that keeps `node:fs` reads
 * out of the folders that handle working copies (eslint.config.js).
 */
import fs, { type Dirent } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";

/** Why a path was not read. */
export type Refusal =
  /** Absolute, `..`, a NUL byte, or the root where a file was asked for. */
  | "invalid-path"
  /** Nothing there, or a file where a folder was expected. */
  | "missing"
  /** The path ends in, or passes through, a symbolic link. */
  | "symlink"
  /** A folder, FIFO, socket or device where a regular file was asked for (or the reverse). */
  | "not-a-file"
  /** Larger than `maxBytes` (and `partial` not set). */
  | "too-large"
  /** Permission denied or another I/O error. */
  | "unreadable";

export interface ReadOptions {
  /** Files larger than this are refused ("too-large"), or cut at it with `partial`. */
  maxBytes: number;
  /** Read the first `maxBytes` of a larger file instead of refusing it. */
  partial?: boolean;
}

export interface EntryInfo {
  /** What the last component is, without following it. */
  type: "file" | "directory" | "symlink" | "other";
  size: number;
}

const C = fs.constants;
const DIR_FLAGS = C.O_RDONLY | C.O_DIRECTORY | C.O_NOFOLLOW | C.O_NONBLOCK;
const FILE_FLAGS = C.O_RDONLY | C.O_NOFOLLOW | C.O_NONBLOCK;
const PROC_FD = "/proc/self/fd";

const hasProcFd: boolean = (() => {
  try {
    return fs.statSync(PROC_FD).isDirectory();
  } catch {
    return false;
  }
})();

/** The components of a relative path, or undefined when it may not be used. */
export function pathParts(rel: string): string[] | undefined {
  if (rel.includes("\0") || path.isAbsolute(rel) || path.posix.isAbsolute(rel)) return undefined;
  const parts: string[] = [];
  for (const part of rel.split(/[/]/)) {
    if (part === "" || part === ".") continue;
    if (part === "..") return undefined;
    parts.push(part);
  }
  return parts;
}

/** Where the error of opening a path component says it went. */
function refusalOf(error: unknown): Refusal {
  switch ((error as NodeJS.ErrnoException).code) {
    case "ELOOP":
      return "symlink";
    case "ENOENT":
      return "missing";
    case "ENOTDIR":
      // O_DIRECTORY | O_NOFOLLOW on a link also answers ENOTDIR: the caller looks again.
      return "missing";
    case "ENXIO": // a socket, or a FIFO's writer end
    case "EISDIR":
      return "not-a-file";
    default:
      return "unreadable";
  }
}

/** A path naming `name` in the folder open as `dirFd` (or by name without /proc). */
function childPath(dirFd: number, dirPath: string, name: string): string {
  return hasProcFd ? `${PROC_FD}/${dirFd}/${name}` : path.join(dirPath, name);
}

function typeOf(stat: fs.Stats): EntryInfo["type"] {
  if (stat.isFile()) return "file";
  if (stat.isDirectory()) return "directory";
  if (stat.isSymbolicLink()) return "symlink";
  return "other";
}

// --- synchronous --------------------------------------------------------------------------

function closeQuietly(fd: number): void {
  try {
    fs.closeSync(fd);
  } catch {
    // already closed or never valid: nothing to release
  }
}

/** A descriptor of the folder `parts` under `root`, walked without following links. */
function openDirSync(root: string, parts: readonly string[]): number | Refusal {
  let fd: number;
  try {
    fd = fs.openSync(root, C.O_RDONLY | C.O_DIRECTORY);
  } catch (error) {
    return refusalOf(error);
  }
  let dirPath = root;
  for (const part of parts) {
    const child = childPath(fd, dirPath, part);
    let next: number;
    try {
      next = fs.openSync(child, DIR_FLAGS);
    } catch (error) {
      const why = refusalOf(error);
      const isLink = why === "missing" && lstatTypeSync(child) === "symlink";
      closeQuietly(fd);
      return isLink ? "symlink" : why;
    }
    closeQuietly(fd);
    fd = next;
    dirPath = path.join(dirPath, part);
  }
  return fd;
}

function lstatTypeSync(file: string): EntryInfo["type"] | undefined {
  try {
    return typeOf(fs.lstatSync(file));
  } catch {
    return undefined;
  }
}

/** Opens the regular file `rel` under `root`; the descriptor and its size, or a refusal. */
function openFileSync(root: string, rel: string): { fd: number; size: number } | Refusal {
  const parts = pathParts(rel);
  if (parts === undefined || parts.length === 0) return "invalid-path";
  const dir = openDirSync(root, parts.slice(0, -1));
  if (typeof dir === "string") return dir;
  let fd: number;
  try {
    fd = fs.openSync(
      childPath(dir, path.join(root, ...parts.slice(0, -1)), parts.at(-1)!),
      FILE_FLAGS,
    );
  } catch (error) {
    return refusalOf(error);
  } finally {
    closeQuietly(dir);
  }
  try {
    const stat = fs.fstatSync(fd);
    if (stat.isFile()) return { fd, size: stat.size };
    closeQuietly(fd);
    return "not-a-file";
  } catch (error) {
    closeQuietly(fd);
    return refusalOf(error);
  }
}

/**
 * The bytes of the regular file `rel` under `root`, or why not. With `scratch`, the bytes
 * are read into `scratch.buffer` (grown when too small) and valid only until the next call.
 */
export function readBytesSync(
  root: string,
  rel: string,
  options: ReadOptions & { scratch?: { buffer: Buffer } },
): Buffer | Refusal {
  const opened = openFileSync(root, rel);
  if (typeof opened === "string") return opened;
  const { fd, size } = opened;
  try {
    if (size > options.maxBytes && !options.partial) return "too-large";
    const want = Math.min(size, options.maxBytes);
    let buffer: Buffer;
    if (options.scratch) {
      if (want > options.scratch.buffer.length)
        options.scratch.buffer = Buffer.allocUnsafeSlow(
          Math.max(want, options.scratch.buffer.length * 2),
        );
      buffer = options.scratch.buffer;
    } else {
      buffer = Buffer.allocUnsafe(want);
    }
    let offset = 0;
    while (offset < want) {
      const n = fs.readSync(fd, buffer, offset, want - offset, offset);
      // The file shrank while being read: keep what is there.
      if (n === 0) break;
      offset += n;
    }
    return buffer.subarray(0, offset);
  } catch (error) {
    return refusalOf(error);
  } finally {
    closeQuietly(fd);
  }
}

/** The UTF-8 text of the regular file `rel` under `root`; undefined when it was refused. */
export function readTextSync(root: string, rel: string, options: ReadOptions): string | undefined {
  const bytes = readBytesSync(root, rel, options);
  return typeof bytes === "string" ? undefined : bytes.toString("utf8");
}

// --- asynchronous -------------------------------------------------------------------------

// Callback fs calls, promisified: cheaper than FileHandle objects for many small reads.
const openAsync = promisify(fs.open);
const closeAsync = promisify(fs.close);
const fstatAsync = promisify(fs.fstat);
const lstatAsync = promisify(fs.lstat);
const readAsync = promisify(fs.read);
const readdirAsync = promisify(fs.readdir);
const unlinkAsync = promisify(fs.unlink);

async function closeAsyncQuietly(fd: number): Promise<void> {
  await closeAsync(fd).catch(() => undefined);
}

async function lstatType(file: string): Promise<EntryInfo["type"] | undefined> {
  return lstatAsync(file).then(typeOf, () => undefined);
}

/** openDirSync, asynchronously. */
async function openDir(root: string, parts: readonly string[]): Promise<number | Refusal> {
  let fd: number;
  try {
    fd = await openAsync(root, C.O_RDONLY | C.O_DIRECTORY);
  } catch (error) {
    return refusalOf(error);
  }
  let dirPath = root;
  for (const part of parts) {
    const child = childPath(fd, dirPath, part);
    let next: number;
    try {
      next = await openAsync(child, DIR_FLAGS);
    } catch (error) {
      const why = refusalOf(error);
      const isLink = why === "missing" && (await lstatType(child)) === "symlink";
      await closeAsyncQuietly(fd);
      return isLink ? "symlink" : why;
    }
    await closeAsyncQuietly(fd);
    fd = next;
    dirPath = path.join(dirPath, part);
  }
  return fd;
}

/** The parent folder's descriptor and the last component of `rel`, or a refusal. */
async function openParent(
  root: string,
  rel: string,
): Promise<{ dir: number; child: string } | Refusal> {
  const parts = pathParts(rel);
  if (parts === undefined || parts.length === 0) return "invalid-path";
  const dir = await openDir(root, parts.slice(0, -1));
  if (typeof dir === "string") return dir;
  return { dir, child: childPath(dir, path.join(root, ...parts.slice(0, -1)), parts.at(-1)!) };
}

/** readBytesSync, asynchronously (no scratch buffer). */
export async function readBytes(
  root: string,
  rel: string,
  options: ReadOptions,
): Promise<Buffer | Refusal> {
  const parent = await openParent(root, rel);
  if (typeof parent === "string") return parent;
  let fd: number;
  try {
    fd = await openAsync(parent.child, FILE_FLAGS);
  } catch (error) {
    return refusalOf(error);
  } finally {
    await closeAsyncQuietly(parent.dir);
  }
  try {
    const stat = await fstatAsync(fd);
    if (!stat.isFile()) return "not-a-file";
    if (stat.size > options.maxBytes && !options.partial) return "too-large";
    const want = Math.min(stat.size, options.maxBytes);
    const buffer = Buffer.allocUnsafe(want);
    let offset = 0;
    while (offset < want) {
      const { bytesRead } = await readAsync(fd, buffer, offset, want - offset, offset);
      if (bytesRead === 0) break;
      offset += bytesRead;
    }
    return buffer.subarray(0, offset);
  } catch (error) {
    return refusalOf(error);
  } finally {
    await closeAsyncQuietly(fd);
  }
}

/** readTextSync, asynchronously. */
export async function readText(
  root: string,
  rel: string,
  options: ReadOptions,
): Promise<string | undefined> {
  const bytes = await readBytes(root, rel, options);
  return typeof bytes === "string" ? undefined : bytes.toString("utf8");
}

/**
 * What `rel` under `root` is, without following it or any folder on the way (a link is
 * "symlink", whatever it points to); undefined when nothing is there or the way passes
 * through a link. `""` or `"."` is the root itself.
 */
export async function entryInfo(root: string, rel: string): Promise<EntryInfo | undefined> {
  const parts = pathParts(rel);
  if (parts === undefined) return undefined;
  if (parts.length === 0) {
    const stat = await fs.promises.stat(root).catch(() => undefined);
    return stat && { type: typeOf(stat), size: stat.size };
  }
  const parent = await openParent(root, rel);
  if (typeof parent === "string") return undefined;
  try {
    const stat = await lstatAsync(parent.child);
    return { type: typeOf(stat), size: stat.size };
  } catch {
    return undefined;
  } finally {
    await closeAsyncQuietly(parent.dir);
  }
}

/** Whether anything (a link too) is at `rel` under `root`, reached without following links. */
export async function exists(root: string, rel: string): Promise<boolean> {
  return (await entryInfo(root, rel)) !== undefined;
}

/**
 * The entries of the folder `rel` under `root` (`""` for the root), reached without following
 * links; each entry's type is its own (a link is a link). A refusal when it is not a folder.
 */
export async function listDir(root: string, rel: string): Promise<Dirent[] | Refusal> {
  const parts = pathParts(rel);
  if (parts === undefined) return "invalid-path";
  const fd = await openDir(root, parts);
  if (typeof fd === "string") return fd === "missing" ? "missing" : fd;
  try {
    return await readdirAsync(hasProcFd ? `${PROC_FD}/${fd}` : path.join(root, ...parts), {
      withFileTypes: true,
    });
  } catch (error) {
    return refusalOf(error);
  } finally {
    await closeAsyncQuietly(fd);
  }
}

/**
 * Removes the file `rel` under `root` (a link there is removed itself, never followed),
 * reached without following a link on the way: a path through a link, or with `..`, is left
 * alone. For the service's own scratch files at places the repository names (a coverage
 * report's folder, a case's test file). Answers true when something was removed, else why
 * not ("missing" when nothing was there).
 */
export async function removeFile(root: string, rel: string): Promise<true | Refusal> {
  const parent = await openParent(root, rel);
  if (typeof parent === "string") return parent;
  try {
    await unlinkAsync(parent.child);
    return true;
  } catch (error) {
    return refusalOf(error);
  } finally {
    await closeAsyncQuietly(parent.dir);
  }
}

/**
 * The relative form of `file`, a path under `root` given absolute or relative, for the
 * readers above; undefined when it lies outside `root`.
 */
export function relativeInside(root: string, file: string): string | undefined {
  const rel = path.isAbsolute(file) ? path.relative(path.resolve(root), file) : file;
  const parts = pathParts(rel.split(path.sep).join("/"));
  return parts === undefined ? undefined : parts.join("/");
}
