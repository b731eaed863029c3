import { z } from "zod";
import { mcpSecretName, mcpServersSchema } from "../../../tools/mcp-tools.js";
import { timestamp } from "../../schemas.js";

export const mcpServers = mcpServersSchema
  .describe(
    "server name → {command, args?, env_secrets?} (run over stdio in the task's sandbox) or {url, header_secrets?} (must match MCP_ALLOWED_URLS)",
  )
  .meta({ id: "McpServers" });

export const updateMcpSettingsBody = z
  .strictObject({
    servers: mcpServers.optional().describe("replaces the account's servers when given"),
    secrets: z
      .record(mcpSecretName, z.string().min(1).max(10_000).nullable())
      .optional()
      .describe("secret name → value to set, or null to remove; secrets not named are kept"),
  })
  .meta({ id: "UpdateMcpSettingsBody" });

export const mcpSettings = z
  .object({
    servers: mcpServers,
    secrets: z.array(z.string()).describe("names of the secrets set; values are never answered"),
    updated_at: timestamp.nullable(),
  })
  .meta({ id: "McpSettings" });
