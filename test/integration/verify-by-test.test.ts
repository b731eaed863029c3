import { describe, expect, it } from "vitest";
import { userText } from "../helpers/agent-model.js";
import {
  ADD_WRONG,
  NODE,
  PYTEST,
  VITEST,
  pkg,
  runnerScenarios,
  verifyStack,
} from "../helpers/verify-scenarios.js";

/*
 * Verification judges by tests, not lines (docs/api.md, "Verification baseline"; issue 41 items 2 and 8): the four
 * scenarios of test/helpers/verify-scenarios.ts on node:test, pytest and vitest (installed
 * by the setup step from the registry), and beside them:
 * - a change that adds a test has it run on the base too (reproduced);
 * - a plain script that exits 1 with no failure words, still wrong, gets a fix round.
 * jest and mocha are verify-by-test-npm.test.ts; unittest, go test and cargo test
 * verify-by-test-native.test.ts (files of about the same length, run side by side in CI).
 */

/** A repository whose only check is a plain script: no runner, no failure words. */
const script = {
  "package.json": pkg("node check.js"),
  "src/add.js": ADD_WRONG,
  "check.js": `import { add } from "./src/add.js";
const got = add(2, 3);
if (got !== 5) {
  console.log(\`EXPECTED_SUM_MISMATCH add(2,3)=\${got}\`);
  process.exit(1);
}
console.log("sum ok");
`,
};

const RUNNERS = [NODE, PYTEST, VITEST];
const stack = verifyStack(RUNNERS, { "acme/script": script });
const { runToDiffGate, logs, fixRequests } = stack;

runnerScenarios(RUNNERS, stack);

describe("evidence of a change that adds a test", () => {
  it("runs the added test on the base too: red there, green now, it is reproduced", async () => {
    const description = "ADDTEST: make add() return the sum, with a test.";
    const { task } = await runToDiffGate(NODE.repo, description);
    expect(task.status).toBe("awaiting_diff_approval");
    const { tests } = task.checks.results[0];
    expect(tests.added).toEqual(["test/sum.test.js > adds negatives"]);
    expect(tests.reproduced).toEqual(["test/sum.test.js > adds negatives"]);
    expect(tests.reproduced_count).toBe(1);
    const lines = await logs(task.id);
    expect(
      lines.some((l) => l.startsWith("Running the change's tests on the unchanged code")),
    ).toBe(true);
  }, 180_000);
});

describe("verification of a check not read per test", () => {
  it("sends a plain script that exits 1 with no failure words, still wrong, to a fix round", async () => {
    const description = "WRONG: make add() return the sum, checked by a script.";
    const { task } = await runToDiffGate("acme/script", description);
    expect(task.status).toBe("awaiting_diff_approval");
    expect(task.checks.fix_attempts).toBe(1);
    expect(task.checks.results[0]).toMatchObject({ ok: true });
    const prompt = userText(fixRequests(description)[0]!);
    expect(prompt).toContain("EXPECTED_SUM_MISMATCH add(2,3)=6");
  }, 180_000);
});
