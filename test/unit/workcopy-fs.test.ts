import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  exists,
  isDirectory,
  isFile,
  readJson,
  readReport,
  readText,
} from "../../src/ecosystems/kit.js";
import { python } from "../../src/ecosystems/python.js";
import { readRepoFiles } from "../../src/health/files.js";
import { listRepoFiles } from "../../src/indexer/file-list.js";
import { buildIndex } from "../../src/indexer/index.js";
import { planningContext } from "../../src/indexer/planning-context.js";
import { readBounded, readBoundedSync } from "../../src/indexer/read-files.js";
import { repoMap } from "../../src/indexer/repo-map.js";
import { readRepositoryInstructions } from "../../src/pipeline/prompts.js";
import { createReadTools } from "../../src/tools/read-tools.js";
import { createWriteTools } from "../../src/tools/write-tools.js";
import type { ExecutableTool } from "../../src/llm/types.js";
import {
  entryInfo,
  exists as existsInside,
  listDir,
  pathParts,
  readBytes,
  readBytesSync,
  readText as readTextInside,
  readTextSync,
} from "../../src/workcopy/fs.js";

/*
 * The one reader of working copies (src/workcopy/fs.ts) and every host-side reader that
 * goes through it: a file or folder of the working copy that is, or becomes, a symbolic link
 * to something of the host's is never followed, so the marker planted outside never comes
 * back from any of them.
 */

const exec = promisify(execFile);
const MARKER = `outside-secret-${randomBytes(8).toString("hex")}`;

let base: string;
let outside: string;
let root: string;

async function put(rel: string, content: string): Promise<void> {
  await mkdir(path.dirname(path.join(root, rel)), { recursive: true });
  await writeFile(path.join(root, rel), content);
}

/** Replaces the file `rel` of the working copy by a link to `target`, as `ln -sf` would. */
async function swapForLink(rel: string, target: string): Promise<void> {
  await rm(path.join(root, rel), { recursive: true, force: true });
  await symlink(target, path.join(root, rel));
}

function toolsOf(tools: ExecutableTool[]): Map<string, ExecutableTool> {
  return new Map(tools.map((tool) => [tool.name, tool]));
}

async function call(tools: Map<string, ExecutableTool>, name: string, args: unknown) {
  const tool = tools.get(name)!;
  return tool.execute(tool.input.parse(args));
}

beforeAll(async () => {
  base = await mkdtemp(path.join(os.tmpdir(), "foreman-workcopy-fs-"));
  outside = path.join(base, "outside");
  await mkdir(path.join(outside, "dir"), { recursive: true });
  await writeFile(path.join(outside, "secret.txt"), `helper ${MARKER}\n`);
  await writeFile(path.join(outside, "dir", "helper.js"), `export const helper = "${MARKER}";\n`);
  await writeFile(path.join(outside, "dir", "test_leak.py"), `# ${MARKER}\n`);
  await writeFile(
    path.join(outside, "dir", "coverage-summary.json"),
    JSON.stringify({ total: { lines: { total: 1, covered: 1, pct: 100 } }, marker: MARKER }),
  );
});

afterAll(async () => {
  await rm(base, { recursive: true, force: true });
});

beforeEach(async () => {
  root = await mkdtemp(path.join(base, "repo-"));
  await put("src/helper.js", "export function helper() {\n  return 1;\n}\n");
  await put("src/nested/deep.js", "export const deep = 2;\n");
  await put("README.md", "# repo\n");
});

