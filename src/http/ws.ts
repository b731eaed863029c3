import { STATUS_CODES } from "node:http";
import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import { WebSocketServer, type WebSocket } from "ws";
import { authenticateKey, type Principal } from "../domain/accounts/keys.js";
import type { Models } from "../db/models.js";
import type { Logger } from "../util/logger.js";
import { isAppError, isTransientDatabaseError } from "../errors.js";
import { toAppError } from "./middleware/errors.js";

const WS_PATH = /^\/tasks\/([A-Za-z0-9_.:-]{1,100})\/ws\/?$/;
const PROTOCOL_PREFIX = "api-key.";
/** RFC 6455 close code 1001: the server is going away. */
const GOING_AWAY = 1001;

/** Decides whether a principal may watch a task, and streams it once the socket is open. */
export interface TaskStreams {
  /** False for an unknown task or one of another account (answered 404). */
  canWatch(principal: Principal, taskId: string): Promise<boolean>;
  /**
   * Takes one of the key's and the account's stream places (WS_STREAMS_PER_KEY,
   * WS_STREAMS_PER_ACCOUNT) or throws 429 `rate_limited`; the release gives it back.
   */
  reserve(principal: Principal): () => void;
  attach(socket: WebSocket, principal: Principal, taskId: string, since: number | undefined): void;
}

/**
 * Answers on a raw socket (an upgrade refused, a request Node's parser refused) with the
 * JSON error body every other answer has, and closes it.
 */
export function rejectRaw(
  socket: Duplex,
  status: number,
  code: string,
  message: string,
  headers: Record<string, string> = {},
): void {
  if (!socket.writable) return void socket.destroy();
  const body = JSON.stringify({ error: { code, message } });
  const reason = STATUS_CODES[status] ?? "Error";
  const extra = Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join("");
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${extra}Connection: close\r\n\r\n${body}`,
  );
}

/** The key from X-API-Key, or from a browser's `api-key.<key>` subprotocol. */
function presentedKey(req: IncomingMessage): {
  key: string | undefined;
  protocol: string | undefined;
} {
  const header = req.headers["x-api-key"];
  if (typeof header === "string" && header) return { key: header, protocol: undefined };
  const protocols = (req.headers["sec-websocket-protocol"] ?? "").split(",").map((p) => p.trim());
  const protocol = protocols.find((p) => p.startsWith(PROTOCOL_PREFIX));
  return { key: protocol?.slice(PROTOCOL_PREFIX.length), protocol };
}

/**
 * Handles HTTP upgrades on the API's own server: authentication and the task check happen
 * before the handshake, so a bad key is a 401 and a foreign task a 404 (docs/api.md,
 * "WebSocket /tasks/{id}/ws").
 */
export function createUpgradeHandler(deps: {
  models: Models;
  logger: Logger;
  streams: TaskStreams;
}) {
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: 64 * 1024,
    handleProtocols: (protocols) =>
      [...protocols].find((p) => p.startsWith(PROTOCOL_PREFIX)) ?? false,
  });
  // The handshake problems ws itself finds (Upgrade, Sec-WebSocket-Key/-Version/-Protocol
  // headers) are answered with the same JSON error body as ours instead of ws's plain text.
  wss.on("wsClientError", (error: Error, socket: Duplex) => {
    if (/method/i.test(error.message))
      return rejectRaw(socket, 405, "method_not_allowed", error.message, { Allow: "GET" });
    const version = /Sec-WebSocket-Version/.test(error.message)
      ? { "Sec-WebSocket-Version": "13, 8" }
      : undefined;
    rejectRaw(socket, 400, "validation_failed", `${error.message}.`, version);
  });
  const handler = async (req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> => {
    socket.on("error", () => socket.destroy());
    try {
      const url = new URL(req.url ?? "/", "http://localhost");
      const match = WS_PATH.exec(url.pathname);
      if (!match?.[1]) return rejectRaw(socket, 404, "not_found", "No such route.");
      const taskId = match[1];
      const { key } = presentedKey(req);
      const principal = key ? await authenticateKey(deps.models, key) : null;
      if (!principal) return rejectRaw(socket, 401, "unauthorized", "A valid API key is required.");
      // Before any database read: a flood of upgrades past the bound costs nothing shared.
      // The place is the socket's until it closes, however the upgrade ends.
      socket.once("close", deps.streams.reserve(principal));
      const sinceRaw = url.searchParams.get("since");
      let since: number | undefined;
      if (sinceRaw !== null) {
        if (!/^\d{1,15}$/.test(sinceRaw))
          return rejectRaw(
            socket,
            400,
            "validation_failed",
            "since must be a non-negative integer.",
          );
        since = Number(sinceRaw);
      }
      if (!(await deps.streams.canWatch(principal, taskId)))
        return rejectRaw(socket, 404, "not_found", "No such task.");
      wss.handleUpgrade(req, socket, head, (ws) =>
        deps.streams.attach(ws, principal, taskId, since),
      );
    } catch (error) {
      // The database away or busy is a 503 with Retry-After here too, as on every route.
      const mapped = toAppError(error);
      if (isAppError(error) && error.status === 429)
        deps.logger.info({ err: error.message }, "websocket upgrade refused: bound reached");
      else if (isTransientDatabaseError(error))
        deps.logger.warn({ err: error }, "websocket upgrade failed: database unavailable");
      else deps.logger.error({ err: error }, "websocket upgrade failed");
      rejectRaw(socket, mapped.status, mapped.code, mapped.message, mapped.headers);
    }
  };
  return {
    handler,
    /**
     * Shutdown: every socket gets 1001 "going away" (so clients know to reconnect
     * elsewhere, with `?since=`), and those whose close handshake is not done within
     * `graceMs` (a client that does not read) are cut.
     */
    async close(graceMs = 1000): Promise<void> {
      const clients = [...wss.clients];
      const done = Promise.all(
        clients.map(
          (client) =>
            new Promise<void>((resolve) => {
              if (client.readyState === client.CLOSED) return resolve();
              client.once("close", () => resolve());
              client.close(GOING_AWAY, "server shutting down");
            }),
        ),
      );
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([done, new Promise((r) => (timer = setTimeout(r, graceMs)))]);
      clearTimeout(timer);
      for (const client of wss.clients) client.terminate();
      wss.close();
    },
  };
}

/** Until tasks exist (issue #3), no task can be watched. */
export const noTaskStreams: TaskStreams = {
  async canWatch() {
    return false;
  },
  reserve() {
    return () => undefined;
  },
  attach(socket) {
    socket.close(1011, "no task streams");
  },
};
