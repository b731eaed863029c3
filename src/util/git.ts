import { execFile } from "./launcher.js";
import { randomBytes } from "node:crypto";
import { lstat, readFile, rename, rm, writeFile } from "node:fs/promises";
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
    // No system-wide gitattributes, and no refs/replace substitution of what is committed.
    GIT_ATTR_NOSYSTEM: "1",
    GIT_NO_REPLACE_OBJECTS: "1",
    GIT_ASKPASS: "/bin/false",
    SSH_ASKPASS: "/bin/false",
    // The environment wins over core.sshCommand in any config file.
    GIT_SSH_COMMAND: "ssh -o BatchMode=yes -o StrictHostKeyChecking=accept-new",
    GIT_AUTHOR_NAME: "foreman",
    GIT_AUTHOR_EMAIL: "foreman@localhost",
    GIT_COMMITTER_NAME: "foreman",
    GIT_COMMITTER_EMAIL: "foreman@localhost",
  };
}

/*
 * Why the service's git cannot run repository-controlled code
 * ------------------------------------------------------------
 * A working copy's `.git` is reachable by code the service runs for the repository
 * (verification commands, run_command, health-scan tests). Whatever that code writes there
 * must not turn into a program the service's own git runs outside the sandbox: hooks,
 * core.fsmonitor, filter.<x>.clean/smudge (named by any .gitattributes), diff textconv and
 * external drivers, core.pager, credential helpers, url.<x>.insteadOf, include.path,
 * remote.<url>.receivepack, core.sshCommand and whatever a later git version adds.
 *
 * Overriding known keys on the command line cannot be enough (filter and diff driver names
 * cannot be enumerated, include.path pulls in any file), so before every git call in a
 * working copy the service REWRITES `.git/config` from an allowlist: only a few core
 * layout keys and extensions.objectformat survive (read with git's own parser, includes not
 * followed); everything else (remotes, branches, includes, drivers) goes. The service needs
 * nothing else: it pushes to an explicit URL and reads HEAD itself. It also deletes the
 * other files git would read code or content from: `.git/hooks`, `info/attributes`,
 * `info/grafts`, `commondir`, `config.worktree` and object alternates, and refuses a `.git`
 * that is not a real directory (a link or a `gitdir:` file would move all of this
 * elsewhere). The `-c` overrides below (command-line config beats every file) remain as a
 * second line for the keys that matter most, and also cover `git clone`, whose new
 * repository has no config yet.
 */
const HARDENING: string[] = [
  "core.hooksPath=/dev/null",
  "core.fsmonitor=false",
  "core.untrackedCache=false",
  "core.pager=cat",
  "core.attributesFile=/dev/null",
  // An empty value resets the helper list, so no helper from any file runs.
  "credential.helper=",
  "protocol.ext.allow=never",
  // A redirect could bounce an https remote to a loopback or private address.
  "http.followRedirects=false",
  "commit.gpgSign=false",
  "tag.gpgSign=false",
  "submodule.recurse=false",
  // No background or automatic gc/maintenance in working copies (a forked process that
  // outlives the call, and load on a shared machine).
  "gc.auto=0",
  "maintenance.auto=false",
].flatMap((setting) => ["-c", setting]);

/** Keys of `.git/config` kept by the rewrite (git prints them lower-cased). */
const KEPT_KEYS = new Set([
  "core.repositoryformatversion",
  "core.filemode",
  "core.logallrefupdates",
  "core.ignorecase",
  "core.precomposeunicode",
  "core.symlinks",
  "extensions.objectformat",
]);

/** Files in `.git` that name code, other object stores or other config; removed each time. */
const REMOVED_FILES = [
  "info/attributes",
  "info/grafts",
  "commondir",
  "config.worktree",
  "objects/info/alternates",
  "objects/info/http-alternates",
];

/** The config text last written per working copy, so an unchanged one is not parsed again. */
const written = new Map<string, string>();

function execGit(
  args: string[],
  options: { cwd: string; timeoutMs?: number | undefined; signal?: AbortSignal | undefined },
): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      "git",
      [...HARDENING, ...args],
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

/** The allowlisted part of a git config file, in git's config syntax. */
async function allowedConfig(file: string): Promise<string> {
  let listed = "";
  try {
    listed = await execGit(["config", "--file", file, "--no-includes", "--list", "-z"], {
      cwd: "/",
      timeoutMs: 30_000,
    });
  } catch {
    // Unparseable: nothing of it is kept; git then works with the defaults.
  }
  const core = new Map<string, string>([["bare", "false"]]);
  const extensions = new Map<string, string>();
  for (const entry of listed.split("\0")) {
    const newline = entry.indexOf("\n");
    const key = newline < 0 ? entry : entry.slice(0, newline);
    const value = newline < 0 ? "true" : entry.slice(newline + 1);
    if (!KEPT_KEYS.has(key) || !/^[A-Za-z0-9._-]{1,40}$/.test(value)) continue;
    const [section, name] = key.split(".") as [string, string];
    (section === "core" ? core : extensions).set(name, value);
  }
  const lines = ["[core]", ...[...core].map(([k, v]) => `\t${k} = ${v}`)];
  if (extensions.size)
    lines.push("[extensions]", ...[...extensions].map(([k, v]) => `\t${k} = ${v}`));
  return `${lines.join("\n")}\n`;
}

