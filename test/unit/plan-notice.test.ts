import { describe, expect, it } from "vitest";
import type { TaskRecord } from "../../src/db/models.js";
import { planText } from "../../src/github/notices.js";

/* The plan gate's comment on a GitHub issue names the plan's targets (docs/api.md, "Verification
 * baseline"). */

const task = (targets?: string[]) =>
  ({
    _id: "task_1",
    plan: [{ step: 1, title: "Fix add", description: "", files: ["src/add.js"] }],
    plan_summary: "Make add() sum.",
    ...(targets ? { plan_targets: targets } : {}),
  }) as unknown as TaskRecord;

describe("the plan gate's comment", () => {
  it("names the tests the plan will make pass", () => {
    expect(planText(task(["test/add.test.js > add sums"]))).toContain(
      "Tests it will make pass: `test/add.test.js > add sums`",
    );
  });

  it("says nothing of targets when the plan has none", () => {
    expect(planText(task())).not.toContain("Tests it will make pass");
    expect(planText(task([]))).not.toContain("Tests it will make pass");
  });
});
