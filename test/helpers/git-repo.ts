import { execFile } from "node:child_process";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

export interface GitFixture {
  /** The repository's folder, usable as a clone URL. */
  dir: string;
  git(...args: string[]): Promise<string>;
  remove(): Promise<void>;
}

/** A real git repository in a temporary folder with `files` committed on `branch`. */
export async function createGitRepo(
  files: Record<string, string>,
  branch = "main",
): Promise<GitFixture> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "foreman-repo-"));
  const git = async (...args: string[]) =>
    (
      await run("git", ["-c", "user.email=t@example.com", "-c", "user.name=t", ...args], {
        cwd: dir,
      })
    ).stdout;
  await git("init", "-q", "-b", branch);
  for (const [file, content] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(dir, file)), { recursive: true });
    await writeFile(path.join(dir, file), content);
  }
  await git("add", "-A");
  await git("commit", "-q", "-m", "initial");
  return { dir, git, remove: () => rm(dir, { recursive: true, force: true }) };
}

let placeholder: Promise<string> | undefined;

/**
 * A real, empty git repository for tests whose workspace is never cloned (tasks that stay
 * queued, automations, quotas): POST /workspaces checks that a local path is a repository.
 * One per test process, made on first use.
 */
export function placeholderRepo(): Promise<string> {
  placeholder ??= (async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "foreman-placeholder-"));
    await run("git", ["init", "-q", "-b", "main"], { cwd: dir });
    return dir;
  })();
  return placeholder;
}
