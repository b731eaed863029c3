import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { setImmediate as nextTurn } from "node:timers/promises";
import { z } from "zod";
import type { ExecutableTool } from "../llm/types.js";
import { redactText } from "../util/redact.js";
import { SERVICE_VERSION } from "../util/version.js";
import { SandboxedStdioTransport } from "../sandbox/process.js";
import {
  checkSchema,
  createSchemaBudget,
  toolInputJsonSchema,
  TOOLBOX_SCHEMA_LIMITS,
  UNCHECKED_OUTPUT_SCHEMAS,
  type SchemaCost,
} from "./schema-limits.js";

/*
 * MCP servers as the agent's tools (docs/mcp.md, "Giving the agent MCP tools"). A repository's
 * `.github/foreman.yml` `mcp_servers:` (and the account's setting) names them: a command run
 * over stdio inside the task's sandbox (sandbox/process.ts), or an HTTP URL the operator
 * allowed (MCP_ALLOWED_URLS). Their tools reach the model as `mcp__<server>__<tool>`; while
 * planning only those the server marks read-only. A server that does not start is logged and
 * left out: the task goes on without it.
 */

const serverName = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$/, "letters, digits, - and _, at most 32");
export const mcpSecretName = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_]{0,63}$/, "an environment variable name");
const headerName = z.string().regex(/^[A-Za-z0-9-]{1,64}$/, "an HTTP header name");

/** One server of `mcp_servers:`: a stdio command or an HTTP URL. */
export const mcpServerEntry = z.union([
  z.strictObject({
    command: z.string().trim().min(1).max(1000).describe("run in the task's sandbox, over stdio"),
    args: z.array(z.string().max(4000)).max(100).optional(),
    env_secrets: z
      .array(mcpSecretName)
      .max(50)
      .optional()
      .describe("names of the account's MCP secrets, passed as environment variables"),
  }),
  z.strictObject({
    url: z.url().max(2000).describe("Streamable HTTP endpoint; must match MCP_ALLOWED_URLS"),
    header_secrets: z
      .record(headerName, mcpSecretName)
      .optional()
      .describe("HTTP header → the account's MCP secret whose value it carries"),
  }),
]);
export type McpServerEntry = z.infer<typeof mcpServerEntry>;

export const mcpServersSchema = z
  .record(serverName, mcpServerEntry)
  .refine((servers) => Object.keys(servers).length <= 20, "at most 20 MCP servers");
export type McpServers = z.infer<typeof mcpServersSchema>;

/**
 * The `mcp_servers:` of a parsed repository config document; problems are sentences for the
 * task log (a malformed entry is left out, the others still count).
 */
export function parseMcpServers(
  doc: unknown,
  source: string,
): { servers: McpServers; problems: string[] } {
  const raw =
    doc && typeof doc === "object" ? (doc as Record<string, unknown>).mcp_servers : undefined;
  if (raw === undefined || raw === null) return { servers: {}, problems: [] };
  if (typeof raw !== "object" || Array.isArray(raw))
    return { servers: {}, problems: [`${source}: mcp_servers must map names to servers`] };
  const servers: McpServers = {};
  const problems: string[] = [];
  for (const [name, entry] of Object.entries(raw as Record<string, unknown>).slice(0, 20)) {
    const parsedName = serverName.safeParse(name);
    const parsed = mcpServerEntry.safeParse(entry);
    if (!parsedName.success || !parsed.success) {
      problems.push(
        `${source}: mcp_servers.${name.slice(0, 40)} is not {command, args?, env_secrets?} or {url, header_secrets?} with a name of letters, digits, - and _`,
      );
      continue;
    }
    servers[name] = parsed.data;
  }
  return { servers, problems };
}

/** The secret names a server entry uses (`env_secrets`, or `header_secrets`' values). */
function secretsOf(entry: McpServerEntry): string[] {
  return "command" in entry ? (entry.env_secrets ?? []) : Object.values(entry.header_secrets ?? {});
}

/**
 * A repository's servers as far as they may use the account's secrets: an entry may name only
 * secrets the account attached to its own server of the same name, and an HTTP entry may
 * carry them only to that server's URL. An entry asking for more is left out (the account's
 * own server of that name, if any, stays), with a sentence for the task log.
 */
