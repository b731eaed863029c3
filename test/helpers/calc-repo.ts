/*
 * A small TypeScript project whose test fails: clamp ignores its bounds. Plain `node --test`
 * runs it with no install: the test strips the module's `: number` annotations itself (the
 * sandbox hides this checkout, so its tsx is out of reach, and Node 20 has no type
 * stripping). Used by the end-to-end test and the task-overhead benchmark.
 */

export const CALC_BUGGY = `export function add(a: number, b: number): number {
  return a + b;
}

export function clamp(value: number, min: number, max: number): number {
  return value;
}
`;
/** The line that makes the test pass, in place of `return value;`. */
export const CALC_FIX = "return Math.min(Math.max(value, min), max);";

export const CALC_PLAN = {
  summary: "Make clamp keep values inside [min, max].",
  steps: [
    {
      title: "Clamp to both bounds",
      description: "Return min below the range and max above it.",
      files: ["src/math.ts"],
    },
  ],
};

/** The repository's files; `beforeTest` is a shell command run before the test (and `&&`). */
export function calcRepoFiles(beforeTest?: string): Record<string, string> {
  const test = "node --test test/math.test.mjs";
  return {
    "package.json": `${JSON.stringify(
      {
        name: "calc",
        version: "1.0.0",
        private: true,
        type: "module",
        scripts: { test: beforeTest ? `${beforeTest} && ${test}` : test },
      },
      null,
      2,
    )}\n`,
    "src/math.ts": CALC_BUGGY,
    "test/math.test.mjs": `import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";

// The module's only TypeScript is \`: number\`; without it, it is plain JavaScript.
const source = readFileSync(new URL("../src/math.ts", import.meta.url), "utf8");
const js = source.replace(/:\\s*number/g, "");
const { add, clamp } = await import(\`data:text/javascript,\${encodeURIComponent(js)}\`);

test("add", () => assert.equal(add(2, 3), 5));
test("clamp keeps values in range", () => {
  assert.equal(clamp(-5, 0, 3), 0);
  assert.equal(clamp(2, 0, 3), 2);
  assert.equal(clamp(9, 0, 3), 3);
});
`,
    "README.md": "# calc\n\nSmall arithmetic helpers.\n",
  };
}
