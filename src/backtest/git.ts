import { execFile } from "node:child_process";
import { mkdir, rm } from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";
import { removeFile } from "../workcopy/fs.js";

const run = promisify(execFile);

/*
 * Git for the backtest harness, on its own mirror of the repository (never the operator's
 * checkout): hooks and fsmonitor are off, so nothing the repository configures runs here.
 */

const SAFE = [
  "-c",
  "core.hooksPath=/dev/null",
  "-c",
  "core.fsmonitor=false",
  "-c",
  "protocol.file.allow=always",
];

/** Runs git in `cwd`; resolves stdout. */
export async function git(
  cwd: string,
  args: string[],
  maxBuffer = 64 * 1024 * 1024,
): Promise<string> {
  const { stdout } = await run("git", [...SAFE, ...args], {
    cwd,
    maxBuffer,
    env: { ...process.env, GIT_TERMINAL_PROMPT: "0", GIT_CONFIG_NOSYSTEM: "1" },
  });
  return stdout;
}

/*
 * Worktree changes of a repository, one at a time (per process): `git worktree prune` removes
 * `.git/worktrees` once it is empty, and a `worktree add` of the same repository beside it
 * then fails ("could not create directory of 'worktrees/…'"), as validating a case's parent
 * and commit at once did in a full CI run.
 */
const worktreeTurns = new Map<string, Promise<unknown>>();

function inTurn<T>(repo: string, work: () => Promise<T>): Promise<T> {
  const run = (worktreeTurns.get(repo) ?? Promise.resolve()).then(work, work);
  const settled = run.catch(() => undefined);
  worktreeTurns.set(repo, settled);
  void settled.then(() => {
    if (worktreeTurns.get(repo) === settled) worktreeTurns.delete(repo);
  });
  return run;
}

/** A detached worktree of `repo` at `commit` in `dir` (replaced if it exists). */
export async function addWorktree(repo: string, dir: string, commit: string): Promise<void> {
  await removeWorktree(repo, dir);
  await mkdir(path.dirname(dir), { recursive: true });
  await inTurn(repo, () =>
    git(repo, ["worktree", "add", "--detach", "--force", "--quiet", dir, commit]),
  );
}

export async function removeWorktree(repo: string, dir: string): Promise<void> {
  await inTurn(repo, () => git(repo, ["worktree", "remove", "--force", dir]).catch(() => ""));
  await rm(dir, { recursive: true, force: true });
  await inTurn(repo, () => git(repo, ["worktree", "prune"]).catch(() => ""));
}

/**
 * Lays the commit's versions of `files` over the working tree `dir` (a file the commit
 * deleted is removed): the commit's tests over another tree. The tree's own history can put a
 * link where another commit had a folder: a removal never goes through a link (git's
 * checkout never writes through one either).
 */
export async function overlayFiles(dir: string, commit: string, files: string[]): Promise<void> {
  for (const file of files) {
    const present = await git(dir, ["cat-file", "-e", `${commit}:${file}`]).then(
      () => true,
      () => false,
    );
    if (present) await git(dir, ["checkout", commit, "--", file]);
    else await removeFile(dir, file);
  }
}
