/*
 * Which files of a working copy exist for the index: what git lists (tracked files and new
 * untracked ones, .gitignore respected), or, outside a git repository, a directory walk that
 * honours .gitignore files with a small matcher of its own.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { listDir, readText } from "../util/workcopy-fs.js";
import { skipDirectory, type SkipReason } from "./skip.js";

const execFileAsync = promisify(execFile);

export interface FileList {
  /** Relative posix paths, unique, in no particular order. */
  paths: string[];
  source: "git" | "walk";
  /** Directories the walk did not enter, by reason (git lists their files instead). */
  prunedDirs: Partial<Record<SkipReason, number>>;
}

/** Lists the files of `root` with git, falling back to a walk when it is not a repository. */
export async function listRepoFiles(root: string): Promise<FileList> {
  const fromGit = await gitFiles(root);
  if (fromGit !== undefined) return { paths: fromGit, source: "git", prunedDirs: {} };
  const prunedDirs: Partial<Record<SkipReason, number>> = {};
  const paths: string[] = [];
  await walk(root, "", [], paths, prunedDirs);
  return { paths, source: "walk", prunedDirs };
}

async function gitFiles(root: string): Promise<string[] | undefined> {
  try {
    const { stdout } = await execFileAsync(
      "git",
      ["ls-files", "-z", "--cached", "--others", "--exclude-standard"],
      { cwd: root, maxBuffer: 512 * 1024 * 1024, encoding: "utf8" },
    );
    // Unmerged files are listed once per stage.
    return [...new Set(stdout.split("\0").filter((p) => p !== ""))];
  } catch (error) {
    const e = error as NodeJS.ErrnoException & { code?: unknown; stderr?: string };
    // No git on the PATH, or not a work tree: walk instead. Anything else is a real failure.
    if (e.code === "ENOENT" && e.path === "git") return undefined;
    if (typeof e.stderr === "string" && /not a git repository/i.test(e.stderr)) return undefined;
    throw error;
  }
}

interface IgnoreRule {
  /** Directory of the .gitignore, relative to the root ("" for the root). */
  base: string;
  pattern: RegExp;
  negate: boolean;
  dirOnly: boolean;
}

async function walk(
  root: string,
  rel: string,
  inherited: IgnoreRule[],
  out: string[],
  pruned: Partial<Record<SkipReason, number>>,
): Promise<void> {
  // Read through util/workcopy-fs.ts: a folder swapped for a link is not walked into.
  const entries = await listDir(root, rel);
  if (typeof entries === "string") return;
  let rules = inherited;
  if (entries.some((e) => e.name === ".gitignore" && e.isFile())) {
    const gitignore = rel === "" ? ".gitignore" : `${rel}/.gitignore`;
    const text = (await readText(root, gitignore, { maxBytes: 1024 * 1024 })) ?? "";
    rules = [...inherited, ...parseGitignore(text, rel)];
  }
  for (const entry of entries) {
    const childRel = rel === "" ? entry.name : `${rel}/${entry.name}`;
    if (entry.isDirectory()) {
      if (entry.name === ".git" || isIgnored(rules, childRel, true)) continue;
      const reason = skipDirectory(entry.name);
      if (reason !== undefined) {
        pruned[reason] = (pruned[reason] ?? 0) + 1;
        continue;
      }
      await walk(root, childRel, rules, out, pruned);
    } else if (!isIgnored(rules, childRel, false)) {
      // Symbolic links are listed too; reading refuses them, like the git path does.
      out.push(childRel);
    }
  }
}

function isIgnored(rules: IgnoreRule[], rel: string, isDir: boolean): boolean {
  let ignored = false;
  for (const rule of rules) {
    if (rule.dirOnly && !isDir) continue;
    const sub = rule.base === "" ? rel : rel.slice(rule.base.length + 1);
    if (rule.pattern.test(sub)) ignored = !rule.negate;
  }
  return ignored;
}

/** The rules of one .gitignore file in directory `base` (common syntax, not every corner). */
export function parseGitignore(text: string, base: string): IgnoreRule[] {
  const rules: IgnoreRule[] = [];
  for (const raw of text.split(/\r?\n/)) {
    let line = raw.replace(/(?<!\\)\s+$/, "");
    if (line === "" || line.startsWith("#")) continue;
    let negate = false;
    if (line.startsWith("!")) {
      negate = true;
      line = line.slice(1);
    } else if (line.startsWith("\\#") || line.startsWith("\\!")) {
      line = line.slice(1);
    }
    let dirOnly = false;
    if (line.endsWith("/")) {
      dirOnly = true;
      line = line.slice(0, -1);
    }
    // A slash at the start or in the middle anchors the pattern to the .gitignore's directory.
    const anchored = line.includes("/");
    if (line.startsWith("/")) line = line.slice(1);
    if (line === "") continue;
    const body = globToRegex(line);
    rules.push({
      base,
      pattern: new RegExp(anchored ? `^${body}$` : `(?:^|/)${body}$`),
      negate,
      dirOnly,
    });
  }
  return rules;
}

function globToRegex(glob: string): string {
  let out = "";
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]!;
    if (c === "*") {
      if (glob[i + 1] === "*") {
        const slashAfter = glob[i + 2] === "/";
        const atStart = i === 0 || glob[i - 1] === "/";
        if (atStart && slashAfter) {
          out += "(?:.*/)?"; // "**/": any number of directories, including none
          i += 2;
        } else {
          out += ".*";
          i += 1;
        }
      } else {
        out += "[^/]*";
      }
    } else if (c === "?") {
      out += "[^/]";
    } else if (c === "[") {
      const close = glob.indexOf("]", i + 1);
      if (close < 0) {
        out += "\\[";
      } else {
        const set = glob
          .slice(i + 1, close)
          .replace(/^!/, "^")
          .replace(/\\/g, "\\\\");
        out += `[${set}]`;
        i = close;
      }
    } else if (c === "\\" && i + 1 < glob.length) {
      out += glob[i + 1]!.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
      i += 1;
    } else {
      out += c.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
    }
  }
  return out;
}
