import { execFile } from "node:child_process";
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listRepoFiles } from "../../src/indexer/file-list.js";

/*
 * Which files a working copy holds (src/indexer/file-list.ts): git's own list in a
 * repository, a walk with the `ignore` package elsewhere. The same tree of ignore-rule
 * corners is listed both ways, and both must give what git gives.
 */

const run = promisify(execFile);

async function write(root: string, rel: string, content = "x\n"): Promise<void> {
  await mkdir(path.dirname(path.join(root, rel)), { recursive: true });
  await writeFile(path.join(root, rel), content);
}

/** .gitignore corners a small hand-written matcher tends to get wrong. */
const TREE: Record<string, string> = {
  ".gitignore": [
    "# a comment with [brackets] and a trailing !",
    "*.log",
    "!keep.log",
    "docs/**/draft.md",
    "**/tmp/",
    "\\#hash.txt",
    "\\!bang.txt",
    // Trailing spaces are dropped, unless escaped; a tab is part of the pattern.
    "trail.txt   ",
    "space\\ ",
    "tabbed.txt\t",
    // Two asterisks that are not a whole path segment are one asterisk: no "/" matched.
    "x/a**b.txt",
    "[]x]y.txt",
    "reports/*",
    "!reports/keep.txt",
    // A file inside an ignored directory cannot be re-included.
    "cache/",
    "!cache/wanted.txt",
    "",
  ].join("\n"),
  "lib/.gitignore": "local.ts\n!debug.log\n/anchored.ts\n",
  "app.ts": "",
  "debug.log": "",
  "keep.log": "",
  "docs/draft.md": "",
  "docs/a/b/draft.md": "",
  "docs/guide.md": "",
  "src/tmp/scratch.ts": "",
  "src/tmp.ts": "",
  "#hash.txt": "",
  "!bang.txt": "",
  "trail.txt": "",
  "space ": "",
  "tabbed.txt": "",
  "x/ab.txt": "",
  "x/a/b.txt": "",
  "x/a/c/b.txt": "",
  "ay.txt": "",
  "]y.txt": "",
  "xy.txt": "",
  "reports/gone.txt": "",
  "reports/keep.txt": "",
  "cache/wanted.txt": "",
  "lib/local.ts": "",
  "lib/shared.ts": "",
  "lib/debug.log": "",
  "lib/anchored.ts": "",
  "lib/deeper/anchored.ts": "",
  "lib/deeper/local.ts": "",
  "Upper.LOG": "",
  // Names git would quote without -z.
  "ünïcode.txt": "",
  "with space.txt": "",
  "new\nline.txt": "",
  'quote".txt': "",
};

/** What git lists for TREE (checked below against git itself). */
const EXPECTED = [
  ".gitignore",
  "Upper.LOG",
  "app.ts",
  "ay.txt",
  "docs/guide.md",
  "keep.log",
  "lib/.gitignore",
  "lib/debug.log",
  "lib/deeper/anchored.ts",
  "lib/shared.ts",
  "new\nline.txt",
  "reports/keep.txt",
  'quote".txt',
  "src/tmp.ts",
  "tabbed.txt",
  "with space.txt",
  "x/a/b.txt",
  "x/a/c/b.txt",
  "ünïcode.txt",
];

let plain: string;
let repo: string;
let outside: string;

async function makeTree(root: string): Promise<void> {
  for (const [rel, content] of Object.entries(TREE)) await write(root, rel, content);
  // A link to a directory outside the working copy: listed as an entry, never entered.
  await symlink(outside, path.join(root, "link-out"));
}

beforeAll(async () => {
  outside = await mkdtemp(path.join(os.tmpdir(), "foreman-filelist-outside-"));
  await write(outside, "secret.txt", "not part of the working copy\n");
  plain = await mkdtemp(path.join(os.tmpdir(), "foreman-filelist-plain-"));
  await makeTree(plain);
  repo = await mkdtemp(path.join(os.tmpdir(), "foreman-filelist-git-"));
  await run("git", ["init", "-q", "-b", "main"], { cwd: repo });
  await makeTree(repo);
});

afterAll(async () => {
  for (const dir of [plain, repo, outside]) await rm(dir, { recursive: true, force: true });
});

const sorted = (paths: string[]) => [...paths].sort();

describe("listRepoFiles", () => {
  it("lists a git working copy with git, by git's ignore rules", async () => {
    const listed = await listRepoFiles(repo);
    expect(listed.source).toBe("git");
    expect(sorted(listed.paths)).toEqual(sorted([...EXPECTED, "link-out"]));
  });

  it("walks a folder without .git to the same list, and never through a link", async () => {
    const listed = await listRepoFiles(plain);
    expect(listed.source).toBe("walk");
    expect(sorted(listed.paths)).toEqual(sorted([...EXPECTED, "link-out"]));
  });

  it("expects what git itself lists for the tree", async () => {
    // Plain git, outside the service's helper: the expectation is git's answer, not a guess.
    const { stdout } = await run("git", ["ls-files", "-z", "-co", "--exclude-standard"], {
      cwd: repo,
      env: { ...process.env, GIT_CONFIG_GLOBAL: "/dev/null", HOME: outside },
    });
    expect(sorted(stdout.split("\0").filter(Boolean))).toEqual(sorted([...EXPECTED, "link-out"]));
  });

  it("honours .git/info/exclude and leaves out nested repositories", async () => {
    const copy = await mkdtemp(path.join(os.tmpdir(), "foreman-filelist-exclude-"));
    try {
      await run("git", ["init", "-q", "-b", "main"], { cwd: copy });
      await write(copy, "kept.ts");
      await write(copy, "notes/private.md");
      await write(copy, ".git/info/exclude", "notes/\n");
      await run("git", ["init", "-q", "-b", "main", "inner"], { cwd: copy });
      await write(copy, "inner/file.ts");
      expect(sorted((await listRepoFiles(copy)).paths)).toEqual(["kept.ts"]);
    } finally {
      await rm(copy, { recursive: true, force: true });
    }
  });

  it("does not let the service user's global ignore file hide files", async () => {
    const home = await mkdtemp(path.join(os.tmpdir(), "foreman-filelist-home-"));
    const saved = process.env.HOME;
    try {
      await write(home, ".config/git/ignore", "*.ts\n");
      process.env.HOME = home;
      expect((await listRepoFiles(repo)).paths).toContain("app.ts");
    } finally {
      process.env.HOME = saved;
      await rm(home, { recursive: true, force: true });
    }
  });

  it("walks when .git is a link, and runs no git there", async () => {
    const copy = await mkdtemp(path.join(os.tmpdir(), "foreman-filelist-linked-"));
    try {
      await write(copy, "app.ts");
      await symlink(path.join(repo, ".git"), path.join(copy, ".git"));
      const listed = await listRepoFiles(copy);
      expect(listed.source).toBe("walk");
      expect(listed.paths).toEqual(["app.ts"]);
    } finally {
      await rm(copy, { recursive: true, force: true });
    }
  });
});
