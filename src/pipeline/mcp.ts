import type { Models } from "../db/models.js";
import { mcpSecretValues, mcpSettingsForTask } from "../domain/agents/mcp-settings.js";
import { taskFields } from "../domain/tasks/store.js";
import {
  limitRepositorySecrets,
  NO_MCP_TOOLS,
  openMcpTools,
  parseMcpServers,
  type McpToolbox,
} from "../tools/mcp-tools.js";
import { currentSecretScope, SecretScope } from "../util/redact.js";
import { parseRepositoryYaml } from "../util/repo-parse.js";
import { readText } from "../workcopy/fs.js";
import { configNames } from "../verify/checks.js";
import type { StageContext } from "./stage.js";

/*
 * The MCP servers a stage's agent gets (tools/mcp-tools.ts): the account's
 * (domain/agents/mcp-settings.ts) and the repository's `.github/foreman.yml` `mcp_servers:` (the
 * repository's win on a shared name, and may use only the secrets the account attached to its
 * own server of that name).
 * Started for one model loop and closed after it; every start, failure and call is a line of
 * the task's log.
 */

const START_TIMEOUT_MS = 20_000;
const CONFIG_MAX_BYTES = 256 * 1024;

/** The repository's `mcp_servers:` and what was wrong with them, from the working copy. */
async function repositoryServers(ctx: StageContext) {
  for (const name of configNames(ctx.config.github?.slug)) {
    const text = await readText(ctx.workdir, name, { maxBytes: CONFIG_MAX_BYTES });
    if (text === undefined) continue;
    let doc: unknown;
    try {
      doc = await parseRepositoryYaml(text);
    } catch {
      return { servers: {}, problems: [], source: name };
    }
    return { ...parseMcpServers(doc, name), source: name };
  }
  return { servers: {}, problems: [], source: "" };
}

/**
 * The redaction scope of a task's stage (util/redact.ts): the task's account's MCP secrets.
 * The runner enters it where the stage runs, so they are redacted from everything the stage
 * produces and from nothing any other account's task produces.
 */
export async function taskSecretScope(models: Models, taskId: string): Promise<SecretScope> {
  const task = await taskFields(models, taskId, ["account_id"]);
  if (!task) return new SecretScope("");
  return new SecretScope(task.account_id, await mcpSecretValues(models, task.account_id));
}

/**
 * Starts the task's MCP servers for one stage: `plan` offers only read-only tools. Never
 * throws for a server: one that fails is logged and left out.
 */
export async function openStageMcpTools(
  ctx: StageContext,
  stage: "plan" | "implement" | "fix",
  log: (line: string) => void,
): Promise<McpToolbox> {
  const [repo, account] = await Promise.all([
    repositoryServers(ctx),
    mcpSettingsForTask(ctx.models, ctx.task.account_id),
  ]);
  const limited = limitRepositorySecrets(repo.servers, account.servers, repo.source);
  for (const problem of [...repo.problems, ...limited.problems]) log(problem);
  const servers = { ...account.servers, ...limited.servers };
  if (Object.keys(servers).length === 0) return NO_MCP_TOOLS;
  // Scrubbed from this task's text only (logs, events, prompts): the runner's scope read them
  // when the stage started; a value set since is added to it.
  const scope = currentSecretScope();
  for (const value of Object.values(account.secrets)) scope?.add(value);
  return openMcpTools({
    servers,
    secrets: account.secrets,
    cwd: ctx.workdir,
    allowedUrls: ctx.config.mcpAllowedUrls,
    readOnly: stage === "plan",
    startTimeoutMs: START_TIMEOUT_MS,
    callTimeoutMs: ctx.config.pipeline.commandTimeoutS * 1000,
    log,
    signal: ctx.signal,
  });
}
