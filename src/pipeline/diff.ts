import { appendFile, mkdir } from "node:fs/promises";
import path from "node:path";
import { runGit } from "../util/git.js";
import { redactText } from "../util/redact.js";
import { readText } from "../workcopy/fs.js";

/** Largest diff stored on a task and sent as the `diff` event. */
const MAX_STORED_DIFF_CHARS = 500_000;

/**
 * Untracked build and install output the setup step and the checks create; excluded locally
 * (never committed) so it cannot end up in a diff. Tracked files are not affected by excludes,
 * so this runs before anything is staged: when the working copy is set up.
 */
const LOCAL_EXCLUDES = [
  "node_modules/",
  "__pycache__/",
  ".pytest_cache/",
  // The setup step's Python venv, and the metadata an editable install leaves in the tree.
  "/.venv/",
  "*.egg-info/",
];

const EXCLUDES_MARK = "# added by foreman";

/** Adds LOCAL_EXCLUDES to the working copy's `.git/info/exclude`, once. */
export async function excludeBuildOutput(workdir: string): Promise<void> {
  const file = path.join(workdir, ".git", "info", "exclude");
  const text = (await readText(workdir, ".git/info/exclude", { maxBytes: 1024 * 1024 })) ?? "";
  if (text.split("\n").includes(EXCLUDES_MARK)) return;
  await mkdir(path.dirname(file), { recursive: true });
  await appendFile(file, `\n${EXCLUDES_MARK}\n${LOCAL_EXCLUDES.join("\n")}\n`);
}

export interface WorkingCopyDiff {
  /** The unified diff against the cloned commit (redacted, cut at `maxChars`). */
  diff: string;
  /** Changed paths, repository-relative. */
  files: string[];
  truncated: boolean;
}

/** Stages every change of the working copy and returns the diff against HEAD. */
export async function workingCopyDiff(
  workdir: string,
  options: { maxChars?: number; signal?: AbortSignal } = {},
): Promise<WorkingCopyDiff> {
  const maxChars = options.maxChars ?? MAX_STORED_DIFF_CHARS;
  const run = (args: string[]) =>
    runGit(args, { cwd: workdir, ...(options.signal ? { signal: options.signal } : {}) });
  await run(["add", "--all"]);
  const names = await run(["diff", "--cached", "--name-only", "-z", "--no-renames"]);
  const files = names.split("\0").filter(Boolean);
  if (files.length === 0) return { diff: "", files, truncated: false };
  const full = redactText(
    await run([
      "diff",
      "--cached",
      "--no-color",
      "--no-ext-diff",
      "--no-textconv",
      "--find-renames",
    ]),
  );
  if (full.length <= maxChars) return { diff: full, files, truncated: false };
  return {
    diff: `${full.slice(0, maxChars)}\n… diff cut: ${full.length - maxChars} more characters (${files.length} files changed)\n`,
    files,
    truncated: true,
  };
}

/**
 * The git tree of the working copy as a commit of it would hold it: every change staged
 * (as workingCopyDiff and PUBLISH stage them), then the index written as a tree object.
 */
export async function stagedTree(workdir: string, signal?: AbortSignal): Promise<string> {
  const run = (args: string[]) => runGit(args, { cwd: workdir, ...(signal ? { signal } : {}) });
  await run(["add", "--all"]);
  return (await run(["write-tree"])).trim();
}

/** The diff for a prompt: cut to `maxChars` with a note, so a huge change cannot fill it. */
export function diffForPrompt(diff: string, maxChars = 60_000): string {
  if (diff.length <= maxChars) return diff;
  return `${diff.slice(0, maxChars)}\n… (the rest of the diff, ${diff.length - maxChars} characters, is cut; read the files for the rest)`;
}
