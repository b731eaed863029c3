import { execFile } from "node:child_process";
import { mkdir, mkdtemp, readdir, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { configureSandboxCaches, removeTree, withBuildCache } from "../../src/sandbox/cache.js";
import { runSandboxed } from "../../src/sandbox/index.js";

/*
 * Cargo's build outputs and jest's cache kept per account and repository (issue 41 item 7;
 * sandbox/cache.ts, buildCacheMounts), in the real sandbox: a crate built by one task of
 * an account is fresh for the next task's working copy of the same files (no "Compiling"),
 * where the repository expects it (target/), while another account compiles it afresh; what
 * a run leaves in jest's default cache folder is there for the account's next run only.
 */

const execFileAsync = promisify(execFile);
let dir: string;
/** The crate as a first task cloned it, and a second working copy of the same files. */
let first: string;
let second: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "foreman-build-mounts-"));
  configureSandboxCaches({ root: path.join(dir, "caches") });
  first = path.join(dir, "first");
  await mkdir(path.join(first, "src"), { recursive: true });
  await writeFile(
    path.join(first, "Cargo.toml"),
    '[package]\nname = "calc"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\n',
  );
  await writeFile(
    path.join(first, "src", "lib.rs"),
    'pub fn shout(s: &str) -> String { format!("{}!", s.to_uppercase()) }\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn shouts() { assert_eq!(super::shout("hi"), "HI!"); }\n}\n',
  );
  // The same files, unchanged since (cp -a keeps their times), in another folder.
  second = path.join(dir, "second");
  await execFileAsync("cp", ["-a", first, second]);
});

afterAll(async () => {
  configureSandboxCaches({});
  await removeTree(dir);
});

const run = async (command: string, cwd: string, account: string) =>
  runSandboxed(command, {
    cwd,
    timeoutMs: 300_000,
    cache: await withBuildCache({ account, repo: "ws_1/calc" }, undefined),
  });

describe("kept build outputs", () => {
  it("cargo: the account's next working copy finds its crates built, another account does not", async () => {
    const built = await run("cargo build --offline", first, "acct_a");
    expect(built.ok, built.output).toBe(true);
    expect(built.output).toMatch(/Compiling calc v0\.1\.0/);
    // The outputs went to the account's build cache, not the working copy's target/.
    expect(await readdir(path.join(first, "target")).catch(() => [])).toEqual([]);

    const again = await run("cargo build --offline && ls target/debug", second, "acct_a");
    expect(again.ok, again.output).toBe(true);
    expect(again.output).not.toContain("Compiling");
    expect(again.output).toContain("libcalc.rlib");

    const other = await run("cargo build --offline", second, "acct_b");
    expect(other.ok, other.output).toBe(true);
    expect(other.output).toMatch(/Compiling calc v0\.1\.0/);
  }, 300_000);

  it("jest's default cache folder is the account's, kept between its runs", async () => {
    // Where jest puts its cache by default: <tmpdir>/jest_<uid in base 36>.
    const jestDir = `/tmp/jest_$(node -p 'process.getuid().toString(36)')`;
    const wrote = await run(`echo transformed > ${jestDir}/probe`, first, "acct_a");
    expect(wrote.ok, wrote.output).toBe(true);
    const read = await run(`cat ${jestDir}/probe`, second, "acct_a");
    expect(read.output.trim()).toBe("transformed");
    const other = await run(`cat ${jestDir}/probe || echo none`, second, "acct_b");
    expect(other.output.trim()).toContain("none");
  });
});
