import { collectionOf, type Models } from "../../db/models.js";
import { errors } from "../../errors.js";
import { mcpServersSchema, type McpServers } from "../../tools/mcp-tools.js";

/*
 * An account's MCP servers and their secrets (docs/mcp.md, "Giving the agent MCP tools"):
 * the servers every task of the account offers its agent, besides a repository's own
 * `.github/foreman.yml` `mcp_servers:`; the secrets are the values servers name in
 * `env_secrets` / `header_secrets`. Secrets are write-only: answered by name, never by value.
 */

interface McpSettingRecord {
  _id: string;
  servers: McpServers;
  secrets: Record<string, string>;
  created_at?: Date;
  updated_at?: Date;
}

export interface McpSettingsView {
  servers: McpServers;
  /** Names of the secrets set, sorted; their values are never answered. */
  secrets: string[];
  updated_at: string | null;
}

/** Secrets one account may keep. */
export const MAX_MCP_SECRETS = 50;

const settingsOf = (models: Models) => collectionOf<McpSettingRecord>(models.McpSetting);

function toView(doc: McpSettingRecord | null): McpSettingsView {
  return {
    servers: doc?.servers ?? {},
    secrets: Object.keys(doc?.secrets ?? {}).sort(),
    updated_at: doc?.updated_at?.toISOString() ?? null,
  };
}

/** The account's MCP settings as the API shows them (secret names only). */
export async function getMcpSettings(models: Models, accountId: string): Promise<McpSettingsView> {
  return toView(await settingsOf(models).findOne({ _id: accountId }));
}

/**
 * Replaces the account's servers (when given) and sets or removes (null) secrets by name;
 * secrets not named stay as they are.
 */
export async function updateMcpSettings(
  models: Models,
  accountId: string,
  input: { servers?: McpServers | undefined; secrets?: Record<string, string | null> | undefined },
): Promise<McpSettingsView> {
  const current = await settingsOf(models).findOne({ _id: accountId });
  const secrets = { ...(current?.secrets ?? {}) };
  for (const [name, value] of Object.entries(input.secrets ?? {})) {
    if (value === null) delete secrets[name];
    else secrets[name] = value;
  }
  if (Object.keys(secrets).length > MAX_MCP_SECRETS)
    throw errors.validation([
      { path: "body.secrets", message: `At most ${MAX_MCP_SECRETS} secrets per account.` },
    ]);
  const servers = input.servers ? mcpServersSchema.parse(input.servers) : (current?.servers ?? {});
  const now = new Date();
  await settingsOf(models).updateOne(
    { _id: accountId },
    { $set: { servers, secrets, updated_at: now }, $setOnInsert: { created_at: now } },
    { upsert: true },
  );
  return toView({ _id: accountId, servers, secrets, updated_at: now });
}

/** What a task's agent uses: the account's servers and secret values (pipeline only). */
export async function mcpSettingsForTask(
  models: Models,
  accountId: string,
): Promise<{ servers: McpServers; secrets: Record<string, string> }> {
  const doc = await settingsOf(models).findOne({ _id: accountId });
  return { servers: doc?.servers ?? {}, secrets: doc?.secrets ?? {} };
}

/**
 * The account's MCP secret values alone (the pipeline's redaction scope of a task of the
 * account, util/redact.ts): empty for an account without settings.
 */
export async function mcpSecretValues(models: Models, accountId: string): Promise<string[]> {
  const doc = await settingsOf(models).findOne({ _id: accountId }, { projection: { secrets: 1 } });
  return Object.values(doc?.secrets ?? {});
}
