import { describe, expect, it } from "vitest";
import type { TaskRecord } from "../../src/db/models.js";
import {
  changeRequestBody,
  GITHUB_BODY_LIMIT,
} from "../../src/domain/pull-requests/change-request-text.js";
import { taskEvidence } from "../../src/domain/tasks/evidence.js";

/*
 * The evidence a change carries (docs/api.md, "Evidence"), as `GET /tasks/{id}` serves it and as
 * the forge-neutral pull-request body renders it: merged over checks, capped with counts, and a
 * body that stays within GitHub's 65,536 characters whatever the lists, plan and review hold.
 */

const started = new Date("2026-12-07T10:00:00Z");

function task(fields: Partial<TaskRecord>): TaskRecord {
  return {
    _id: "task_evidence",
    description: "Make add() return the sum",
    plan_summary: "Fix add.",
    plan: [{ step: 1, title: "Fix add", description: "Return a + b.", files: ["src/add.js"] }],
    review: null,
    cost: { input_tokens: 1200, output_tokens: 300, usd: 0.0123456 },
    fix_attempts: 1,
    started_at: started,
    finished_at: null,
    created_at: started,
    updated_at: started,
    ...fields,
  } as unknown as TaskRecord;
}

const ids = (prefix: string, n: number) =>
  Array.from({ length: n }, (_, i) => `${prefix}/test_${String(i).padStart(5, "0")}`);

describe("taskEvidence", () => {
  it("merges the checks' per-test lists, each id once, counting what the caps left out", () => {
    const evidence = taskEvidence(
      task({
        checks: {
          source: "package.json",
          fix_attempts: 1,
          results: [
            {
              name: "unit",
              command: "npm test",
              ok: true,
              duration_ms: 1500,
              tests: {
                total: 10,
                passed: 9,
                failed: 1,
                skipped: 0,
                new_failures: [],
                fixed: ["a > sums", "a > shared"],
                still_failing: ["date > today"],
                added: ["a > new"],
                reproduced: ["a > new"],
              },
            },
            {
              name: "again",
              command: "npm run test:all",
              ok: false,
              pre_existing: true,
              duration_ms: 2500,
              tests: {
                total: 200,
                passed: 120,
                failed: 80,
                skipped: 0,
                new_failures: [],
                fixed: ["a > shared"],
                still_failing: ids("x", 50),
                still_failing_count: 79,
                added: [],
              },
            },
            { name: "lint", command: "npm run lint", ok: true, duration_ms: 300, tests: null },
          ],
        } as unknown as TaskRecord["checks"],
      }),
      new Date(started.getTime() + 65_000),
    );
    expect(evidence).toMatchObject({
      base_commit: null,
      tests: { total: 210, passed: 129, failed: 81, skipped: 0 },
      fixed: { ids: ["a > sums", "a > shared"], count: 2 },
      added: { ids: ["a > new"], count: 1 },
      reproduced: { ids: ["a > new"], count: 1 },
      new_failures: { ids: [], count: 0 },
      fix_rounds: 1,
      cost: { usd: 0.012346, input_tokens: 1200, output_tokens: 300 },
      duration_ms: 65_000,
    });
    expect(evidence!.still_failing.count).toBe(80);
    expect(evidence!.still_failing.ids).toHaveLength(50);
    expect(evidence!.commands[1]).toEqual({
      name: "again",
      command: "npm run test:all",
      ok: false,
      duration_ms: 2500,
      pre_existing: true,
    });
  });

  it("is null before any verification ran", () => {
    expect(taskEvidence(task({ checks: null }))).toBeNull();
  });
});

