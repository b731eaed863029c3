import { mkdtemp, rm, stat, utimes, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runSandboxed } from "../../src/sandbox/index.js";

/*
 * A Python module changed within the second of the run that imported it, to a version of the
 * same size (`a * b`, then `a + b`: a fix round right after a check), runs as changed: the
 * sandbox writes no bytecode of the working copy's modules (PYTHONDONTWRITEBYTECODE), which
 * CPython would trust on the source's size and mtime second.
 */

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "py-bytecode-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("python in the sandbox", () => {
  it("runs a module changed in the same second at the same size as changed", async () => {
    const file = path.join(dir, "calc.py");
    const run = () =>
      runSandboxed('python3 -c "import calc; print(calc.add(2, 3))"', {
        cwd: dir,
        timeoutMs: 30_000,
      });
    await writeFile(file, "def add(a, b):\n    return a * b\n");
    const first = await run();
    expect(first.ok, first.output).toBe(true);
    expect(first.output.trim()).toBe("6");
    const { mtime } = await stat(file);
    await writeFile(file, "def add(a, b):\n    return a + b\n");
    await utimes(file, mtime, mtime); // the same second, as a quick fix round gets
    const second = await run();
    expect(second.ok, second.output).toBe(true);
    expect(second.output.trim()).toBe("5");
  });
});
