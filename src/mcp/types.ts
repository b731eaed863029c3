import type { Config } from "../config/env.js";
import type { Models } from "../db/models.js";
import type { HealthScans } from "../domain/health/reports.js";
import type { Principal } from "../domain/accounts/keys.js";
import type { TaskEventHub } from "../domain/tasks/event-hub.js";
import type { TaskEventLog } from "../domain/tasks/events.js";
import type { TaskDeps } from "../domain/tasks/model.js";
import type { GithubClient } from "../github-api/client.js";
import type { ModelClient } from "../llm/provider.js";
import type { Logger } from "../util/logger.js";
import type { TaskWaits } from "./wait.js";

/** What the MCP door needs from the rest of the process (built once by service.ts). */
export interface McpDeps {
  config: Config;
  models: Models;
  tasks: TaskDeps;
  events: TaskEventLog;
  hub: TaskEventHub;
  logger: Logger;
  /** The App's clients (`noGithubClient` when it is not configured). */
  githubClient: GithubClient;
  readonly modelClient: ModelClient;
  readonly healthScans: HealthScans;
}

/** What one tool call knows besides its arguments. */
export interface ToolCall {
  principal: Principal;
  deps: McpDeps;
  /** Sends an MCP progress notification when the client asked for them (a progressToken). */
  progress(progress: number, message: string): Promise<void>;
  /** Aborted when the client cancels the call or the session ends. */
  signal: AbortSignal;
  /** The door's wait_for_task, bounded per key and account (mcp/wait.ts). */
  waits: TaskWaits;
}