export function limitRepositorySecrets(
  repository: McpServers,
  account: McpServers,
  source: string,
): { servers: McpServers; problems: string[] } {
  const servers: McpServers = {};
  const problems: string[] = [];
  for (const [name, entry] of Object.entries(repository)) {
    const wanted = secretsOf(entry);
    const own = account[name];
    const attached = own ? secretsOf(own) : [];
    const denied = wanted.filter((secret) => !attached.includes(secret));
    const elsewhere =
      wanted.length > 0 &&
      own !== undefined &&
      ("url" in entry
        ? !("url" in own) || new URL(entry.url).href !== new URL(own.url).href
        : !("command" in own));
    if (denied.length > 0 || elsewhere) {
      problems.push(
        denied.length > 0
          ? `${source}: MCP server ${name} asks for the account's secret${denied.length === 1 ? "" : "s"} ${denied.join(", ")}, which the account did not attach to its own server ${name}; this entry is left out.`
          : `${source}: MCP server ${name} would carry the account's secrets to ${"url" in entry ? "another URL" : "another kind of server"} than the account's own server ${name}; this entry is left out.`,
      );
      continue;
    }
    servers[name] = entry;
  }
  return { servers, problems };
}

/**
 * A URL path's segments decoded, or undefined when its encoding is ambiguous: a segment that
 * decodes to `/`, `\\`, `%` (double encoding), a control character, or a `.`/`..` segment
 * (also `..;`, which some servers read as `..`). A server may decode such a path into one
 * outside the allowed prefix after the check.
 */
function decodedSegments(pathname: string): string[] | undefined {
  const segments: string[] = [];
  for (const raw of pathname.split("/").slice(1)) {
    let segment: string;
    try {
      segment = decodeURIComponent(raw);
    } catch {
      return undefined;
    }
    const bare = segment.split(";")[0];
    // Control characters are what is looked for here.
    // eslint-disable-next-line no-control-regex
    if (/[/\\%\x00-\x1f\x7f]/.test(segment) || bare === "." || bare === "..") return undefined;
    segments.push(segment);
  }
  return segments;
}

/**
 * Whether an HTTP server's URL is allowed: one of MCP_ALLOWED_URLS with the same origin and
 * a path at or below its path (`https://h/mcp` allows `https://h/mcp` and `https://h/mcp/x`),
 * compared decoded and normalized; an ambiguously encoded path is refused.
 */
export function isAllowedMcpUrl(url: string, allowed: readonly string[]): boolean {
  if (!URL.canParse(url)) return false;
  const target = new URL(url);
  if (target.username || target.password) return false;
  const path = decodedSegments(target.pathname);
  if (!path) return false;
  const joined = `/${path.join("/")}`;
  return allowed.some((entry) => {
    if (!URL.canParse(entry)) return false;
    const rule = new URL(entry);
    if (rule.origin !== target.origin) return false;
    const ruleSegments = decodedSegments(rule.pathname);
    if (!ruleSegments) return false;
    const base = `/${ruleSegments.join("/")}`.replace(/\/+$/, "");
    return joined === base || joined.startsWith(`${base}/`) || base === "";
  });
}

/**
 * The fetch of an HTTP MCP server's transport: every request's URL is checked as the first
 * (MCP_ALLOWED_URLS), and a redirect is never followed (it could lead the secret headers to
 * another path of the same origin): the request fails instead.
 */
export function allowedMcpFetch(allowed: readonly string[]) {
  return async (url: string | URL, init?: RequestInit): Promise<Response> => {
    const href = url instanceof URL ? url.href : url;
    if (!isAllowedMcpUrl(href, allowed))
      throw new Error(`${redactText(href)} is not in MCP_ALLOWED_URLS`);
    const response = await fetch(url, { ...init, redirect: "manual" });
    if (response.type === "opaqueredirect" || (response.status >= 300 && response.status < 400)) {
      await response.body?.cancel().catch(() => undefined);
      throw new Error(
        `the server answered a redirect (HTTP ${response.status}); redirects are not followed`,
      );
    }
    return response;
  };
}

/** The model's name of a server's tool: `mcp__<server>__<tool>`, at most 64 characters. */
export function mcpToolName(server: string, tool: string): string {
  return `mcp__${server}__${tool.replace(/[^A-Za-z0-9_-]/g, "_")}`.slice(0, 64);
}

