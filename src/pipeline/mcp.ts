import { parse as parseYaml } from "yaml";
import { mcpSettingsForTask } from "../domain/mcp-settings.js";
import {
  NO_MCP_TOOLS,
  openMcpTools,
  parseMcpServers,
  type McpToolbox,
} from "../tools/mcp-tools.js";
import { registerSecret } from "../util/redact.js";
import { readText } from "../util/workcopy-fs.js";
import { configNames } from "../verify/checks.js";
import type { StageContext } from "./stage.js";

/*
 * The MCP servers a stage's agent gets (tools/mcp-tools.ts): the account's (domain/mcp-settings.ts)
 * and the repository's `.github/foreman.yml` `mcp_servers:` (the repository's win on a shared
 * name). Started for one model loop and closed after it; every start, failure and call is a
 * line of the task's log.
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
      doc = parseYaml(text);
    } catch {
      return { servers: {}, problems: [] };
    }
    return parseMcpServers(doc, name);
  }
  return { servers: {}, problems: [] };
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
  for (const problem of repo.problems) log(problem);
  const servers = { ...account.servers, ...repo.servers };
  if (Object.keys(servers).length === 0) return NO_MCP_TOOLS;
  // Scrubbed wherever they might appear (logs, events, prompts): util/redact.ts.
  for (const value of Object.values(account.secrets)) registerSecret(value);
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
