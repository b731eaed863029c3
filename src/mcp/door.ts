import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import {
  CallToolRequestSchema,
  ErrorCode,
  ListToolsRequestSchema,
  McpError,
  type CallToolResult,
} from "@modelcontextprotocol/sdk/types.js";
import type { ZodError } from "zod";
import { authenticateKey, isKeyWithdrawn, type Principal } from "../domain/accounts/keys.js";
import { AppError, errors, isAppError, isDatabaseBusy, isDatabaseOutage } from "../errors.js";
import { boundReached, ConcurrencyBounds, type Holder } from "../util/concurrency-bounds.js";
import { SERVICE_VERSION } from "../util/version.js";
import { objectJsonSchema } from "./json-schema.js";
import { registerTaskResources } from "./resources.js";
import { MCP_TOOLS, type AnyMcpTool } from "./tools.js";
import type { McpDeps } from "./types.js";
import { TaskWaits } from "./wait.js";

/*
 * The fourth door (docs/mcp.md, "The MCP door"): the Model Context Protocol's Streamable HTTP
 * transport at /mcp, on the API's own server. Every request carries the API key (X-API-Key,
 * or Authorization: Bearer) and is authenticated like a REST call; a session is bound to the
 * key that opened it, and ends when that key is revoked (checked on each request, and every
 * KEY_CHECK_MS for open streams and waits). Sessions live in this process: behind several
 * API processes, route /mcp by its Mcp-Session-Id header (sticky sessions).
 */

const SERVER_INFO = { name: "foreman", version: SERVICE_VERSION };
/** As the REST door's body limit (docs/api.md, "Errors": 413 over 1 MiB). */
const MAX_BODY_BYTES = 1024 * 1024;
const KEY_CHECK_MS = 5_000;
/** A session nobody used for this long is closed (a client opens a new one). */
const SESSION_IDLE_MS = 30 * 60_000;
/**
 * Sessions are bounded per key and per account (MCP_SESSIONS_PER_KEY, _PER_ACCOUNT) and per
 * process (MCP_MAX_SESSIONS). A new session past a bound takes the place of the idlest
 * session of the same key (or account) that has no request open and was not used for this
 * long (a client that lost its session id still gets in); when there is none, 429
 * `rate_limited`. The process's bound takes a place from the account holding the most
 * sessions, never from a smaller one's.
 */
const SESSION_REUSE_GRACE_MS = 60_000;
/** Retry-After when every session in the way has a request open. */
const SESSION_BUSY_RETRY_S = 10;
/** Retry-After of a refused wait with no other wait's end known (mcp/wait.ts). */
const WAIT_RETRY_S = 5;
/** Retry-After of a request refused because the key has too many open (most end at once). */
const REQUEST_RETRY_S = 1;

interface Session {
  id: string;
  principal: Principal;
  transport: StreamableHTTPServerTransport;
  server: McpServer;
  lastSeen: number;
  /** Requests of the session still open (a wait, a stream): it is in use. */
  active: number;
  /** Gives back the session's place under the key's and account's bounds. */
  release: () => void;
}

/** The door as the HTTP server mounts it (http/app.ts). */
export interface McpDoor {
  handle(req: IncomingMessage, res: ServerResponse): Promise<void>;
  /** Number of open sessions (tests, metrics). */
  readonly sessions: number;
  /** Number of wait_for_task calls open, and of tasks they watch (tests, metrics). */
  readonly waits: { open: number; tasks: number };
  close(): Promise<void>;
}

function presentedKey(req: IncomingMessage): string {
  const header = req.headers["x-api-key"];
  const key = Array.isArray(header) ? header[0] : header;
  if (key) return key;
  const bearer = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? "");
  return bearer?.[1] ?? "";
}

function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
) {
  if (res.headersSent) return void res.end();
  res.writeHead(status, { "Content-Type": "application/json", ...headers });
  res.end(JSON.stringify(body));
}

