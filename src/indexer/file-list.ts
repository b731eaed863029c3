/*
 * Which files of a working copy exist for the index: what git lists (tracked files and new
 * untracked ones, with git's own ignore rules), or, when the folder has no `.git` directory
 * of its own, a directory walk that honours its .gitignore files.
 */
import { setImmediate as nextTurn } from "node:timers/promises";
import ignore, { type Ignore } from "ignore";
import { GitError, runGit } from "../util/git.js";
import { entryInfo, listDir, readText } from "../workcopy/fs.js";
import { skipDirectory, type SkipReason } from "./skip.js";

export interface FileList {
  /** Relative posix paths, unique, in no particular order. */
  paths: string[];
  source: "git" | "walk";
  /** Directories the walk did not enter, by reason (git lists their files instead). */
  prunedDirs: Partial<Record<SkipReason, number>>;
}

/**
 * Lists the files of `root` with git when it has a `.git` directory, otherwise (a plain
 * folder, or a `.git` replaced by a link or a file, where the service runs no git) by a walk.
 */
export async function listRepoFiles(root: string): Promise<FileList> {
  const fromGit = await gitFiles(root);
  if (fromGit !== undefined) return { paths: fromGit, source: "git", prunedDirs: {} };
  const prunedDirs: Partial<Record<SkipReason, number>> = {};
  const paths: string[] = [];
  await walk(root, "", [], paths, prunedDirs);
  return { paths, source: "walk", prunedDirs };
}

/*
 * `git ls-files` gives git's exact ignore semantics (negation, `**`, escapes, nested
 * .gitignore files, .git/info/exclude) for free, and git is needed anyway. It runs through
 * runGit, which rewrites `.git/config` and sets the hardening flags first: a working copy's
 * `.git` is writable by the repository's own commands, and listing untracked files would
 * otherwise consult whatever core.fsmonitor they put there. core.excludesFile is emptied so
 * that the service user's ~/.config/git/ignore does not hide a repository's files.
 */
async function gitFiles(root: string): Promise<string[] | undefined> {
  const dotGit = await entryInfo(root, ".git");
  if (dotGit?.type !== "directory") return undefined;
  let stdout: string;
  try {
    stdout = await runGit(["ls-files", "-z", "--cached", "--others", "--exclude-standard"], {
      cwd: root,
      config: ["-c", "core.excludesFile=/dev/null"],
    });
  } catch (error) {
    // A `.git` directory that holds no repository: walk instead. Anything else is a failure.
    if (error instanceof GitError && /not a git repository/i.test(error.stderr)) return undefined;
    throw error;
  }
  // Unmerged files are listed once per stage; a nested repository is listed as "dir/".
  return [...new Set(stdout.split("\0").filter((p) => p !== "" && !p.endsWith("/")))];
}

/** The rules of one .gitignore file, and the directory (relative, "" for the root) it is in. */
interface IgnoreScope {
  base: string;
  rules: Ignore;
}

/*
 * The `ignore` package tests a path against every rule, about 2 µs a rule: a repository's
 * setup can remove `.git` and leave a 1 MiB .gitignore (58,000 rules, 130 ms a path), so
 * only the first GITIGNORE_MAX_BYTES of each are read, and the walk lets the event loop run
 * every WALK_SLICE_MS (issue #40).
 */
const GITIGNORE_MAX_BYTES = 32 * 1024;
const WALK_SLICE_MS = 10;

async function walk(
  root: string,
  rel: string,
  inherited: IgnoreScope[],
  out: string[],
  pruned: Partial<Record<SkipReason, number>>,
): Promise<void> {
  // Read through workcopy/fs.ts: a folder swapped for a link is not walked into, and
  // dirents carry lstat's types, so a link to a directory is not entered either.
  const entries = await listDir(root, rel);
  if (typeof entries === "string") return;
  let scopes = inherited;
  if (entries.some((e) => e.name === ".gitignore" && e.isFile())) {
    const gitignore = rel === "" ? ".gitignore" : `${rel}/.gitignore`;
    const text =
      (await readText(root, gitignore, { maxBytes: GITIGNORE_MAX_BYTES, partial: true })) ?? "";
    // Case-sensitive, as git is by default (core.ignorecase false) on Linux.
    scopes = [...inherited, { base: rel, rules: ignore({ ignorecase: false }).add(text) }];
  }
  let slice = performance.now();
  for (const entry of entries) {
    if (performance.now() - slice > WALK_SLICE_MS) {
      await nextTurn();
      slice = performance.now();
    }
    // Whatever `.git` is (a directory, a link, a `gitdir:` file), it is not the repository's.
    if (entry.name === ".git") continue;
    const childRel = rel === "" ? entry.name : `${rel}/${entry.name}`;
    if (entry.isDirectory()) {
      if (isIgnored(scopes, childRel, true)) continue;
      const reason = skipDirectory(entry.name);
      if (reason !== undefined) {
        pruned[reason] = (pruned[reason] ?? 0) + 1;
        continue;
      }
      await walk(root, childRel, scopes, out, pruned);
    } else if (!isIgnored(scopes, childRel, false)) {
      // Symbolic links are listed too; reading refuses them, like the git path does.
      out.push(childRel);
    }
  }
}

/**
 * Git's precedence across .gitignore files: the deepest file with a rule that matches
 * decides; within one file the last matching rule does (the `ignore` package's test()).
 * Parent directories need no check here, because the walk does not enter ignored ones.
 */
function isIgnored(scopes: IgnoreScope[], rel: string, isDir: boolean): boolean {
  for (let i = scopes.length - 1; i >= 0; i--) {
    const { base, rules } = scopes[i]!;
    const sub = base === "" ? rel : rel.slice(base.length + 1);
    const result = rules.test(isDir ? `${sub}/` : sub);
    if (result.ignored) return true;
    if (result.unignored) return false;
  }
  return false;
}