async function removeLinkOrFile(file: string): Promise<void> {
  await rm(file, { force: true, recursive: true });
}

/**
 * Makes `workdir/.git` safe for the service's own git (see the comment above HARDENING) and
 * answers the git directory; a GitError when `.git` is not a real directory.
 */
export async function sanitizeGitDir(workdir: string): Promise<string> {
  const gitDir = path.join(path.resolve(workdir), ".git");
  const stat = await lstat(gitDir).catch(() => undefined);
  if (!stat?.isDirectory())
    throw new GitError(
      `${workdir} has no .git directory (missing, or replaced by a link or a file); the service will not run git there.`,
      "",
    );
  // Directories that must be real directories inside .git: a link is removed (not followed).
  for (const dir of ["info", "objects", "objects/info", "refs"]) {
    const entry = await lstat(path.join(gitDir, dir)).catch(() => undefined);
    if (entry && !entry.isDirectory()) await removeLinkOrFile(path.join(gitDir, dir));
  }
  await removeLinkOrFile(path.join(gitDir, "hooks"));
  for (const file of REMOVED_FILES) await removeLinkOrFile(path.join(gitDir, file));

  const configFile = path.join(gitDir, "config");
  const configStat = await lstat(configFile).catch(() => undefined);
  const current = configStat?.isFile() ? await readFile(configFile, "utf8") : undefined;
  if (current === undefined || current !== written.get(gitDir)) {
    const clean = await allowedConfig(configStat?.isFile() ? configFile : "/dev/null");
    // A fresh file renamed over the old entry: never written through a link, and a call
    // running at the same time sees either the old or the new file.
    const temp = `${configFile}.foreman-${randomBytes(6).toString("hex")}`;
    await writeFile(temp, clean, { flag: "wx", mode: 0o644 });
    await rename(temp, configFile).catch(async (error: unknown) => {
      await rm(temp, { force: true });
      throw error;
    });
    written.set(gitDir, clean);
  }
  return gitDir;
}

/**
 * Runs git with `args` in the working copy `cwd` (after sanitizeGitDir, with an explicit
 * git directory and work tree, so nothing is discovered elsewhere); resolves stdout, rejects
 * a GitError with redacted stderr.
 */
export async function runGit(
  args: string[],
  options: { cwd: string; timeoutMs?: number; signal?: AbortSignal; config?: string[] },
): Promise<string> {
  const workdir = path.resolve(options.cwd);
  const gitDir = await sanitizeGitDir(workdir).catch((error: unknown) => {
    const message = error instanceof Error ? error.message : String(error);
    throw new GitError(`git ${redactText(args[0] ?? "")} failed: ${message}`, message);
  });
  return execGit(
    [...(options.config ?? []), `--git-dir=${gitDir}`, `--work-tree=${workdir}`, ...args],
    {
      ...options,
      cwd: workdir,
    },
  );
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
 * The branch a remote's HEAD names (`git ls-remote --symref <url> HEAD`), or null when it
 * names none. Runs outside any repository (cwd "/"): never in the service's own checkout,
 * whose `.git` runGit would rewrite.
 */
export async function remoteHead(
  url: string,
  options: { timeoutMs?: number; config?: string[] } = {},
): Promise<string | null> {
  const out = await execGit(
    [...(options.config ?? []), "ls-remote", "--symref", "--", url, "HEAD"],
    { cwd: "/", timeoutMs: options.timeoutMs },
  );
  return /^ref: refs\/heads\/(\S+)\s+HEAD$/m.exec(out)?.[1] ?? null;
}

/**
 * A shallow clone of one branch into `dir` (which must not exist yet); without a branch
 * (null or empty), of the remote's HEAD, i.e. its default branch.
 */
export async function shallowClone(
  url: string,
  branch: string | null,
  dir: string,
  options: { timeoutMs?: number; signal?: AbortSignal; config?: string[] } = {},
): Promise<void> {
  // Not in a working copy: git's cwd is "/", so no repository around it is discovered.
  await execGit(
    [
      ...(options.config ?? []),
      "clone",
      "--depth",
      "1",
      "--single-branch",
      ...(branch ? ["--branch", branch] : []),
      "--no-tags",
      "--",
      url,
      path.resolve(dir),
    ],
    { cwd: "/", ...options },
  );
  // The clone's own config is trusted, but written in the allowlisted form from the start.
  await sanitizeGitDir(dir);
}
