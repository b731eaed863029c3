import { z } from "zod";
import type { ExecutableTool, ToolSpec } from "../llm/types.js";
import type { CommandTimeBudget } from "../sandbox/command-time.js";
import {
  describeResult,
  diskBudgetFailure,
  heartbeatLine,
  runSandboxed,
  sandboxRoot,
  type SandboxCache,
} from "../sandbox/index.js";

/*
 * The implementing and fixing tools beyond reading and writing files (docs/architecture.md,
 * "Model tool protocol"): `run_command` (same sandbox and limits as verification), `finish`,
 * and an extra `remember` for conventions worth keeping in the repository's memory.
 */

/** Output of one run_command shown to the model, at most (head and tail are kept). */
const COMMAND_OUTPUT_BYTES = 24 * 1024;

export const finishTool: ToolSpec<{ summary: string }> = {
  name: "finish",
  description:
    "Call when your part of the change is complete and you have checked it: a short summary of what you changed and why.",
  input: z.strictObject({ summary: z.string().trim().min(1).max(4000) }),
};

export function createRunCommandTool(options: {
  cwd: string;
  timeoutMs: number;
  signal?: AbortSignal | undefined;
  onRun?: (line: string) => void;
  /** The package cache of the task's account and repository (sandbox/cache.ts). */
  cache?: SandboxCache | undefined;
  /** Every SANDBOX_HEARTBEAT_S while a command runs: "still running `…` (40 s)". */
  onHeartbeat?: (line: string) => void;
  /** The task's TASK_COMMAND_TIME_LIMIT_S (sandbox/command-time.ts). */
  timeBudget?: CommandTimeBudget | undefined;
}): ExecutableTool<{ command: string }> {
  // The path the commands see; never the working copy's folder on the host (SANDBOX=none
  // has no other, so none is named).
  const root = sandboxRoot(options.cwd);
  const where = root === options.cwd ? "the repository root" : `the repository root, ${root}`;
  return {
    name: "run_command",
    description: `Run a shell command in ${where} (for example the tests or a type check), and see its exit status and output. No network credentials or service secrets are available; the limit is ${Math.round(options.timeoutMs / 1000)} s per command.`,
    input: z.strictObject({ command: z.string().trim().min(1).max(4000) }),
    async execute({ command }) {
      const result = await runSandboxed(command, {
        cwd: options.cwd,
        timeoutMs: options.timeoutMs,
        ...(options.signal ? { signal: options.signal } : {}),
        ...(options.cache ? { cache: options.cache } : {}),
        maxOutputBytes: COMMAND_OUTPUT_BYTES,
        timeBudget: options.timeBudget,
        ...(options.onHeartbeat
          ? { onHeartbeat: (ms: number) => options.onHeartbeat?.(heartbeatLine(command, ms)) }
          : {}),
      });
      const status = describeResult(result);
      options.onRun?.(status);
      // Past TASK_DISK_LIMIT_MB the task fails (the tool loop ends on a StageError).
      const overBudget = diskBudgetFailure(result, "task");
      if (overBudget) throw overBudget;
      // A failing command is a result, not a tool error: the model reads the status line.
      return `${status}\n${result.output || "(no output)"}`;
    },
  };
}

/** `remember`: a convention of this repository later tasks should know (kept in memory). */
export function createRememberTool(onNote: (note: string) => void): ExecutableTool<{
  note: string;
}> {
  return {
    name: "remember",
    description:
      "Note a convention of this repository that later tasks should know (how tests are run, where things live, a rule the code follows). One short sentence; do not note anything about this task alone.",
    input: z.strictObject({ note: z.string().trim().min(5).max(500) }),
    execute({ note }) {
      onNote(note);
      return Promise.resolve("Noted.");
    },
  };
}
