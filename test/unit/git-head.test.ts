import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { headCommit, runGit, shallowClone } from "../../src/util/git.js";
import { createGitRepo, type GitFixture } from "../helpers/git-repo.js";

let repo: GitFixture;
let tmp: string;

beforeAll(async () => {
  repo = await createGitRepo({ "a.txt": "a\n" });
  tmp = await mkdtemp(path.join(os.tmpdir(), "foreman-head-"));
});
afterAll(async () => {
  await repo.remove();
  await rm(tmp, { recursive: true, force: true });
});

const revParse = async (dir: string) => (await runGit(["rev-parse", "HEAD"], { cwd: dir })).trim();

describe("headCommit", () => {
  it("reads HEAD as git does: loose ref, packed ref, detached, shallow clone", async () => {
    expect(await headCommit(repo.dir)).toBe(await revParse(repo.dir)); // loose ref
    await repo.git("pack-refs", "--all");
    expect(await headCommit(repo.dir)).toBe(await revParse(repo.dir)); // packed-refs only
    await repo.git("commit", "-q", "--allow-empty", "-m", "second");
    expect(await headCommit(repo.dir)).toBe(await revParse(repo.dir)); // loose again, newer
    const clone = path.join(tmp, "clone");
    await shallowClone(repo.dir, null, clone);
    expect(await headCommit(clone)).toBe(await revParse(clone));
    await runGit(["checkout", "-q", "--detach"], { cwd: clone });
    expect(await headCommit(clone)).toBe(await revParse(clone)); // detached: a sha in HEAD
  });

  it("asks git when the files say nothing it knows", async () => {
    await expect(headCommit(path.join(tmp, "not-a-repo"))).rejects.toThrow(/rev-parse/);
  });
});
