import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listRepoFiles } from "../../src/indexer/file-list.js";
import { longestStall } from "../helpers/event-loop.js";

/*
 * A working copy without `.git` is walked with its .gitignore files (indexer/file-list.ts).
 * A repository's setup can remove `.git` and leave a 1 MiB .gitignore of 58,000 rules, each
 * path tested against all of them (130 ms a path): the walk reads the first 32 KiB of a
 * .gitignore and lets the event loop run between slices (issue #40).
 */

const FILES = 200;
let root: string;

beforeAll(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), "foreman-filelist-bounds-"));
  let rules = "*.log\n";
  for (let i = 0; rules.length < 1024 * 1024 - 64; i += 1) rules += `pat${i}/**/x*y*z\n`;
  // Past the first 32 KiB: not read, so not honoured.
  rules += "late.txt\n";
  await writeFile(path.join(root, ".gitignore"), rules);
  await mkdir(path.join(root, "src"));
  for (let i = 0; i < FILES; i += 1) await writeFile(path.join(root, "src", `f${i}.ts`), "x\n");
  await writeFile(path.join(root, "debug.log"), "x\n");
  await writeFile(path.join(root, "late.txt"), "x\n");
});

afterAll(async () => {
  if (root) await rm(root, { recursive: true, force: true });
});

describe("listRepoFiles over a hostile .gitignore", () => {
  it("reads its first 32 KiB and keeps the event loop running", async () => {
    const { value: listed, stallMs } = await longestStall(() => listRepoFiles(root));
    // Every rule read and tested on the loop at once was 26 s for these 200 paths.
    expect(stallMs).toBeLessThan(1000);
    expect(listed.source).toBe("walk");
    expect(listed.paths).toHaveLength(FILES + 2); // the sources, .gitignore and late.txt
    expect(listed.paths).toContain("late.txt");
    expect(listed.paths).not.toContain("debug.log");
  }, 120_000);
});
