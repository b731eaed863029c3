import { describe, expect, it } from "vitest";
import type { TaskRecord } from "../../src/db/models.js";
import { checkRunState, dashboardTaskUrl } from "../../src/github/progress.js";

/* What the progress check run shows (src/github/progress.ts), without GitHub. */

const TOKEN = "ghp_" + "S3cret".repeat(6);

function task(fields: Partial<TaskRecord>): TaskRecord {
  return {
    _id: "task_1",
    description: `Fix the login\nwith ${TOKEN}`,
    status: "running",
    phase: "PLANNING",
    ...fields,
  } as TaskRecord;
}

describe("the progress check run's text", () => {
  it("never carries a secret, neither from the description nor from the error", () => {
    const failed = checkRunState(
      task({
        description: `Use ${TOKEN} to fix it`,
        status: "failed",
        phase: "FAILED",
        error: `git push failed: https://x-access-token:${TOKEN}@github.com/a/b`,
      }),
      undefined,
    );
    expect(failed).toMatchObject({ status: "completed", conclusion: "failure", title: "Failed" });
    expect(failed.summary).toContain("git push failed");
    expect(JSON.stringify(failed)).not.toContain(TOKEN);
  });

  it("maps endings to conclusions and links the dashboard page", () => {
    const url = dashboardTaskUrl("https://foreman.example.com/base", "task_1");
    expect(url).toBe("https://foreman.example.com/base/dashboard/tasks/task_1");
    expect(dashboardTaskUrl(undefined, "task_1")).toBeUndefined();
    const done = checkRunState(task({ status: "completed", phase: "DONE" }), url);
    expect(done).toMatchObject({ conclusion: "neutral", title: "Done: no change needed" });
    expect(done.summary).toContain(`(${url})`);
    expect(
      checkRunState(task({ status: "cancelled", phase: "FAILED", error: "Cancelled by a." }), url),
    ).toMatchObject({ status: "completed", conclusion: "cancelled" });
    expect(checkRunState(task({}), url)).toMatchObject({
      status: "in_progress",
      title: "Planning",
    });
  });
});
