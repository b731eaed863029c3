import { createHash, timingSafeEqual } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { Config } from "../config/env.js";
import type { Logger } from "../util/logger.js";
import { renderMetrics } from "./index.js";

/*
 * Who may read GET /metrics (config/env.ts, metricsExposure): on the API port it is absent
 * unless the operator opened it (METRICS=public) or set a Bearer token (METRICS_TOKEN); a
 * METRICS_PORT listener serves it apart from the API, on 127.0.0.1 unless METRICS_HOST says
 * otherwise, with the token required there too when one is set.
 */

/** True when the Authorization header carries the token (compared in constant time). */
export function bearerMatches(header: string | undefined, token: string): boolean {
  const match = /^Bearer\s+(.+)$/i.exec(header ?? "");
  if (!match) return false;
  // Hashes have equal lengths, so timingSafeEqual never throws and length does not leak.
  const digest = (value: string) => createHash("sha256").update(value).digest();
  return timingSafeEqual(digest(match[1]!.trim()), digest(token));
}

export interface MetricsServer {
  url: string;
  port: number;
  close(): Promise<void>;
}

/** The separate metrics listener: GET /metrics only, nothing of the API. */
export async function startMetricsServer(
  settings: Config["metrics"] & { port: number },
  logger: Logger,
): Promise<MetricsServer> {
  const server = http.createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (path !== "/metrics" || (req.method !== "GET" && req.method !== "HEAD")) {
      res.writeHead(404, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { code: "not_found", message: "Only GET /metrics here." } }));
      return;
    }
    if (settings.token && !bearerMatches(req.headers.authorization, settings.token)) {
      res.writeHead(401, { "content-type": "application/json", "www-authenticate": "Bearer" });
      res.end(
        JSON.stringify({
          error: {
            code: "unauthorized",
            message: "A valid METRICS_TOKEN Bearer token is required.",
          },
        }),
      );
      return;
    }
    renderMetrics().then(
      ({ contentType, body }) => {
        res.writeHead(200, { "content-type": contentType });
        res.end(req.method === "HEAD" ? undefined : body);
      },
      (error: unknown) => {
        logger.error({ err: error }, "metrics collection failed");
        res.writeHead(500, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: { code: "internal", message: "Collecting failed." } }));
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(settings.port, settings.host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const host = settings.host.includes(":") ? `[${settings.host}]` : settings.host;
  return {
    url: `http://${host}:${port}`,
    port,
    async close() {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}
