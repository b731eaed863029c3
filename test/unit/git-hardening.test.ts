import { execFile } from "node:child_process";
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { workingCopyDiff } from "../../src/pipeline/diff.js";
import { runGit, shallowClone } from "../../src/util/git.js";
import { createGitRepo, type GitFixture } from "../helpers/git-repo.js";

/*
 * What a sandboxed command could leave in a working copy's .git: each planted program
 * writes a marker file when it runs. The service's own git (add, diff, commit, reset, clean,
 * push) must run none of them, and must commit the file as it is on disk.
 */

let remote: GitFixture;
let tmp: string;
let markers: string;

beforeAll(async () => {
  remote = await createGitRepo({ "a.txt": "a\n" });
  tmp = await mkdtemp(path.join(os.tmpdir(), "foreman-githard-"));
  markers = path.join(tmp, "markers");
  await mkdir(markers);
});
afterAll(async () => {
  await remote.remove();
  await rm(tmp, { recursive: true, force: true });
});

async function script(file: string, name: string, body = ""): Promise<string> {
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(file, `#!/bin/sh\ntouch '${path.join(markers, name)}'\n${body}`);
  await chmod(file, 0o755);
  return file;
}

const HOOKS = [
  "pre-commit",
  "prepare-commit-msg",
  "commit-msg",
  "post-commit",
  "pre-push",
  "post-checkout",
  "reference-transaction",
  "post-index-change",
  "pre-auto-gc",
];

/** Plants every trick in `clone/.git` and the work tree; answers the planted file's text. */
async function plant(clone: string): Promise<void> {
  const gitDir = path.join(clone, ".git");
  for (const hook of HOOKS) await script(path.join(gitDir, "hooks", hook), `hook-${hook}`);
  const other = path.join(tmp, `other-hooks-${path.basename(clone)}`);
  for (const hook of HOOKS) await script(path.join(other, hook), `hookspath-${hook}`);
  const fsmonitor = await script(path.join(tmp, "fsmonitor.sh"), "fsmonitor");
  const clean = await script(path.join(tmp, "clean.sh"), "filter-clean", "echo FILTERED\n");
  const smudge = await script(path.join(tmp, "smudge.sh"), "filter-smudge", "cat\n");
  const textconv = await script(path.join(tmp, "textconv.sh"), "textconv", 'cat "$1"\n');
  const extdiff = await script(path.join(tmp, "extdiff.sh"), "external-diff");
  const pager = await script(path.join(tmp, "pager.sh"), "pager", "cat\n");
  const helper = await script(path.join(tmp, "helper.sh"), "credential-helper");
  const ssh = await script(path.join(tmp, "ssh.sh"), "ssh-command");
  const included = path.join(tmp, `included-${path.basename(clone)}.config`);
  await writeFile(
    included,
    `[core]\n\thooksPath = ${other}\n[filter "y"]\n\tclean = ${clean}\n\trequired = true\n`,
  );
  await writeFile(
    path.join(gitDir, "config"),
    (await readFile(path.join(gitDir, "config"), "utf8")) +
      [
        "[core]",
        `\tfsmonitor = ${fsmonitor}`,
        `\tpager = ${pager}`,
        `\tsshCommand = ${ssh}`,
        "\tuntrackedCache = true",
        '[filter "x"]',
        `\tclean = ${clean}`,
        `\tsmudge = ${smudge}`,
        "\trequired = true",
        '[diff "x"]',
        `\ttextconv = ${textconv}`,
        "[diff]",
        `\texternal = ${extdiff}`,
        "[credential]",
        `\thelper = ${helper}`,
        "[gc]",
        "\tauto = 1",
        "[include]",
        `\tpath = ${included}`,
        `[includeIf "gitdir:${gitDir}"]`,
        `\tpath = ${included}`,
        "",
      ].join("\n"),
  );
  await mkdir(path.join(gitDir, "info"), { recursive: true });
  await writeFile(path.join(gitDir, "info", "attributes"), "* filter=x diff=x\n");
  await writeFile(path.join(clone, ".gitattributes"), "* filter=x diff=x\n*.y filter=y\n");
}

async function planted(): Promise<string[]> {
  return readdir(markers);
}