export interface McpToolOptions {
  servers: McpServers;
  /** The account's MCP secrets, by name (write-only settings; never logged). */
  secrets: Readonly<Record<string, string>>;
  /** The working copy: stdio servers start in it, inside the sandbox. */
  cwd: string;
  allowedUrls: readonly string[];
  /** Planning: only the tools a server marks read-only (annotations.readOnlyHint). */
  readOnly: boolean;
  startTimeoutMs: number;
  callTimeoutMs: number;
  /** One line for the task's log (started, failed, each call). */
  log(line: string): void;
  signal?: AbortSignal | undefined;
}

export interface McpToolbox {
  tools: ExecutableTool[];
  close(): Promise<void>;
}

/** No tools, nothing to close. */
export const NO_MCP_TOOLS: McpToolbox = { tools: [], close: () => Promise.resolve() };

type ContentPart = { type: string; text?: string; resource?: { uri?: string; text?: string } };

/** A tool result's content as text for the model (images and audio named, not inlined). */
function resultText(result: {
  content?: unknown;
  structuredContent?: unknown;
  isError?: boolean;
}): string {
  const parts = Array.isArray(result.content) ? (result.content as ContentPart[]) : [];
  const text = parts
    .map((part) => {
      if (part.type === "text") return part.text ?? "";
      if (part.type === "resource")
        return part.resource?.text ?? `[resource ${part.resource?.uri ?? ""}]`;
      if (part.type === "resource_link") return `[resource link]`;
      return `[${part.type} content omitted]`;
    })
    .join("\n");
  if (text.trim()) return text;
  return result.structuredContent === undefined ? "" : JSON.stringify(result.structuredContent);
}

