import { readdir, readFile } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentModel, roleOf } from "../helpers/agent-model.js";
import { MARK_FIXED_SCRIPT } from "../helpers/mark-fixed-model.js";
import { startFakeModel, type FakeModel, fakeModelEnv } from "../helpers/fake-model.js";
import { createGitRepo, type GitFixture } from "../helpers/git-repo.js";
import { addLocalWorkspace, startTestServer, type TestServer } from "../helpers/server.js";
import { startTask } from "../helpers/ws.js";

/*
 * Issue 41 item 6 (docs/operations.md, "Time budget"): every command a task runs counts against its time
 * budget, TASK_COMMAND_TIME_LIMIT_S, the base commit's checks included. Each check sleeps
 * far longer than the budget (but within COMMAND_TIMEOUT_S) on one side of the change: after
 * it, the check is stopped when the budget is used up; before it (the base's run beside
 * planning), the base's run uses the budget up. Either way the task fails FAILED naming the
 * setting and the command, long before the sleep would have ended, and nothing is left
 * running.
 */

const LLM_KEY = "sk-time-budget-key-0011223344556677";
const LIMIT_S = 4;

const script = MARK_FIXED_SCRIPT;

/** Processes of this host whose command line contains `text` (the sandbox's included). */
async function processesWith(text: string): Promise<number> {
  let count = 0;
  for (const pid of await readdir("/proc").catch(() => [] as string[])) {
    if (!/^\d+$/.test(pid)) continue;
    const cmdline = await readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => "");
    if (cmdline.replace(/\0/g, " ").includes(text)) count++;
  }
  return count;
}

/*
 * `slow`: which side sleeps. A sleep no other test runs, to find its processes by. The
 * check's command is the same string on both sides; what tells them apart is which side
 * the sleep ran on (the base's is logged as run on the unchanged code first).
 */
const CASES = [
  { slow: "after the change", sleep: "sleep 61.25", run: "if [ -f fixed ]; then sleep 61.25; fi" },
  { slow: "on the base commit", sleep: "sleep 62.75", run: "[ -f fixed ] || sleep 62.75" },
];

describe.each(CASES)("TASK_COMMAND_TIME_LIMIT_S with a check slow $slow", (c) => {
  const stack = {} as { repo: GitFixture; model: FakeModel; server: TestServer };
  beforeAll(async () => {
    stack.repo = await createGitRepo({
      "README.md": "# slow\n",
      ".github/foreman.yml": `verify:\n  - name: test\n    run: ${JSON.stringify(c.run)}\n`,
    });
    stack.model = await startFakeModel(agentModel(script));
    stack.server = await startTestServer({
      workers: true,
      env: {
        ...fakeModelEnv(stack.model, LLM_KEY),
        EVENT_POLL_MS: "50",
        COMMAND_TIMEOUT_S: "120",
        TASK_COMMAND_TIME_LIMIT_S: String(LIMIT_S),
        MAX_FIX_ATTEMPTS: "1",
      },
    });
  }, 60_000);
  afterAll(async () => {
    await stack.server?.stop();
    await stack.model?.close();
    await stack.repo?.remove();
  });

  it("fails the task naming the setting and the command once the budget is used up", async () => {
    const { server, model, repo } = stack;
    const { key } = await server.signup();
    const workspaceId = await addLocalWorkspace(server, key, { name: "acme/slow", dir: repo.dir });
    const started = performance.now();
    const { id, stream } = await startTask(server, key, {
      workspace_id: workspaceId,
      repo_id: "acme/slow",
      description: "Mark it fixed",
      auto_approve: true,
    });
    expect(await stream.closed).toBe(1000);
    // Stopped by the budget, not by the sleep's end nor COMMAND_TIMEOUT_S.
    expect(performance.now() - started).toBeLessThan(45_000);
    const task = (await server.api("GET", `/tasks/${id}`, { key })).body;
    expect(task).toMatchObject({ status: "failed", phase: "FAILED" });
    const command = c.run.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    expect(task.error).toMatch(
      new RegExp(
        `^The task's commands ran past TASK_COMMAND_TIME_LIMIT_S=${LIMIT_S} s in all while running \`${command}\` \\(\\d+ s of .*Raise TASK_COMMAND_TIME_LIMIT_S`,
      ),
    );
    const logs = stream.events.filter((e) => e.event_type === "log").map((e) => String(e.message));
    expect(logs.some((l) => l.startsWith("Running test on the unchanged code"))).toBe(true);
    // Which side used the budget up. After the change: the check started and was stopped.
    // On the base: VERIFYING waited for the base's run beside planning, which used the
    // budget up, and the task fails on it before the change's check starts.
    const checkResult = logs.filter((l) => l.startsWith("test: "));
    expect(checkResult).toEqual([]);
    if (c.slow === "after the change")
      expect(logs.some((l) => l.startsWith("Running test: "))).toBe(true);
    else expect(logs).toContain("Waiting for the checks on the unchanged code to finish.");
    // The time is kept on the task: about the budget, the stopped command's included.
    const record = await server.service.context.models.Task.findById(id).lean();
    expect(record?.command_ms).toBeGreaterThanOrEqual(LIMIT_S * 1000 - 100);
    expect(record?.command_ms).toBeLessThan(LIMIT_S * 1000 + 3000);
    // Not a failure for the model: no fix round was spent on it.
    expect(model.requests.some((r) => roleOf(r) === "fix")).toBe(false);
    expect(await processesWith(c.sleep)).toBe(0);
  }, 90_000);
});
