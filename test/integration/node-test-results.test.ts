// test-matrix: runtime-sensitive: node:test's reporter flags and its default output (TAP before Node 23, spec after) differ by Node major
import { cp, mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { runSandboxed } from "../../src/sandbox/index.js";
import { readOutput, runWithTests } from "../../src/verify/tests/index.js";

/*
 * node:test for real in the sandbox, with the Node on PATH: our reporter through NODE_OPTIONS
 * beside the usual output, ids `file > suite > name`; a command choosing its own reporter is
 * left alone and read from its output.
 */

const FIXTURE = path.resolve(import.meta.dirname, "../fixtures/test-runners/node-test");
let dir = "";

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function fixture(): Promise<string> {
  dir = await mkdtemp(path.join(os.tmpdir(), "foreman-node-test-"));
  await cp(FIXTURE, dir, { recursive: true });
  return dir;
}

const EXPECTED = {
  "test/calc.test.js > calc > adds": "passed",
  "test/calc.test.js > calc > nested > adds more": "failed",
  "test/calc.test.js > calc > later": "skipped",
};

describe("node:test", () => {
  it("reads `npm test` (script `node --test`) per test, the usual output unchanged", async () => {
    const cwd = await fixture();
    const { result, tests } = await runWithTests("npm test", { cwd, timeoutMs: 60_000 });
    expect(result.ok).toBe(false);
    expect(tests).toMatchObject({ runner: "node:test", source: "report" });
    expect(Object.fromEntries(tests!.tests.map((t) => [t.id, t.status]))).toEqual(EXPECTED);
    const failed = tests!.tests.find((t) => t.status === "failed");
    expect(failed?.message).toContain("EXPECTED_SUM_MISMATCH add(2,3)=6");
    expect(failed?.file).toBe("test/calc.test.js");

    // The same lines as the run without our reporter, timings aside.
    const plain = await runSandboxed("npm test", { cwd, timeoutMs: 60_000 });
    const shape = (text: string) =>
      text
        .split("\n")
        .filter((l) => !/duration_ms|^\s*at |\(\d|ℹ duration/.test(l))
        .join("\n");
    expect(shape(result.output)).toBe(shape(plain.output));
  });

  it("runs a command again as it is when node refused the reporters it could not see", async () => {
    const cwd = await fixture();
    // npm runs `pretest` with our NODE_OPTIONS too; its own --test-reporter makes node refuse.
    await writeFile(
      path.join(cwd, "package.json"),
      JSON.stringify({
        name: "node-test-fixture",
        scripts: { pretest: "node --test --test-reporter=dot", test: "node --test" },
      }),
    );
    const { result, tests } = await runWithTests("npm test", { cwd, timeoutMs: 60_000 });
    const plain = await runSandboxed("npm test", { cwd, timeoutMs: 60_000 });
    expect(result.output).not.toContain("--test-reporter-destination");
    expect(result.exitCode).toBe(plain.exitCode);
    // The dot reporter's output names no test by id: nothing read, as for the plain run.
    expect(tests).toBeNull();
  });

  it("leaves a command with its own --test-reporter alone and reads its output", async () => {
    const cwd = await fixture();
    const { result, tests } = await runWithTests("node --test --test-reporter=tap", {
      cwd,
      timeoutMs: 60_000,
    });
    expect(result.output).not.toContain("must match the number");
    expect(tests).toMatchObject({ runner: "node:test", source: "output" });
    // TAP names no passing test's file: ids are the names.
    expect(Object.fromEntries(tests!.tests.map((t) => [t.id, t.status]))).toEqual({
      "calc > adds": "passed",
      "calc > nested > adds more": "failed",
      "calc > later": "skipped",
    });
    const again = new Map(readOutput(result.output, ["/workspace", cwd]));
    expect(again.get("node:test")?.find((t) => t.status === "failed")?.message).toContain(
      "EXPECTED_SUM_MISMATCH",
    );
  });
});
