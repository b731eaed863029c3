import { execFile } from "node:child_process";
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createGrepTool } from "../../src/tools/read-tools.js";
import { createSyntaxChecker, type SandboxRun } from "../../src/tools/syntax-check.js";
import { createWriteTools } from "../../src/tools/write-tools.js";
import { runSandboxed } from "../../src/sandbox/index.js";

/*
 * The agent's edits checked as it goes (issue 29 item 7): write_file and edit_file run the
 * file language's parser in the sandbox and show the error and the edited lines; `grep`
 * finds lines by regular expression with path:line:text, inside the working copy only.
 * Real files in a real git working copy, real sandboxed commands.
 */

let root: string;
let outside: string;
let run: SandboxRun;

beforeAll(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), "foreman-syntax-"));
  outside = await mkdtemp(path.join(os.tmpdir(), "foreman-outside-"));
  await promisify(execFile)("git", ["init", "-q", root]);
  await writeFile(path.join(outside, "secret.js"), "const needle_outside = 1;\n");
  await mkdir(path.join(root, "src"));
  await writeFile(path.join(root, "src/a.js"), "export const a = 1;\nexport const b = 2;\n");
  await writeFile(
    path.join(root, "src/b.ts"),
    "export function greet(n: string) {\n  return n;\n}\n",
  );
  await writeFile(path.join(root, "notes.md"), "greet people\n");
  await writeFile(path.join(root, ".env"), "GREET_TOKEN=abc\n");
  // A link out of the working copy: grep must not read through it.
  await symlink(outside, path.join(root, "escape"));
  run = async (command) => {
    const result = await runSandboxed(command, { cwd: root, timeoutMs: 30_000 });
    return { ok: result.ok, output: result.output };
  };
}, 30_000);

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
  await rm(outside, { recursive: true, force: true });
});

const tools = () =>
  Object.fromEntries(
    createWriteTools(root, { syntaxCheck: createSyntaxChecker(run) }).map((t) => [t.name, t]),
  );

describe("syntax check after write_file and edit_file", () => {
  it("reports a JavaScript syntax error with its line and the lines around it", async () => {
    const result = await tools().edit_file!.execute({
      path: "src/a.js",
      old_text: "export const b = 2;",
      new_text: "export const b = (2;",
    });
    expect(result).toContain("Edited src/a.js at line 2");
    expect(result).toContain("2: export const b = (2;");
    expect(result).toMatch(/Syntax error \(node --check\) at line 2:\n[\s\S]*SyntaxError/);
  }, 30_000);

  it("passes valid JavaScript modules and scripts", async () => {
    const w = tools().write_file!;
    expect(
      await w.execute({ path: "src/ok.js", content: "export const greet = (n) => `Hi ${n}`;\n" }),
    ).toContain("Syntax check (node --check): no errors.");
    expect(
      await w.execute({ path: "src/ok.cjs", content: "module.exports = { a: 1 };\n" }),
    ).toContain("Syntax check (node --check): no errors.");
  }, 30_000);

  it("checks TypeScript with the shipped parser, Python in the sandbox, JSON by parsing", async () => {
    const w = tools().write_file!;
    const ts = await w.execute({
      path: "src/bad.ts",
      content: "export function f(a: number {\n  return a;\n}\n",
    });
    expect(ts).toMatch(/Syntax error \(typescript parser\) at line 1:\n'[,)]' expected/);
    expect(ts).toContain("1: export function f(a: number {");
    expect(
      await w.execute({ path: "src/good.ts", content: "export const x: number = 1;\n" }),
    ).toContain("Syntax check (typescript parser): no errors.");

    const py = await w.execute({ path: "tool.py", content: "def f():\n    return (1\n" });
    expect(py).toMatch(/Syntax error \(python3 compile\)/);
    expect(py).toContain("SyntaxError");
    expect(await w.execute({ path: "ok.py", content: "def f():\n    return 1\n" })).toContain(
      "Syntax check (python3 compile): no errors.",
    );

    const json = await w.execute({ path: "conf.json", content: '{\n  "a": 1,\n}\n' });
    expect(json).toMatch(/Syntax error \(JSON\.parse\) at line \d:/);
    // Nothing is compiled into the working copy by the check.
    expect((await run("ls -a")).output).not.toContain("__pycache__");
  }, 60_000);

  it("says nothing for languages it does not check", async () => {
    const result = await tools().write_file!.execute({ path: "notes.txt", content: "(((\n" });
    expect(result).toBe("Created notes.txt (1 line, 4 bytes).");
  });
});

describe("grep", () => {
  const grep = () => createGrepTool(run);

  it("answers path:line:text for a regular expression, optionally under a glob", async () => {
    const all = await grep().execute({ pattern: "gre+t" });
    expect(all.split("\n")).toEqual(
      expect.arrayContaining([
        "notes.md:1:greet people",
        "src/b.ts:1:export function greet(n: string) {",
      ]),
    );
    const ts = await grep().execute({ pattern: "function +greet\\(", path: "src/**/*.ts" });
    expect(ts).toBe("src/b.ts:1:export function greet(n: string) {");
    expect(await grep().execute({ pattern: "GREET", ignore_case: true, path: "*.md" })).toBe(
      "notes.md:1:greet people",
    );
  }, 30_000);

  it("never shows files that may hold credentials nor reads through a link out of the copy", async () => {
    expect(await grep().execute({ pattern: "GREET_TOKEN" })).toMatch(/^No lines match/);
    expect(await grep().execute({ pattern: "needle_outside" })).toMatch(/^No lines match/);
    expect(await grep().execute({ pattern: "needle", path: "escape/*" })).toMatch(
      /^No lines match/,
    );
    expect(await grep().execute({ pattern: "x", path: "../*" })).toMatch(/^Error: /);
  }, 30_000);

  it("answers a broken expression with git's error", async () => {
    expect(await grep().execute({ pattern: "a(" })).toMatch(/^Error: /);
  }, 30_000);
});
