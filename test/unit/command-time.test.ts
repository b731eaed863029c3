import { describe, expect, it } from "vitest";
import { CommandTimeBudget, CommandTimeError } from "../../src/sandbox/command-time.js";
import type { SandboxOptions, SandboxResult } from "../../src/sandbox/index.js";

/*
 * TASK_COMMAND_TIME_LIMIT_S's accounting (sandbox/command-time.ts), with a stand-in for the
 * sandbox that runs until its timeout or its signal: commands running at once use the budget
 * together, a command's timeout is what is left, and nothing starts once it is used up.
 * (test/integration/command-time-budget.test.ts runs it through the service and the sandbox.)
 */

/** A command that never ends by itself: stopped by its timeout or its signal, like the sandbox. */
function endless(command: string) {
  const seen: { timeoutMs?: number } = {};
  const run = (options: SandboxOptions) =>
    new Promise<SandboxResult>((resolve) => {
      seen.timeoutMs = options.timeoutMs;
      const started = performance.now();
      const end = (timedOut: boolean) =>
        resolve({
          command,
          exitCode: null,
          signal: "SIGTERM",
          timedOut,
          aborted: !timedOut,
          durationMs: Math.round(performance.now() - started),
          output: "",
          ok: false,
        });
      const timer = setTimeout(() => end(true), options.timeoutMs);
      options.signal?.addEventListener("abort", () => {
        clearTimeout(timer);
        end(false);
      });
    });
  return { run, seen };
}

const options = (timeoutMs: number): SandboxOptions => ({ cwd: "/", timeoutMs });

describe("a task's command time budget", () => {
  it("counts commands running at once together and stops them all when it is used up", async () => {
    const recorded: number[] = [];
    const budget = new CommandTimeBudget(600, 0, (ms) => {
      recorded.push(ms);
      return Promise.resolve();
    });
    const started = performance.now();
    const [a, b] = [endless("base check"), endless("npm test")];
    const results = await Promise.allSettled([
      budget.run("base check", options(60_000), a.run),
      budget.run("npm test", options(60_000), b.run),
    ]);
    const took = performance.now() - started;
    // Two at once use 600 ms of budget in about 300 ms of wall time.
    expect(took).toBeGreaterThan(250);
    expect(took).toBeLessThan(550);
    for (const result of results) {
      expect(result.status).toBe("rejected");
      expect((result as PromiseRejectedResult).reason).toBeInstanceOf(CommandTimeError);
    }
    expect(String((results[0] as PromiseRejectedResult).reason.message)).toMatch(
      /^The task's commands ran past TASK_COMMAND_TIME_LIMIT_S=0\.6 s in all while running `base check`/,
    );
    expect(recorded).toHaveLength(2);
    expect(budget.spentMs()).toBeGreaterThanOrEqual(595);
    // Nothing starts once it is used up.
    const c = endless("late");
    await expect(budget.run("late", options(60_000), c.run)).rejects.toBeInstanceOf(
      CommandTimeError,
    );
    expect(c.seen.timeoutMs).toBeUndefined();
  });

  it("gives a command what is left as its timeout, and starts from the time already spent", async () => {
    const budget = new CommandTimeBudget(10_000, 9_700);
    const a = endless("npm test");
    await expect(budget.run("npm test", options(600_000), a.run)).rejects.toBeInstanceOf(
      CommandTimeError,
    );
    expect(a.seen.timeoutMs).toBeGreaterThan(250);
    expect(a.seen.timeoutMs).toBeLessThanOrEqual(300);
    // A command whose own timeout comes first times out as before: a result, not the budget's.
    const roomy = new CommandTimeBudget(60_000);
    const b = endless("sleep");
    const result = await roomy.run("sleep", options(50), b.run);
    expect(result.timedOut).toBe(true);
  });
});
