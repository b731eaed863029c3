import { mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { createGitRepo, type GitFixture } from "./git-repo.js";

/*
 * A small JavaScript repository with a history to backtest (node:test, no install): two
 * commits that fix something and test it (valid cases), one whose new test already passes
 * at its parent (not a case), one whose test passes one run in two (flaky), one that touches
 * docs only (not mined). `gold` holds each valid case's source change, for the oracle model.
 */

const MATH_1 = `export function add(a, b) {
  return a + b;
}

export function clamp(value, min, max) {
  return value;
}
`;

const MATH_2 = MATH_1.replace("  return value;", "  return Math.min(Math.max(value, min), max);");
const MATH_3 = `${MATH_2}
export function sub(a, b) {
  return a - b;
}
`;
const MATH_4 = MATH_3.replace("  return a + b;", "  const sum = a + b;\n  return sum;");
const MATH_5 = `${MATH_4}
export function mul(a, b) {
  return a * b;
}
`;

const test = (body: string) =>
  `import { test } from "node:test";\nimport assert from "node:assert/strict";\nimport * as m from "../src/math.js";\n\n${body}\n`;

export interface BacktestRepo extends GitFixture {
  /** Commit ids by role. */
  commits: { clamp: string; sub: string; refactor: string; flaky: string; docs: string };
  /** The source files of each valid case at its commit (the oracle's answer), by a word of its message. */
  gold: Record<string, Record<string, string>>;
}

export async function createBacktestRepo(): Promise<BacktestRepo> {
  const repo = await createGitRepo({
    "package.json": `${JSON.stringify({ name: "m", version: "1.0.0", private: true, type: "module", scripts: { test: "node --test" } }, null, 2)}\n`,
    "src/math.js": MATH_1,
    "test/add.test.mjs": test(`test("add", () => assert.equal(m.add(2, 3), 5));`),
    "README.md": "# m\n",
  });
  const write = async (file: string, content: string) => {
    await mkdir(path.dirname(path.join(repo.dir, file)), { recursive: true });
    await writeFile(path.join(repo.dir, file), content);
  };
  const commit = async (message: string) => {
    await repo.git("add", "-A");
    await repo.git("commit", "-q", "-m", message);
    return (await repo.git("rev-parse", "HEAD")).trim();
  };

  await write("README.md", "# m\n\nMath helpers.\n");
  const docs = await commit("Describe the package");

  await write("src/math.js", MATH_2);
  await write(
    "test/clamp.test.mjs",
    test(
      `test("clamp", () => {\n  assert.equal(m.clamp(-5, 0, 3), 0);\n  assert.equal(m.clamp(9, 0, 3), 3);\n});`,
    ),
  );
  const clamp = await commit("Make clamp keep values between its bounds");

  await write("src/math.js", MATH_3);
  await write("test/sub.test.mjs", test(`test("sub", () => assert.equal(m.sub(5, 3), 2));`));
  await write(
    "test/add.test.mjs",
    test(
      `test("add", () => assert.equal(m.add(2, 3), 5));\ntest("add zero", () => assert.equal(m.add(2, 0), 2));`,
    ),
  );
  const sub = await commit("Add a sub helper: `return a - b;`");

  await write("src/math.js", MATH_4);
  await write(
    "test/add-more.test.mjs",
    test(`test("add negative", () => assert.equal(m.add(-2, 1), -1));`),
  );
  const refactor = await commit("Name the sum in add");

  await write("src/math.js", MATH_5);
  // Passes one run in two at the commit: a counter beside the test, in the tree.
  await write(
    "test/mul.test.mjs",
    `import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import * as m from "../src/math.js";

const counter = new URL("./.mul-runs", import.meta.url);
let n = 0;
try { n = Number(readFileSync(counter, "utf8")); } catch {}
writeFileSync(counter, String(n + 1));
test("mul", () => {
  assert.equal(m.mul?.(2, 3), 6);
  assert.equal(n % 2, 0);
});
`,
  );
  const flaky = await commit("Add a mul helper");

  return {
    ...repo,
    commits: { clamp, sub, refactor, flaky, docs },
    gold: { clamp: { "src/math.js": MATH_2 }, sub: { "src/math.js": MATH_3 } },
  };
}
