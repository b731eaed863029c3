import type { Probot } from "probot";
import type { Config, GithubAppConfig } from "../config/env.js";
import type { Models } from "../db/models.js";
import type { TaskDeps } from "../domain/tasks/model.js";
import type { Scheduler } from "../queue/scheduler.js";
import type { ModelClient } from "../llm/provider.js";
import type { Logger } from "../util/logger.js";
import type { GithubClient } from "../github-api/client.js";

/**
 * What the GitHub App's event handlers need. Handlers are thin: they check who is asking,
 * record what GitHub told them, and call the same domain functions as the API (docs/api.md,
 * "The GitHub App").
 */
export interface GithubHandlerDeps {
  config: Config;
  github: GithubAppConfig;
  models: Models;
  tasks: TaskDeps;
  client: GithubClient;
  logger: Logger;
  /** Handlers enqueue their work here; the workers run it (github/jobs.ts). */
  scheduler: Scheduler;
  /** The configured model (or the "missing" client that says what to set), for `/review`. */
  modelClient: ModelClient;
}

/** Registers one group of handlers on the Probot instance. */
export type HandlerGroup = (probot: Probot, deps: GithubHandlerDeps) => void;