describe("workcopy-fs", () => {
  it("reads regular files, whole, cut or refused when too large", async () => {
    expect((await readBytes(root, "src/helper.js", { maxBytes: 1024 }))?.toString()).toContain(
      "function helper",
    );
    expect(readTextSync(root, "./src//nested/deep.js", { maxBytes: 1024 })).toBe(
      "export const deep = 2;\n",
    );
    expect(await readBytes(root, "src/helper.js", { maxBytes: 4 })).toBe("too-large");
    expect(await readTextInside(root, "src/helper.js", { maxBytes: 6, partial: true })).toBe(
      "export",
    );
    const scratch = { buffer: Buffer.alloc(2) };
    const bytes = readBytesSync(root, "README.md", { maxBytes: 1024, scratch });
    expect(Buffer.isBuffer(bytes) && bytes.toString()).toBe("# repo\n");
    expect(scratch.buffer.length).toBeGreaterThanOrEqual(7);
    expect(await readBytes(root, "src/missing.js", { maxBytes: 1024 })).toBe("missing");
    expect(await readBytes(root, "src/helper.js/x", { maxBytes: 1024 })).toBe("missing");
    expect(await readBytes(root, "src", { maxBytes: 1024 })).toBe("not-a-file");
  });

  it("refuses a file that is a link to a file outside", async () => {
    await swapForLink("src/helper.js", path.join(outside, "secret.txt"));
    expect(await readBytes(root, "src/helper.js", { maxBytes: 1024 })).toBe("symlink");
    expect(readBytesSync(root, "src/helper.js", { maxBytes: 1024 })).toBe("symlink");
    expect(await entryInfo(root, "src/helper.js")).toMatchObject({ type: "symlink" });
    // A link is something: existence is told without following it.
    expect(await existsInside(root, "src/helper.js")).toBe(true);
  });

  it("refuses a folder on the way that is a link to a folder outside", async () => {
    await swapForLink("src", path.join(outside, "dir"));
    expect(await readBytes(root, "src/helper.js", { maxBytes: 1024 })).toBe("symlink");
    expect(readBytesSync(root, "src/helper.js", { maxBytes: 1024 })).toBe("symlink");
    expect(await entryInfo(root, "src/helper.js")).toBeUndefined();
    expect(await existsInside(root, "src/test_leak.py")).toBe(false);
    expect(await listDir(root, "src")).toBe("symlink");
    // Deeper: a link in the middle of a longer path.
    await put("a/b/c.txt", "c\n");
    await swapForLink("a/b", path.join(outside, "dir"));
    expect(await readBytes(root, "a/b/helper.js", { maxBytes: 1024 })).toBe("symlink");
  });

  it("refuses a file swapped for a link after it was listed", async () => {
    const listed = await listDir(root, "src");
    expect(Array.isArray(listed) && listed.map((d) => d.name).sort()).toEqual([
      "helper.js",
      "nested",
    ]);
    await swapForLink("src/helper.js", path.join(outside, "secret.txt"));
    await swapForLink("src/nested", path.join(outside, "dir"));
    expect(await readBytes(root, "src/helper.js", { maxBytes: 1024 })).toBe("symlink");
    expect(await readBytes(root, "src/nested/helper.js", { maxBytes: 1024 })).toBe("symlink");
    const again = await listDir(root, "src");
    expect(Array.isArray(again) && again.find((d) => d.name === "nested")?.isSymbolicLink()).toBe(
      true,
    );
  });

  it("refuses a link to /proc/self/environ", async () => {
    await swapForLink("src/helper.js", "/proc/self/environ");
    await symlink("/proc/self", path.join(root, "proc"));
    for (const rel of ["src/helper.js", "proc/environ"]) {
      const bytes = await readBytes(root, rel, { maxBytes: 1 << 20 });
      expect(bytes, rel).toBe("symlink");
    }
  });

  it("refuses a FIFO at once instead of hanging", async () => {
    await exec("mkfifo", [path.join(root, "src/pipe.js")]);
    const started = Date.now();
    expect(await readBytes(root, "src/pipe.js", { maxBytes: 1024 })).toBe("not-a-file");
    expect(readBytesSync(root, "src/pipe.js", { maxBytes: 1024 })).toBe("not-a-file");
    expect(await entryInfo(root, "src/pipe.js")).toMatchObject({ type: "other" });
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it("refuses links that stay inside the working copy too (their targets are read by name)", async () => {
    await symlink("helper.js", path.join(root, "src/alias.js"));
    await symlink("src/nested", path.join(root, "nested-alias"));
    expect(await readBytes(root, "src/alias.js", { maxBytes: 1024 })).toBe("symlink");
    expect(await readBytes(root, "nested-alias/deep.js", { maxBytes: 1024 })).toBe("symlink");
    expect(await readTextInside(root, "src/nested/deep.js", { maxBytes: 1024 })).toBe(
      "export const deep = 2;\n",
    );
  });

  it("refuses '..', absolute paths and NUL bytes before opening anything", async () => {
    await writeFile(path.join(base, "beside.txt"), MARKER);
    for (const rel of [
      "../beside.txt",
      "src/../../beside.txt",
      "src/../README.md",
      path.join(base, "beside.txt"),
      "/etc/hostname",
      "src/a\0b",
    ])
      expect(await readBytes(root, rel, { maxBytes: 1024 }), rel).toBe("invalid-path");
    expect(await readBytes(root, "", { maxBytes: 1024 })).toBe("invalid-path");
    expect(await listDir(root, "..")).toBe("invalid-path");
    expect(await entryInfo(root, "../beside.txt")).toBeUndefined();
    expect(pathParts("./a//b/./c")).toEqual(["a", "b", "c"]);
    expect(pathParts("a/../b")).toBeUndefined();
  });
});

/** A working copy as a hostile command leaves it, for every reader below. */
async function poison(): Promise<void> {
  await swapForLink("src/helper.js", path.join(outside, "secret.txt"));
  await swapForLink("src/nested", path.join(outside, "dir"));
  await symlink(path.join(outside, "secret.txt"), path.join(root, "AGENTS.md"));
  await symlink("/proc/self/environ", path.join(root, "CLAUDE.md"));
  await symlink(path.join(outside, "dir"), path.join(root, "tests"));
  await symlink(path.join(outside, "dir"), path.join(root, ".foreman-coverage"));
  await symlink(path.join(outside, "secret.txt"), path.join(root, "package.json"));
  await symlink(path.join(outside, "secret.txt"), path.join(root, "cover.out"));
}

async function gitInit(): Promise<void> {
  const git = (...args: string[]) => exec("git", args, { cwd: root });
  await git("init", "-q", "-b", "main");
  await git("add", "-A");
  await git("-c", "user.email=t@e", "-c", "user.name=t", "commit", "-qm", "fixture");
}

describe("every host-side reader of a working copy", () => {
  it("the index, its snippets, the repository map and the read tools", async () => {
    await put("src/other.js", "import { helper } from './helper.js';\nhelper();\n");
    await gitInit();
    const index = await buildIndex(root, { workers: false });
    expect(index.files).toContain("src/helper.js");
    expect(index.search("helper").map((h) => h.path)).toContain("src/helper.js");
    await poison();

    const hits = index.search("helper");
    expect(hits.map((h) => h.path)).toContain("src/helper.js");
    expect(JSON.stringify(hits)).not.toContain(MARKER);
    expect(JSON.stringify(planningContext(index, "helper"))).not.toContain(MARKER);
    const map = repoMap(root, ["src/helper.js", "src/nested/deep.js", "src/other.js"], {
      maxChars: 10_000,
      maxLinesPerFile: 10,
    });
    expect(map).not.toContain(MARKER);
    expect(map).toContain("src/other.js");

    const tools = toolsOf(createReadTools(root, () => index));
    const search = await call(tools, "search_code", { query: "helper" });
    expect(search).toContain("src/helper.js");
    expect(search).not.toContain(MARKER);
    expect(await call(tools, "read_file", { path: "src/helper.js" })).toMatch(
      /^Error: .*outside the repository/,
    );
    expect(await call(tools, "read_file", { path: "src/nested/helper.js" })).toMatch(
      /^Error: .*outside the repository/,
    );
    expect(await call(tools, "read_file", { path: "CLAUDE.md" })).toMatch(/^Error: /);
    expect(await call(tools, "list_files", { path: "src/nested" })).toMatch(/^Error: /);
    const listing = await call(tools, "list_files", {});
    expect(listing).not.toContain("test_leak.py");

    // A fresh index of the poisoned copy leaves the links out.
    const again = await buildIndex(root, { workers: false });
    expect(again.stats.skipped.symlink).toBeGreaterThan(0);
    expect(JSON.stringify(again.search("helper"))).not.toContain(MARKER);
    expect(again.files).not.toContain("src/nested/test_leak.py");
  });

  it("an in-tree link met by read_file is refused with a hint", async () => {
    await symlink("nested", path.join(root, "src/inside"));
    await symlink("helper.js", path.join(root, "src/alias.js"));
    const index = await buildIndex(root, { workers: false });
    const tools = toolsOf(createReadTools(root, () => index));
    expect(await call(tools, "read_file", { path: "src/alias.js" })).toBe(
      "Error: 'src/alias.js' is a symbolic link; read the file it points to instead.",
    );
    expect(await call(tools, "read_file", { path: "src/inside/deep.js" })).toBe(
      "Error: 'src/inside/deep.js' passes through a symbolic link; use the path it points to instead.",
    );
  });

  it("the indexer's bounded reads, in-process and on a worker thread", async () => {
    await poison();
    expect(await readBounded(root, "src/helper.js", 1 << 20)).toBe("symlink");
    expect(await readBounded(root, "src/nested/helper.js", 1 << 20)).toBe("symlink");
    const scratch = { buffer: Buffer.alloc(16) };
    expect(readBoundedSync(root, "src/nested/helper.js", 1 << 20, scratch)).toBe("symlink");
    expect(readBoundedSync(root, "CLAUDE.md", 1 << 20, scratch)).toBe("symlink");
  });

  it("the index built on worker threads, with a tracked folder swapped for a link", async () => {
    for (let i = 0; i < 1000; i++) await put(`gen/file${i}.js`, `export const v${i} = ${i};\n`);
    await gitInit();
    // Still listed by git (it is in the index), read through the link by a plain open.
    await writeFile(path.join(outside, "dir", "deep.js"), `export const deep = "${MARKER}";\n`);
    await swapForLink("src/nested", path.join(outside, "dir"));
    const index = await buildIndex(root, { workers: true });
    expect(index.stats.workers).toBeGreaterThan(0);
    expect(index.files).not.toContain("src/nested/deep.js");
    expect(index.stats.skipped.symlink).toBeGreaterThan(0);
    expect(JSON.stringify(index.search("deep"))).not.toContain(MARKER);
  });

  it("the directory walk outside git does not enter a linked folder", async () => {
    await poison();
    const listed = await listRepoFiles(root);
    expect(listed.source).toBe("walk");
    expect(listed.paths).not.toContain("src/nested/test_leak.py");
    expect(listed.paths).not.toContain("tests/test_leak.py");
  });

  it("instruction files committed or swapped as links", async () => {
    await put("CONVENTIONS.md", "Use tabs.\n");
    expect(await readRepositoryInstructions(root)).toContain("Use tabs.");
    await poison();
    const text = await readRepositoryInstructions(root);
    expect(text).not.toContain(MARKER);
    expect(text).not.toContain("PATH=");
    expect(text).toContain("Use tabs.");
    expect(text).not.toContain("AGENTS.md");
  });

  it("the edit and write tools' reads of the old content", async () => {
    await put("src/crlf.js", "a\r\nb\r\n");
    const tools = toolsOf(createWriteTools(root));
    await poison();
    expect(
      await call(tools, "edit_file", { path: "src/helper.js", old_text: "helper", new_text: "x" }),
    ).toMatch(/^Error: .*outside the repository/);
    expect(
      await call(tools, "edit_file", {
        path: "src/nested/helper.js",
        old_text: "helper",
        new_text: "x",
      }),
    ).toMatch(/^Error: /);
    expect(await call(tools, "write_file", { path: "src/crlf.js", content: "c\nd\n" })).toMatch(
      /CRLF line endings kept/,
    );
  });

  it("the health scan's file reader", async () => {
    await gitInit();
    await poison();
    const repo = await readRepoFiles(root);
    expect(JSON.stringify(repo.files)).not.toContain(MARKER);
    expect(repo.files.map((f) => f.path)).toContain("README.md");
    expect(repo.skipped.symlink).toBeGreaterThan(0);
  });

  it("the ecosystems' detection reads and coverage reports", async () => {
    await poison();
    expect(await readText(root, "package.json")).toBeNull();
    expect(await isFile(root, "package.json")).toBe(false);
    expect(await isDirectory(root, "tests")).toBe(false);
    expect(await exists(root, path.join(root, "tests/test_leak.py"))).toBe(false);
    expect(await exists(root, path.join(root, "tests"))).toBe(true);
    expect(await readJson(root, path.join(root, ".foreman-coverage/coverage-summary.json"))).toBe(
      undefined,
    );
    expect(await readJson(root, ".foreman-coverage/coverage-summary.json")).toBeUndefined();
    expect(await readReport(root, "cover.out")).toBeUndefined();
    expect(await readReport(root, path.join(outside, "secret.txt"))).toBeUndefined();
    // tests/ is a link to a folder holding a test_*.py: not taken for a pytest suite.
    expect(await python.verify!.detect(root, [])).toBeNull();
    await rm(path.join(root, "tests"));
    await put("tests/test_real.py", "def test_x():\n    pass\n");
    expect(await python.verify!.detect(root, [])).toMatchObject({ source: "tests/" });
  });
});
