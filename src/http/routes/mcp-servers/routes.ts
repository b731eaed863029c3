import { getMcpSettings, updateMcpSettings } from "../../../domain/agents/mcp-settings.js";
import { route, type AnyRoute } from "../../route.js";
import { mcpSettings, updateMcpSettingsBody } from "./schema.js";

/** The account's MCP servers for its tasks' agents, and their write-only secrets (docs/mcp.md). */
export const mcpServerRoutes: AnyRoute[] = [
  route({
    method: "get",
    path: "/settings/mcp-servers",
    operationId: "getMcpSettings",
    tag: "settings",
    summary: "The account's MCP servers for its tasks (extension)",
    description:
      "Servers every task of the account offers its agent as `mcp__<server>__<tool>` tools, besides the repository's own `.github/foreman.yml` `mcp_servers:` (which wins on a shared name). Secrets are listed by name only.",
    auth: "key",
    status: 200,
    response: { description: "The settings", schema: mcpSettings },
    async handler(_ctx, { principal, deps }) {
      return getMcpSettings(deps.models, principal.accountId);
    },
  }),
  route({
    method: "patch",
    path: "/settings/mcp-servers",
    operationId: "updateMcpSettings",
    tag: "settings",
    summary: "Set the account's MCP servers and secrets (extension)",
    description:
      "`servers` replaces the account's servers; `secrets` sets (a string) or removes (null) secrets by name and keeps the others. Secret values are write-only: never answered, logged or shown to a model; a server gets them as the environment variables its `env_secrets` names, or the headers of its `header_secrets`.",
    auth: "key",
    body: updateMcpSettingsBody,
    status: 200,
    response: { description: "The settings", schema: mcpSettings },
    async handler(_ctx, { body, principal, deps }) {
      return updateMcpSettings(deps.models, principal.accountId, body);
    },
  }),
];