/** The REST error body for a plain HTTP refusal (401 before any JSON-RPC is read). */
function sendError(res: ServerResponse, error: AppError) {
  const headers = { ...(error.headers ?? {}) };
  if (error.status === 401) headers["WWW-Authenticate"] = 'Bearer realm="foreman"';
  const details = error.details === undefined ? {} : { details: error.details };
  sendJson(
    res,
    error.status,
    { error: { code: error.code, message: error.message, ...details } },
    headers,
  );
}

function jsonRpcError(res: ServerResponse, status: number, code: number, message: string) {
  sendJson(res, status, { jsonrpc: "2.0", error: { code, message }, id: null });
}

function problems(error: ZodError) {
  return error.issues.map((issue) => ({
    path: ["arguments", ...issue.path.map(String)].join("."),
    message: issue.message,
  }));
}

/** A tool error carrying the REST error body (`{error: {code, message, details?}}`). */
function toolError(error: AppError): CallToolResult {
  const body = {
    error: {
      code: error.code,
      message: error.message,
      ...(error.details === undefined ? {} : { details: error.details }),
    },
  };
  return { isError: true, content: [{ type: "text", text: JSON.stringify(body) }] };
}

export function createMcpDoor(deps: McpDeps): McpDoor {
  const sessions = new Map<string, Session>();
  const limits = deps.config.bounds;
  const waits = new TaskWaits(
    deps,
    new ConcurrencyBounds({
      what: "wait_for_task calls",
      perKey: limits.mcpWaits.perKey,
      perKeySetting: "MCP_WAITS_PER_KEY",
      perAccount: limits.mcpWaits.perAccount,
      perAccountSetting: "MCP_WAITS_PER_ACCOUNT",
      retryAfterS: WAIT_RETRY_S,
    }),
  );
  const sessionBounds = new ConcurrencyBounds({
    what: "MCP sessions",
    perKey: limits.mcpSessions.perKey,
    perKeySetting: "MCP_SESSIONS_PER_KEY",
    perAccount: limits.mcpSessions.perAccount,
    perAccountSetting: "MCP_SESSIONS_PER_ACCOUNT",
    retryAfterS: (scope, holder) => retryAfter(sessionsOf(scope, holder)),
  });
  // Every open request of a key (waits and streams included), checked right after the key:
  // a flood past it is refused before the SDK's transport parses anything.
  const requestBounds = new ConcurrencyBounds({
    what: "MCP requests",
    perKey: limits.mcpRequests.perKey,
    perKeySetting: "MCP_REQUESTS_PER_KEY",
    perAccount: limits.mcpRequests.perAccount,
    perAccountSetting: "MCP_REQUESTS_PER_ACCOUNT",
    retryAfterS: REQUEST_RETRY_S,
  });
  /** Sessions being opened (counted against the process's bound before they exist). */
  let opening = 0;
  const byName = new Map<string, AnyMcpTool>(MCP_TOOLS.map((t) => [t.name, t]));
  // Converted once: every session lists the same tools.
  const listed = MCP_TOOLS.map((t) => ({
    name: t.name,
    title: t.title,
    description: t.description,
    inputSchema: objectJsonSchema(t.input, "input"),
    outputSchema: objectJsonSchema(t.output, "output"),
    annotations: { title: t.title, readOnlyHint: t.readOnly, openWorldHint: false },
  }));

  function asAppError(error: unknown): AppError {
    if (isAppError(error)) return error;
    if (isDatabaseOutage(error)) return errors.databaseUnavailable();
    if (isDatabaseBusy(error)) return errors.databaseBusy();
    deps.logger.error({ err: error }, "MCP tool failed");
    return new AppError(
      500,
      "internal",
      "Something went wrong on our side; the failure was logged.",
    );
  }

  function buildServer(principal: () => Principal): McpServer {
    const server = new McpServer(SERVER_INFO, {
      capabilities: { tools: { listChanged: false } },
      instructions:
        "Foreman plans, implements, verifies and opens pull requests for software tasks. create_task, then wait_for_task: it returns at the plan gate (approve_plan, revise_task or reject_plan), then at the diff gate (approve_diff, revise_task or reject_diff), then at the end.",
    });
    server.server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: listed }));
    server.server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
      const tool = byName.get(request.params.name);
      if (!tool)
        throw new McpError(ErrorCode.InvalidParams, `Tool ${request.params.name} not found`);
      const parsed = tool.input.safeParse(request.params.arguments ?? {});
      if (!parsed.success) return toolError(errors.validation(problems(parsed.error)));
      const token = request.params._meta?.progressToken;
      try {
        const result = (await tool.run(parsed.data, {
          principal: principal(),
          deps,
          signal: extra.signal,
          waits,
          async progress(progress, message) {
            if (token === undefined) return;
            await extra.sendNotification({
              method: "notifications/progress",
              params: { progressToken: token, progress, message },
            });
          },
        })) as Record<string, unknown>;
        return {
          content: [{ type: "text", text: JSON.stringify(result) }],
          structuredContent: result,
        };
      } catch (error) {
        return toolError(asAppError(error));
      }
    });
    registerTaskResources(server, deps, principal);
    return server;
  }

  async function end(session: Session, why: string): Promise<void> {
    if (!sessions.delete(session.id)) return;
    session.release();
    deps.logger.debug(
      { session: session.id, key: session.principal.keyId, why },
      "MCP session ended",
    );
    await session.server.close().catch(() => undefined);
  }

  function sessionsOf(scope: "key" | "account", holder: Holder): Session[] {
    return [...sessions.values()].filter((s) =>
      scope === "key"
        ? s.principal.keyId === holder.keyId
        : s.principal.accountId === holder.accountId,
    );
  }

  /** Whether a session may give its place to a new one (see SESSION_REUSE_GRACE_MS). */
  const spare = (session: Session, now: number) =>
    session.active === 0 && now - session.lastSeen >= SESSION_REUSE_GRACE_MS;

  /** Seconds until one of these sessions may give its place. */
  function retryAfter(list: Session[]): number {
    const now = Date.now();
    const idle = list.filter((s) => s.active === 0).map((s) => s.lastSeen);
    if (idle.length === 0) return SESSION_BUSY_RETRY_S;
    return (Math.min(...idle) + SESSION_REUSE_GRACE_MS - now) / 1000;
  }

  function idlestSpare(list: Session[]): Session | undefined {
    const now = Date.now();
    return list.filter((s) => spare(s, now)).sort((a, b) => a.lastSeen - b.lastSeen)[0];
  }

  /**
   * A place under the key's and the account's bounds, taken from the idlest spare session
   * of the same key or account when full (see SESSION_REUSE_GRACE_MS); else 429.
   */
  function claim(principal: Principal): () => void {
    for (let tries = 0; ; tries++) {
      try {
        return sessionBounds.acquire(principal);
      } catch (error) {
        const scope = (error as AppError).details as { scope: "key" | "account" } | undefined;
        const victim =
          scope && tries < 2 ? idlestSpare(sessionsOf(scope.scope, principal)) : undefined;
        if (!victim) throw error;
        // end() gives the place back at once; the close itself finishes in the background.
        void end(victim, `too many sessions of this ${scope!.scope}`);
      }
    }
  }

  /** Room under MCP_MAX_SESSIONS: a spare session of the account holding the most. */
  function makeRoom(): void {
    if (sessions.size + opening < limits.mcpSessions.total) return;
    const held = new Map<string, number>();
    for (const s of sessions.values())
      held.set(s.principal.accountId, (held.get(s.principal.accountId) ?? 0) + 1);
    const now = Date.now();
    const victim = [...sessions.values()]
      .filter((s) => spare(s, now))
      .sort(
        (a, b) =>
          (held.get(b.principal.accountId) ?? 0) - (held.get(a.principal.accountId) ?? 0) ||
          a.lastSeen - b.lastSeen,
      )[0];
    if (!victim)
      throw boundReached(
        `This server holds ${limits.mcpSessions.total} MCP sessions, its bound (MCP_MAX_SESSIONS)`,
        Math.max(1, Math.ceil(retryAfter([...sessions.values()]))),
        { scope: "process", limit: limits.mcpSessions.total, setting: "MCP_MAX_SESSIONS" },
      );
    void end(victim, "too many sessions in this process");
  }

  async function open(req: IncomingMessage, res: ServerResponse, principal: Principal) {
    const release = claim(principal);
    try {
      makeRoom();
    } catch (error) {
      release();
      throw error;
    }
    opening += 1;
    let session: Session | undefined;
    try {
      const transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        maxRequestBodySize: MAX_BODY_BYTES,
        onsessioninitialized(id) {
          session = { id, principal, transport, server, lastSeen: Date.now(), active: 0, release };
          sessions.set(id, session);
        },
      });
      transport.onclose = () => {
        if (session) void end(session, "closed");
      };
      const server = buildServer(() => principal);
      await server.connect(transport);
      await transport.handleRequest(req, res);
      // Anything but an initialize request opens nothing (the transport answered 400).
      if (!session) await server.close().catch(() => undefined);
    } finally {
      opening -= 1;
      if (!session) release();
    }
  }

  /** A request on an open session: it is in use until the answer (or stream) ends. */
  function serve(session: Session, req: IncomingMessage, res: ServerResponse) {
    session.lastSeen = Date.now();
    session.active += 1;
    res.once("close", () => {
      session.active -= 1;
      session.lastSeen = Date.now();
    });
    return session.transport.handleRequest(req, res);
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const header = req.headers["mcp-session-id"];
    const sessionId = Array.isArray(header) ? header[0] : header;
    const session = sessionId ? sessions.get(sessionId) : undefined;
    const key = presentedKey(req);
    if (!key)
      return sendError(
        res,
        errors.unauthorized(
          "A valid API key is required in the X-API-Key or Authorization: Bearer header.",
        ),
      );
    const principal = await authenticateKey(deps.models, key);
    if (!principal) {
      if (session && (await isKeyWithdrawn(deps.models, session.principal.keyId)))
        await end(session, "API key revoked");
      return sendError(res, errors.unauthorized("The API key is unknown or has been revoked."));
    }
    res.once("close", requestBounds.acquire(principal));
    if (sessionId) {
      // Another key, even of the same account, never reaches a session: as if it did not exist.
      if (!session || session.principal.keyId !== principal.keyId)
        return jsonRpcError(res, 404, -32001, "Session not found");
      return serve(session, req, res);
    }
    if (req.method !== "POST")
      return jsonRpcError(
        res,
        400,
        ErrorCode.InvalidRequest,
        "Bad Request: Mcp-Session-Id header is required",
      );
    return open(req, res, principal);
  }

  const checker = setInterval(() => {
    void (async () => {
      const now = Date.now();
      const keys = new Map<string, Session[]>();
      for (const session of sessions.values()) {
        if (session.active === 0 && now - session.lastSeen > SESSION_IDLE_MS)
          await end(session, "idle");
        else
          keys.set(session.principal.keyId, [
            ...(keys.get(session.principal.keyId) ?? []),
            session,
          ]);
      }
      for (const [keyId, owned] of keys) {
        if (await isKeyWithdrawn(deps.models, keyId))
          for (const session of owned) await end(session, "API key revoked");
      }
    })().catch((error: unknown) => deps.logger.warn({ err: error }, "MCP session check failed"));
  }, KEY_CHECK_MS);
  checker.unref();

  return {
    async handle(req, res) {
      try {
        await handle(req, res);
      } catch (error) {
        const appError = asAppError(error);
        if (!res.headersSent) sendError(res, appError);
        else res.end();
      }
    },
    get sessions() {
      return sessions.size;
    },
    get waits() {
      return { open: waits.waiting, tasks: waits.watched };
    },
    async close() {
      clearInterval(checker);
      waits.close();
      await Promise.all([...sessions.values()].map((s) => end(s, "shutdown")));
    },
  };
}
