import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { redactText } from "./redact.js";

/*
 * git as a child process. The environment is built from scratch (no service secrets, no
 * prompts for credentials, no user or system config that could run hooks or helpers), and
 * every error message is redacted, because remotes can carry tokens.
 */

export class GitError extends Error {
  constructor(
    message: string,
    readonly stderr: string,
  ) {
    super(message);
    this.name = "GitError";
  }
}

/** The environment git runs with: enough to work, nothing of the service's own. */
function gitEnv(): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin",
    HOME: process.env.HOME ?? "/tmp",
    LANG: "C",
    GIT_TERMINAL_PROMPT: "0",
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_CONFIG_GLOBAL: "/dev/null",
    GIT_ASKPASS: "/bin/false",
    SSH_ASKPASS: "/bin/false",
    GIT_SSH_COMMAND: "ssh -o BatchMode=yes -o StrictHostKeyChecking=accept-new",
    GIT_AUTHOR_NAME: "foreman",
    GIT_AUTHOR_EMAIL: "foreman@localhost",
    GIT_COMMITTER_NAME: "foreman",
    GIT_COMMITTER_EMAIL: "foreman@localhost",
  };
}

/** Runs git with `args` in `cwd`; resolves stdout, rejects a GitError with redacted stderr. */
export function runGit(
  args: string[],
  options: { cwd: string; timeoutMs?: number; signal?: AbortSignal },
): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      "git",
      args,
      {
        cwd: options.cwd,
        env: gitEnv(),
        timeout: options.timeoutMs ?? 300_000,
        maxBuffer: 64 * 1024 * 1024,
        signal: options.signal,
      },
      (error, stdout, stderr) => {
        if (!error) return resolve(stdout);
        const detail = redactText(String(stderr || error.message).trim()).slice(-2000);
        reject(new GitError(`git ${redactText(args[0] ?? "")} failed: ${detail}`, detail));
      },
    );
  });
}

const SHA = /^[0-9a-f]{40}$/;

/**
 * The commit HEAD points at, read from `.git` directly (HEAD, then the loose ref, then
 * packed-refs): on the pipeline's path it saves a git process per call, which costs more than
 * the read on a loaded machine. Anything unusual (another object format, a missing ref) asks
 * `git rev-parse HEAD` instead.
 */
export async function headCommit(cwd: string): Promise<string> {
  const gitDir = path.join(cwd, ".git");
  const read = (file: string) =>
    readFile(path.join(gitDir, file), "utf8").then(
      (text) => text,
      () => "",
    );
  const head = (await read("HEAD")).trim();
  if (SHA.test(head)) return head;
  const ref = /^ref: (refs\/[^\s]+)$/.exec(head)?.[1];
  if (ref && !ref.split("/").includes("..")) {
    const loose = (await read(ref)).trim();
    if (SHA.test(loose)) return loose;
    for (const line of (await read("packed-refs")).split("\n")) {
      const [sha, name] = line.trim().split(" ");
      if (name === ref && sha && SHA.test(sha)) return sha;
    }
  }
  return (await runGit(["rev-parse", "HEAD"], { cwd })).trim();
}

/**
 * A shallow clone of one branch into `dir` (which must not exist yet); without a branch
 * (null or empty), of the remote's HEAD, i.e. its default branch.
 */
export async function shallowClone(
  url: string,
  branch: string | null,
  dir: string,
  options: { timeoutMs?: number; signal?: AbortSignal } = {},
): Promise<void> {
  await runGit(
    [
      "clone",
      "--depth",
      "1",
      "--single-branch",
      ...(branch ? ["--branch", branch] : []),
      "--no-tags",
      "--",
      url,
      dir,
    ],
    { cwd: process.cwd(), ...options },
  );
}