describe("changeRequestBody", () => {
  it("says what ran, what was fixed, added and reproduced, what is still red, rounds, cost and time", () => {
    const body = changeRequestBody(
      task({
        checks: {
          source: "package.json",
          fix_attempts: 1,
          base_commit: "abcdef0123456789abcdef0123456789abcdef01",
          results: [
            {
              name: "unit",
              command: "npm test",
              ok: false,
              pre_existing: true,
              duration_ms: 1500,
              tests: {
                total: 3,
                passed: 2,
                failed: 1,
                skipped: 0,
                new_failures: [],
                fixed: ["test/add.test.js > add sums"],
                still_failing: ["test/date.test.js > today"],
                added: ["test/add.test.js > add negatives", "odd `tick` id"],
                reproduced: ["test/add.test.js > add negatives"],
              },
            },
          ],
        } as unknown as TaskRecord["checks"],
      }),
      { now: new Date(started.getTime() + 95_000) },
    );
    expect(body).toContain("## Verification");
    expect(body).toContain(
      "- ⚠️ unit: `npm test` (1.5 s) — failed the same way on the base commit",
    );
    expect(body).toContain("Tests: 2 passed, 1 failed (3 in all).");
    expect(body).toContain("Compared with the base commit `abcdef012345`.");
    expect(body).toContain(
      "**Fixed: red on the base commit, green now** (1)\n\n- `test/add.test.js > add sums`",
    );
    expect(body).toContain(
      "- `test/add.test.js > add negatives` — reproduced: red on the base commit, green now",
    );
    expect(body).toContain("- `` odd `tick` id ``\n");
    expect(body).toContain(
      "**Still failing, as on the base commit (not this change's)** (1)\n\n- `test/date.test.js > today`",
    );
    expect(body).toContain(
      "Fix rounds: 1 · model cost: $0.0123 (1200 input, 300 output tokens) · time: 1 min 35 s.",
    );
    expect(body).not.toContain("New failures");
  });

  it("stays within GitHub's limit with huge lists, plan and review, keeping the evidence with counts", () => {
    const huge = 10_000;
    const long = (n: number) => "word ".repeat(n);
    const results = Array.from({ length: 60 }, (_, i) => ({
      name: `check ${i} ${long(40)}`,
      command: `npm run check-${i} -- ${long(100)}`,
      ok: true,
      duration_ms: 1000,
      tests: {
        total: huge,
        passed: huge,
        failed: 0,
        skipped: 0,
        new_failures: [],
        fixed: ids(`fixed${i}${"x".repeat(300)}`, 50),
        fixed_count: huge,
        still_failing: ids(`old${i}`, 50),
        still_failing_count: huge,
        added: ids(`added${i}`, 50),
        added_count: huge,
        reproduced: ids(`added${i}`, 50),
        reproduced_count: huge,
      },
    }));
    const body = changeRequestBody(
      task({
        description: long(4_000),
        plan_summary: long(2_000),
        plan: Array.from({ length: 400 }, (_, i) => ({
          step: i + 1,
          title: `Step ${i}`,
          description: long(100),
          files: [`src/file${i}.ts`],
        })) as unknown as TaskRecord["plan"],
        review: {
          verdict: "approve",
          summary: long(3_000),
          comments: Array.from({ length: 500 }, (_, i) => ({
            path: `src/f${i}.ts`,
            line: i + 1,
            body: long(30),
            severity: "info",
          })),
        },
        checks: { source: "package.json", fix_attempts: 0, results } as TaskRecord["checks"],
      }),
      { now: started },
    );
    expect(body.length).toBeLessThanOrEqual(GITHUB_BODY_LIMIT);
    expect(body).toContain("- … and 40 more"); // 60 checks, 20 listed
    const fixedCount = 60 * huge; // every check's ids are its own
    expect(body).toContain(`**Fixed: red on the base commit, green now** (${fixedCount})`);
    expect(body).toContain(`- … and ${fixedCount - 20} more`);
    expect(body).toContain("Fix rounds: 0 · model cost: $0.0123");
    expect(body).toContain("Opened by foreman for task `task_evidence`.");
    // A long id is shortened, not left to break the list.
    expect(body).toMatch(/- `fixed0x{150,}…`\n/);
  });
});
