import http from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { createApp } from "./app.js";
import type { HttpDeps } from "./types.js";
import { createUpgradeHandler, noTaskStreams, rejectRaw, type TaskStreams } from "./ws.js";

export interface RunningServer {
  server: http.Server;
  url: string;
  port: number;
  close(): Promise<void>;
}

/** One HTTP server on one port for the REST API, the WebSocket streams and GitHub webhooks. */
export async function startHttpServer(
  deps: HttpDeps & { streams?: TaskStreams },
): Promise<RunningServer> {
  const app = createApp(deps);
  // A client that sends fewer bytes than it announced (or its headers slowly) would hold the
  // connection for Node's default 300 s: the whole request must arrive within
  // HTTP_REQUEST_TIMEOUT_S, else 408 and close. Node checks the timeouts every
  // connectionsCheckingInterval, so that is a fraction of the limit.
  const requestTimeout = deps.config.httpRequestTimeoutMs;
  const server = http.createServer(
    {
      requestTimeout,
      headersTimeout: Math.min(requestTimeout, 60_000),
      connectionsCheckingInterval: Math.min(30_000, Math.max(100, Math.floor(requestTimeout / 4))),
    },
    app.callback(),
  );
  // Requests Node's parser refuses before any handler sees them (a control byte in a header,
  // headers over the limit, a Content-Length that is not a number, a request that did not
  // arrive whole in time) get the JSON error body too, not Node's bare status line. As Node's
  // own handler, only on a connection that has not started an answer.
  server.on("clientError", (error: NodeJS.ErrnoException, socket: Socket) => {
    if (error.code === "ECONNRESET" || socket.bytesWritten > 0) return void socket.destroy();
    if (error.code === "ERR_HTTP_REQUEST_TIMEOUT")
      return rejectRaw(
        socket,
        408,
        "request_timeout",
        "The request did not arrive whole within HTTP_REQUEST_TIMEOUT_S.",
      );
    if (error.code === "HPE_HEADER_OVERFLOW")
      return rejectRaw(socket, 431, "validation_failed", "The request's headers are too large.");
    rejectRaw(
      socket,
      400,
      "validation_failed",
      "The request is not valid HTTP: its request line, a header or its Content-Length.",
    );
  });
  // Idle keep-alive connections stay open longer than a load balancer's usual 60 s.
  server.keepAliveTimeout = 65_000;
  const upgrades = createUpgradeHandler({
    models: deps.models,
    logger: deps.logger,
    streams: deps.streams ?? noTaskStreams,
  });
  server.on("upgrade", (req, socket, head) => void upgrades.handler(req, socket, head));
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(deps.config.port, deps.config.host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const host = deps.config.host.includes(":") ? `[${deps.config.host}]` : deps.config.host;
  return {
    server,
    port,
    url: `http://${host}:${port}`,
    async close() {
      await upgrades.close();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
        setTimeout(() => server.closeAllConnections(), 5_000).unref();
      });
    },
  };
}