describe("the service's git in a working copy a sandboxed command has written to", () => {
  it("control: a plain git in the planted copy does run the planted programs", async () => {
    const clone = path.join(tmp, "control");
    await runPlain(["clone", "-q", remote.dir, clone], tmp);
    await plant(clone);
    await writeFile(path.join(clone, "a.txt"), "x\n");
    const env = {
      ...process.env,
      GIT_AUTHOR_NAME: "t",
      GIT_AUTHOR_EMAIL: "t@e",
      GIT_COMMITTER_NAME: "t",
      GIT_COMMITTER_EMAIL: "t@e",
    };
    await runPlain(["add", "--all"], clone, env);
    await runPlain(["commit", "-q", "-m", "x"], clone, env);
    const seen = await planted();
    expect(seen).toEqual(
      expect.arrayContaining([
        "filter-clean",
        "fsmonitor",
        "hookspath-pre-commit",
        "hookspath-post-commit",
      ]),
    );
    await rm(markers, { recursive: true });
    await mkdir(markers);
  });

  it("runs no hook, fsmonitor, filter, textconv, driver, pager or helper, and commits the raw file", async () => {
    const clone = path.join(tmp, "wc");
    await shallowClone(remote.dir, "main", clone);
    await plant(clone);
    const raw = "the raw content\n";
    await writeFile(path.join(clone, "a.txt"), raw);
    await writeFile(path.join(clone, "b.y"), "y file\n");

    const diff = await workingCopyDiff(clone);
    expect(diff.files.sort()).toEqual([".gitattributes", "a.txt", "b.y"]);
    expect(diff.diff).toContain("+the raw content");
    await runGit(["commit", "-q", "--no-verify", "-m", "change"], { cwd: clone });
    await runGit(["push", "--force", "--quiet", remote.dir, "HEAD:refs/heads/out"], {
      cwd: clone,
    });
    await runGit(["reset", "--hard", "-q"], { cwd: clone });
    await runGit(["clean", "-fdq"], { cwd: clone });
    await runGit(["checkout", "-q", "--detach"], { cwd: clone });

    expect(await planted()).toEqual([]);
    // The pushed commit carries the file as it was on disk, not a filter's output.
    expect(await remote.git("show", "out:a.txt")).toBe(raw);
    expect(await remote.git("show", "out:b.y")).toBe("y file\n");

    // What is left of .git: an allowlisted config, no hooks, no info/attributes.
    const config = await readFile(path.join(clone, ".git", "config"), "utf8");
    expect(config).not.toMatch(/filter|include|fsmonitor|pager|helper|external|textconv|ssh/i);
    expect(config).toMatch(/repositoryformatversion = 0/);
    await expect(readdir(path.join(clone, ".git", "hooks"))).rejects.toThrow(/ENOENT/);
    await expect(readFile(path.join(clone, ".git", "info", "attributes"))).rejects.toThrow(
      /ENOENT/,
    );
  });

  it("cleans the config again after a later write, before the next call", async () => {
    const clone = path.join(tmp, "wc2");
    await shallowClone(remote.dir, "main", clone);
    await runGit(["status", "--porcelain"], { cwd: clone }); // config now in the written form
    await plant(clone); // a second write after the service's first call
    await writeFile(path.join(clone, "a.txt"), "second\n");
    await runGit(["add", "--all"], { cwd: clone });
    await runGit(["commit", "-q", "--no-verify", "-m", "c"], { cwd: clone });
    expect(await planted()).toEqual([]);
    expect(await runGit(["show", "HEAD:a.txt"], { cwd: clone })).toBe("second\n");
  });

  it("refuses a .git replaced by a link or a gitdir file, and removes linked .git/info", async () => {
    const clone = path.join(tmp, "wc3");
    await shallowClone(remote.dir, "main", clone);
    const elsewhere = path.join(tmp, "elsewhere");
    await mkdir(elsewhere);
    // .git/info as a link to outside: removed, not followed.
    await rm(path.join(clone, ".git", "info"), { recursive: true, force: true });
    await writeFile(path.join(elsewhere, "attributes"), "keep me\n");
    await symlink(elsewhere, path.join(clone, ".git", "info"));
    await runGit(["status"], { cwd: clone });
    expect(await readFile(path.join(elsewhere, "attributes"), "utf8")).toBe("keep me\n");

    await rm(path.join(clone, ".git"), { recursive: true, force: true });
    await writeFile(path.join(clone, ".git"), `gitdir: ${remote.dir}/.git\n`);
    await expect(runGit(["status"], { cwd: clone })).rejects.toThrow(/no \.git directory/);
    await rm(path.join(clone, ".git"));
    await symlink(path.join(remote.dir, ".git"), path.join(clone, ".git"));
    await expect(runGit(["add", "--all"], { cwd: clone })).rejects.toThrow(/no \.git directory/);
    expect(await planted()).toEqual([]);
  });
});

async function runPlain(
  args: string[],
  cwd: string,
  env: NodeJS.ProcessEnv = process.env,
): Promise<string> {
  return (await promisify(execFile)("git", args, { cwd, env })).stdout;
}
