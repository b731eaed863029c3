import type { TaskPhase } from "../db/models.js";
import { LlmNotConfiguredError, LlmProtocolError, LlmUpstreamError } from "../llm/errors.js";
import { GitError } from "../util/git.js";
import { redactText } from "../util/redact.js";

/*
 * The one place that turns a pipeline failure into the `error` a user reads on the task
 * (docs/architecture.md, "Failures").
 */

import { StageError } from "../util/stage-error.js";

export { StageError };

/** The task's model spending reached MAX_TASK_COST_USD. */
export class BudgetExceededError extends Error {
  constructor(
    readonly spentUsd: number,
    readonly limitUsd: number,
  ) {
    super(
      `The task's model budget is used up: $${spentUsd.toFixed(4)} spent of $${limitUsd.toFixed(2)} (MAX_TASK_COST_USD). Raise MAX_TASK_COST_USD or narrow the task.`,
    );
    this.name = "BudgetExceededError";
  }
}

const PHASE_WORDS: Partial<Record<TaskPhase, string>> = {
  CLONING: "cloning the repository",
  INDEXING: "indexing the repository",
  PLANNING: "planning",
  IMPLEMENTING: "implementing",
  VERIFYING: "verifying",
  FIXING: "fixing",
  REVIEWING: "reviewing",
  CLEANUP: "cleaning up",
};

/** The readable `error` of a task that failed in `phase` with `error`. */
export function describeFailure(error: unknown, phase: TaskPhase): string {
  const during = PHASE_WORDS[phase] ?? phase.toLowerCase();
  let message: string;
  if (error instanceof StageError || error instanceof BudgetExceededError) message = error.message;
  else if (error instanceof LlmNotConfiguredError) message = error.message;
  else if (error instanceof LlmProtocolError)
    message = `The model failed while ${during}: ${error.message}`;
  else if (error instanceof LlmUpstreamError)
    message = `The model provider failed while ${during}: ${error.message}`;
  else if (error instanceof GitError)
    message = `git failed while ${during}: ${error.stderr || error.message}`;
  else
    message = `An internal error stopped the task while ${during}; the service log has the details.`;
  return redactText(message).slice(0, 4000);
}