function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms / 1000} s`)), ms);
  });
  return Promise.race([promise, expired]).finally(() => clearTimeout(timer));
}

/*
 * A tool's arguments are checked by its server: converting a server's schema to zod and back
 * inlines its `$ref`s on the event loop (issue #40). The model is sent the server's own
 * schema, once tools/schema-limits.ts has checked it; here they need only be an object.
 */
const mcpArguments = z.record(z.string(), z.unknown());

type ListedTool = { name: string; inputSchema: unknown };

/**
 * The listed tools whose input schema is within tools/schema-limits.ts, with what each
 * costs; one log line for each one left out. One tool per turn of the event loop.
 */
async function withinLimits<T extends ListedTool>(
  server: string,
  tools: T[],
  log: (line: string) => void,
): Promise<Array<{ tool: T; cost: SchemaCost }>> {
  const max = TOOLBOX_SCHEMA_LIMITS.maxToolsPerServer;
  if (tools.length > max)
    log(
      `MCP server ${server}: ${tools.length - max} tools after the first ${max} left out (limit ${max} tools a server).`,
    );
  const kept: Array<{ tool: T; cost: SchemaCost }> = [];
  for (const tool of tools.slice(0, max)) {
    await nextTurn();
    const check = checkSchema(tool.inputSchema);
    if (check.ok) kept.push({ tool, cost: check.cost });
    else
      log(
        `MCP server ${server}: tool ${mcpToolName(server, tool.name)} left out: its input schema ${check.reason}.`,
      );
  }
  return kept;
}

/** Starts the servers (in parallel), lists their tools, and offers them to the model. */
export async function openMcpTools(options: McpToolOptions): Promise<McpToolbox> {
  const names = Object.keys(options.servers);
  if (names.length === 0) return NO_MCP_TOOLS;
  const secretValues = Object.values(options.secrets).filter((v) => v.length >= 4);
  const scrub = (text: string) => {
    let out = text;
    for (const value of secretValues) out = out.split(value).join("[REDACTED]");
    return redactText(out);
  };
  const clients: Client[] = [];
  const costs = new WeakMap<ExecutableTool, SchemaCost>();
  const started = await Promise.all(
    names.map(async (name): Promise<ExecutableTool[]> => {
      const entry = options.servers[name]!;
      let transport: Transport;
      let stdio: SandboxedStdioTransport | undefined;
      const missing: string[] = [];
      const secret = (key: string) => {
        const value = options.secrets[key];
        if (value === undefined) missing.push(key);
        return value ?? "";
      };
      if ("command" in entry) {
        const env = Object.fromEntries((entry.env_secrets ?? []).map((k) => [k, secret(k)]));
        transport = stdio = new SandboxedStdioTransport([entry.command, ...(entry.args ?? [])], {
          cwd: options.cwd,
          env,
        });
      } else {
        if (!isAllowedMcpUrl(entry.url, options.allowedUrls)) {
          options.log(
            `MCP server ${name}: ${redactText(entry.url)} is not in MCP_ALLOWED_URLS; the task goes on without it.`,
          );
          return [];
        }
        const headers = Object.fromEntries(
          Object.entries(entry.header_secrets ?? {}).map(([h, k]) => [h, secret(k)]),
        );
        transport = new StreamableHTTPClientTransport(new URL(entry.url), {
          requestInit: { headers },
          fetch: allowedMcpFetch(options.allowedUrls),
        });
      }
      if (missing.length > 0)
        options.log(
          `MCP server ${name}: no MCP secret named ${missing.join(", ")} on this account; starting it without.`,
        );
      const client = new Client(
        { name: "foreman", version: SERVICE_VERSION },
        { jsonSchemaValidator: UNCHECKED_OUTPUT_SCHEMAS },
      );
      try {
        await withTimeout(client.connect(transport), options.startTimeoutMs, "starting");
        clients.push(client);
        const { tools } = await withTimeout(
          client.listTools(),
          options.startTimeoutMs,
          "listing tools",
        );
        const readable = tools.filter(
          (t) => !options.readOnly || t.annotations?.readOnlyHint === true,
        );
        const checked = await withinLimits(name, readable, options.log);
        const offered = checked.map((c) => c.tool);
        options.log(
          `MCP server ${name} started: ${offered.length} tool${offered.length === 1 ? "" : "s"}${offered.length ? ` (${offered.map((t) => mcpToolName(name, t.name)).join(", ")})` : ""}${options.readOnly && readable.length < tools.length ? `; ${tools.length - readable.length} not read-only, left out while planning` : ""}.`,
        );
        return checked.map(({ tool: t, cost }): ExecutableTool => {
          const toolName = mcpToolName(name, t.name);
          const tool: ExecutableTool = {
            name: toolName,
            description: `[MCP server ${name}] ${(t.description ?? t.title ?? t.name).slice(0, 1000)}`,
            input: mcpArguments,
            inputJsonSchema: toolInputJsonSchema(t.inputSchema),
            async execute(input) {
              const result = (await client.callTool(
                { name: t.name, arguments: input as Record<string, unknown> },
                undefined,
                {
                  timeout: options.callTimeoutMs,
                  ...(options.signal ? { signal: options.signal } : {}),
                },
              )) as { content?: unknown; structuredContent?: unknown; isError?: boolean };
              const text = scrub(resultText(result));
              options.log(
                `${toolName}: ${result.isError ? "error" : "ok"} (${text.length} characters)`,
              );
              return result.isError ? `Error: ${text || "the tool failed"}` : text || "(no output)";
            },
          };
          costs.set(tool, cost);
          return tool;
        });
      } catch (error) {
        const reason = scrub(
          stdio?.failure ?? (error instanceof Error ? error.message : String(error)),
        );
        const tail = stdio?.stderr
          ? scrub(stdio.stderr)
              .slice(-500)
              .replace(/\s*\n\s*/g, " | ")
          : "";
        const stderr = tail ? `; its stderr ends: ${tail}` : "";
        options.log(
          `MCP server ${name} did not start (${reason}${stderr}); the task goes on without it.`,
        );
        await client.close().catch(() => undefined);
        await transport.close().catch(() => undefined);
        return [];
      }
    }),
  );
  // Two servers' names may meet after cutting to 64 characters: the first keeps it. Past the
  // room for all tools' schemas together, the servers named first keep theirs.
  const seen = new Set<string>();
  const budget = createSchemaBudget();
  const tools = started.flat().filter((t) => {
    if (seen.has(t.name)) return false;
    seen.add(t.name);
    const over = budget.take(costs.get(t) ?? { nodes: 0, bytes: 0 });
    if (over) options.log(`MCP tool ${t.name} left out: its input schema ${over}.`);
    return !over;
  });
  return {
    tools,
    async close() {
      await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
    },
  };
}
