/*
 * Confinement of model-supplied paths to a working copy. Read tools use it now and write
 * tools will later, so a path is refused as soon as any part of it could reach outside the
 * repository or into its git metadata, whether the file exists yet or not.
 */
import { constants } from "node:fs";
import { lstat, open, readlink, realpath } from "node:fs/promises";
import path from "node:path";

/** A path that may not be used; the message says why, for the model to correct itself. */
export class PathError extends Error {
  override name = "PathError";
}

function isInside(parent: string, child: string): boolean {
  const rel = path.relative(parent, child);
  return rel === "" || (rel !== ".." && !rel.startsWith(`..${path.sep}`) && !path.isAbsolute(rel));
}

function touchesGit(rel: string): boolean {
  // Case-insensitive: on macOS and Windows ".GIT/config" is the same file.
  return rel.split(/[\\/]/).some((segment) => segment.toLowerCase() === ".git");
}

/**
 * The absolute path of `relative` inside `root`, or a PathError: empty, absolute, NUL bytes,
 * `..` leaving the root, anything under `.git`, or a symbolic link leading outside the root.
 */
export async function resolveInside(root: string, relative: string): Promise<string> {
  if (relative.trim() === "") throw new PathError("the path is empty");
  if (relative.includes("\0")) throw new PathError("the path contains a NUL byte");
  // Backslashes count as separators everywhere, so "..\\x" cannot slip past on any platform.
  const unified = relative.replace(/\\/g, "/");
  if (unified.startsWith("/") || /^[A-Za-z]:/.test(unified)) {
    throw new PathError("paths must be relative to the repository root");
  }
  const normal = path.posix.normalize(unified);
  if (normal === ".." || normal.startsWith("../")) {
    throw new PathError("'..' may not leave the repository");
  }
  if (touchesGit(normal)) throw new PathError("the .git directory is off limits");

  const absRoot = path.resolve(root);
  const target = path.resolve(absRoot, normal);
  const realRoot = await realpath(absRoot);

  // The longest prefix that exists decides where the path really leads; the missing rest
  // cannot contain links yet.
  let existing = target;
  for (;;) {
    try {
      const real = await realpath(existing);
      if (!isInside(realRoot, real)) {
        throw new PathError("the path leads outside the repository through a symbolic link");
      }
      if (touchesGit(path.relative(realRoot, real))) {
        throw new PathError("the path leads into the .git directory through a symbolic link");
      }
      return target;
    } catch (error) {
      if (error instanceof PathError) throw error;
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== "ENOENT" && code !== "ENOTDIR") throw error;
      // A link whose target is missing would be followed by a later write: refuse it.
      const link = await lstat(existing).catch(() => undefined);
      if (link?.isSymbolicLink()) {
        throw new PathError("the path passes through a broken symbolic link");
      }
    }
    if (existing === absRoot) return target;
    existing = path.dirname(existing);
    if (!isInside(absRoot, existing)) return target;
  }
}

/*
 * Checks that survive a concurrent swap of a directory for a link: resolveInside looks at
 * the path before the file is opened, and a sandboxed command or a parallel worker could
 * replace a directory by a link to somewhere else right after. So the tools open first and
 * check what they opened: the kernel's name for an open descriptor (/proc/self/fd/<fd>)
 * is where it really is. A file is then created, renamed and deleted through the opened
 * directory's descriptor path, so no path component is looked up again. Where /proc is
 * missing (not Linux), only resolveInside's check applies.
 */
const PROC_FD = "/proc/self/fd";
let procUsable: boolean | undefined;

async function hasProcFd(): Promise<boolean> {
  procUsable ??= await realpath(PROC_FD).then(
    () => true,
    () => false,
  );
  return procUsable;
}

/** Where the descriptor `fd` really is, or undefined without /proc. */
async function fdTarget(fd: number): Promise<string | undefined> {
  if (!(await hasProcFd())) return undefined;
  return readlink(`${PROC_FD}/${fd}`);
}

/** Refuses an opened path outside the real root or inside its .git directory. */
async function checkOpened(root: string, real: string): Promise<void> {
  const realRoot = await realpath(path.resolve(root));
  if (!isInside(realRoot, real))
    throw new PathError("the path leads outside the repository (it changed while in use)");
  if (touchesGit(path.relative(realRoot, real)))
    throw new PathError("the path leads into the .git directory (it changed while in use)");
}

/**
 * Runs `work` with a path prefix for the directory `dir` that is bound to the directory
 * opened and checked here (`/proc/self/fd/<fd>` on Linux), so names joined to it cannot be
 * redirected by swapping a path component for a link meanwhile.
 */
export async function inCheckedDir<T>(
  root: string,
  dir: string,
  work: (dirPath: string) => Promise<T>,
): Promise<T> {
  const handle = await open(dir, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    const real = await fdTarget(handle.fd);
    if (real === undefined) return await work(dir);
    await checkOpened(root, real);
    return await work(`${PROC_FD}/${handle.fd}`);
  } finally {
    await handle.close();
  }
}
