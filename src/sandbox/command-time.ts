/*
 * TASK_COMMAND_TIME_LIMIT_S (docs/operations.md, "Time budget"): the wall time all sandboxed commands of
 * one task may take together: its setup step, its checks, the model's commands (run_command,
 * grep and syntax checks) and the base commit's checks, which run beside PLANNING and are
 * counted while they run, in parallel with the rest. One budget per task and process
 * (pipeline/runner.ts): a command starts with min(COMMAND_TIMEOUT_S, what is left) as its
 * timeout, and when the commands running at once use up what is left, every one of them is
 * stopped and the task fails with CommandTimeError, naming the setting and the command.
 *
 * What finished commands took is added to the task's `command_ms` ($inc, one update per
 * command), so a worker taking the task over after a restart starts from it; a command that
 * was running when its worker died is not counted (it did not finish, and its time is not
 * known).
 */
import { redactText } from "../util/redact.js";
import type { SandboxOptions, SandboxResult, SandboxTimeBudget } from "./settings.js";
import { StageError } from "../util/stage-error.js";

/** A task's sandboxed commands went past TASK_COMMAND_TIME_LIMIT_S: the task fails with it. */
export class CommandTimeError extends StageError {
  constructor(
    readonly command: string,
    readonly limitS: number,
    readonly spentMs: number,
  ) {
    super(
      `The task's commands ran past TASK_COMMAND_TIME_LIMIT_S=${limitS} s in all while running \`${oneLine(command)}\` (${Math.round(spentMs / 1000)} s of setup, checks, the model's commands and the checks on the base commit together), so the command was stopped. Raise TASK_COMMAND_TIME_LIMIT_S, or make the repository's checks faster.`,
    );
    this.name = "CommandTimeError";
  }
}

function oneLine(command: string): string {
  const line = command.replace(/\s+/g, " ").trim();
  return line.length > 100 ? `${line.slice(0, 99)}…` : line;
}

/** Past the budget by at most this much counts as used up (timers fire a little early). */
const SLACK_MS = 5;

/** The time budget of one task's sandboxed commands (sandbox/run.ts `timeBudget`). */
export class CommandTimeBudget implements SandboxTimeBudget {
  private finishedMs: number;
  private readonly running = new Map<symbol, { started: number; stop: AbortController }>();
  private timer: NodeJS.Timeout | undefined;

  /**
   * `spentMs`: what the task's commands took before (its `command_ms`); `record` adds a
   * finished command's time where it is kept.
   */
  constructor(
    readonly limitMs: number,
    spentMs = 0,
    private readonly record?: (ms: number) => Promise<void>,
  ) {
    this.finishedMs = spentMs;
  }

  /** What the task's record says its finished commands took, when that is more (another worker's). */
  atLeast(recordedMs: number): void {
    this.finishedMs = Math.max(this.finishedMs, recordedMs);
  }

  /** Wall time of the task's commands so far, the running ones' included. */
  spentMs(now = performance.now()): number {
    let total = this.finishedMs;
    for (const { started } of this.running.values()) total += now - started;
    return total;
  }

  /**
   * Runs `command` through `run` within what is left: its timeout at most that, and stopped
   * when the commands running with it use the rest up. Throws CommandTimeError when the budget
   * stopped it (or nothing is left).
   */
  async run(
    command: string,
    options: SandboxOptions,
    run: (options: SandboxOptions) => Promise<SandboxResult>,
  ): Promise<SandboxResult> {
    const left = this.limitMs - this.spentMs();
    if (left <= SLACK_MS) throw this.error(command);
    const stop = new AbortController();
    const signal = options.signal ? AbortSignal.any([options.signal, stop.signal]) : stop.signal;
    const id = Symbol(command);
    const started = performance.now();
    this.running.set(id, { started, stop });
    this.schedule();
    let result: SandboxResult;
    try {
      result = await run({ ...options, signal, timeoutMs: Math.min(options.timeoutMs, left) });
    } finally {
      const ms = performance.now() - started;
      this.running.delete(id);
      this.finishedMs += ms;
      this.schedule();
      await this.record?.(Math.round(ms)).catch(() => undefined);
    }
    const stopped =
      (stop.signal.aborted && !options.signal?.aborted) ||
      (result.timedOut && left < options.timeoutMs);
    if (stopped && !result.ok) throw this.error(result.command);
    return result;
  }

  private error(command: string): CommandTimeError {
    return new CommandTimeError(redactText(command), this.limitMs / 1000, this.spentMs());
  }

  /** Stops every running command once they have used the budget up together. */
  private schedule(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.running.size === 0) return;
    const wait = (this.limitMs - this.spentMs()) / this.running.size;
    this.timer = setTimeout(
      () => {
        if (this.limitMs - this.spentMs() > SLACK_MS) return this.schedule();
        for (const { stop } of this.running.values()) stop.abort(new Error("time budget"));
      },
      Math.max(0, Math.ceil(wait)),
    );
    this.timer.unref();
  }
}
