import type { Config } from "../config/env.js";
import type { Models, TaskPhase, TaskRecord, TaskStatus } from "../db/models.js";
import type { TaskEventPayload } from "../domain/tasks/events.js";
import type { Ending } from "../domain/tasks/endings.js";
import type { StageName } from "../domain/tasks/model.js";
import type { TaskUpdate } from "../domain/tasks/store.js";
import type { GithubClient } from "../github-api/client.js";
import type { RepoIndex } from "../indexer/index.js";
import type { ReadyModelClient } from "../llm/provider.js";
import type { PricedUsage } from "../llm/types.js";
import type { CommandTimeBudget } from "../sandbox/command-time.js";
import type { Logger } from "../util/logger.js";
import type { BaseRuns } from "../verify/baseline.js";

/*
 * The contract between the runner (runner.ts) and its stages (stages/): kept apart from both
 * so that stages import it without importing the runner that imports them.
 */

/** `round`: the next stage starts a new round (domain/tasks/revisions.ts); absent: this one. */
export type StageOutcome =
  | { next: StageName; round?: number }
  | { wait: { phase: TaskPhase; status: TaskStatus } }
  | { end: Ending };

/** What a stage function gets: the task, its working copy, and ways to report progress. */
export interface StageContext {
  /** The task as the stage started it, with what `update` wrote since. */
  task: TaskRecord;
  config: Config;
  models: Models;
  logger: Logger;
  workdir: string;
  attempt: number;
  signal: AbortSignal;
  log(message: string): Promise<void>;
  emit(payload: TaskEventPayload): Promise<void>;
  /** Sets fields of the task (and `updated_at`); `task` shows them from then on. */
  update(fields: TaskUpdate): Promise<void>;
  /** Adds a model call's tokens and price to the task; throws when the budget is used up. */
  addUsage(usage: PricedUsage): Promise<void>;
  /** The working copy's index: from memory, or rebuilt when another process built it. */
  index(): Promise<RepoIndex>;
  /** Builds the index of the working copy afresh and keeps it for the later stages. */
  buildIndex(): Promise<RepoIndex>;
  /** The configured model; throws LlmNotConfiguredError when there is none. */
  model(): ReadyModelClient;
  /** The URL to clone the task's repository from, with credentials where needed. */
  cloneUrl(): Promise<string>;
  /** Moves the task to another phase of the same stage (VERIFYING ⇄ FIXING). */
  setPhase(phase: TaskPhase): Promise<void>;
  /** The GitHub App's clients (`configured: false` without an App: every call refuses). */
  github: GithubClient;
  /** The base runs going in this process (verify/baseline.ts): PLANNING starts, VERIFYING awaits. */
  baseRuns?: BaseRuns;
  /** The task's TASK_COMMAND_TIME_LIMIT_S, shared by its stages and base run in this process. */
  commandTime?: CommandTimeBudget;
}

export interface Stage {
  name: StageName;
  phase: TaskPhase;
  run(ctx: StageContext): Promise<StageOutcome>;
}
