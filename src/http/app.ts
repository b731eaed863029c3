import Router from "@koa/router";
import Koa, { type Next } from "koa";
import { randomUUID } from "node:crypto";
import { dashboard } from "./dashboard.js";
import { AppError } from "../errors.js";
import { jsonBody, readRawBody } from "./middleware/body.js";
import { handlerDeadline } from "./middleware/deadline.js";
import { errorHandler } from "./middleware/errors.js";
import { bearerMatches } from "../metrics/http.js";
import { httpMetrics, renderMetrics } from "../metrics/index.js";
import { buildOpenApi } from "./openapi.js";
import { buildAsyncApi } from "./asyncapi.js";
import { mountRoutes, type AnyRoute } from "./route.js";
import { agentRoutes } from "./routes/agents/routes.js";
import { automationRoutes } from "./routes/automations/routes.js";
import { analyticsRoutes } from "./routes/analytics/routes.js";
import { healthReportRoutes } from "./routes/health-reports/routes.js";
import { integrationRoutes } from "./routes/integrations/routes.js";
import { githubRoutes } from "./routes/github/routes.js";
import { keyRoutes } from "./routes/keys/routes.js";
import { mcpServerRoutes } from "./routes/mcp-servers/routes.js";
import { prismRoutes } from "./routes/prism/routes.js";
import { skillRoutes } from "./routes/skills/routes.js";
import { systemRoutes } from "./routes/system/routes.js";
import { statusRoutes } from "./routes/status/routes.js";
import { taskRoutes } from "./routes/tasks/routes.js";
import { trajectoryRoutes } from "./routes/tasks/trajectory.js";
import { workspaceRoutes } from "./routes/workspaces/routes.js";
import type { VendorEndpoint } from "../domain/integrations/endpoint.js";
import type { AppContext, AppState, HttpDeps } from "./types.js";
import { SERVICE_VERSION } from "../util/version.js";

/** The version in the OpenAPI and AsyncAPI documents: package.json's (util/version.ts). */
export const VERSION = SERVICE_VERSION;

/** Every documented route of the API, in one list: the router and the OpenAPI document use it. */
export function allRoutes(): AnyRoute[] {
  return [
    ...systemRoutes,
    ...keyRoutes,
    ...workspaceRoutes,
    ...taskRoutes,
    ...trajectoryRoutes,
    ...agentRoutes,
    ...skillRoutes,
    ...prismRoutes,
    ...automationRoutes,
    ...healthReportRoutes,
    ...analyticsRoutes,
    ...githubRoutes,
    ...integrationRoutes,
    ...statusRoutes,
    ...mcpServerRoutes,
  ];
}

/** A Koa-router path as a regex of the paths it matches. */
function pathPattern(path: string): string {
  return path.replace(/[.*+?^${}()|[\]\\]/g, "\\$&").replace(/:[A-Za-z_]+/g, "[^/]+");
}

/**
 * The paths whose raw body a vendor's handler reads and verifies itself: every vendor
 * route, and everything under a vendor's `/integrations/{id}/<type>/`.
 */
function vendorPaths(routes: readonly VendorEndpoint[]): RegExp | undefined {
  if (routes.length === 0) return undefined;
  const types = [...new Set(routes.map((r) => r.type))];
  const exact = routes.map((r) => `${pathPattern(r.path)}$`);
  return new RegExp(`^(/integrations/[^/]+/(${types.join("|")})/|${exact.join("|")})`);
}

const GITHUB_BODY_LIMIT = 25 * 1024 * 1024; // GitHub caps deliveries at 25 MB

/** The Koa application: one error format, one body parser, thin routes over the domain. */
export function createApp(deps: HttpDeps): Koa<AppState> {
  // `maxIpsCount` keeps only the last n X-Forwarded-For entries, the ones the n trusted
  // proxies appended; anything further left was written by the client and is ignored.
  const hops = deps.config.trustProxy;
  const app = new Koa<AppState>({ proxy: hops > 0, maxIpsCount: hops });
  const routes = allRoutes();
  const webhookPath = deps.config.github?.webhookPath ?? "/github/webhooks";
  const vendorRoutes = deps.vendorRoutes;
  const vendorDoor = vendorPaths(vendorRoutes);
  let openapi: Record<string, unknown> | undefined;

  if (deps.config.metrics.enabled) app.use(httpMetrics());
  app.use(async (ctx: AppContext, next: Next) => {
    const started = performance.now();
    ctx.state.requestId = ctx.get("x-request-id").slice(0, 100) || randomUUID();
    ctx.set("X-Request-Id", ctx.state.requestId);
    // Trailing-slash equivalence: /tasks and /tasks/ are the same resource.
    if (ctx.path.length > 1 && ctx.path.endsWith("/"))
      ctx.path = ctx.path.replace(/\/+$/, "") || "/";
    try {
      await next();
    } finally {
      deps.logger.debug(
        {
          method: ctx.method,
          path: ctx.path,
          status: ctx.status,
          ms: Math.round(performance.now() - started),
          requestId: ctx.state.requestId,
        },
        "request",
      );
    }
  });
  app.use(errorHandler(deps.logger));
  // /mcp (mcp/door.ts) reads its own body and streams its own answers (a wait_for_task holds
  // its SSE response up to the tool's bound): before the handler deadline and the JSON parser.
  const mcp = deps.mcp;
  if (mcp)
    app.use(async (ctx: AppContext, next: Next) => {
      if (ctx.path !== "/mcp") return next();
      ctx.respond = false;
      await mcp.handle(ctx.req, ctx.res);
    });
  app.use(
    handlerDeadline(deps.config.httpHandlerTimeoutMs, (error, ctx) =>
      deps.logger.warn(
        { err: error, method: ctx.method, path: ctx.path, requestId: ctx.state.requestId },
        "request failed after its deadline answered",
      ),
    ),
  );
  app.use(dashboard());
  app.use(
    jsonBody({
      skip: [webhookPath],
      skipWhen: (p) => vendorDoor?.test(p) ?? false,
      allowDollarKeys: ["/automations/webhook"],
    }),
  );

  const router = new Router();
  mountRoutes(router, routes, deps);

  router.get("/openapi.json", (ctx) => {
    openapi ??= buildOpenApi(allRoutes(), { version: VERSION }, vendorRoutes);
    // `servers` is the origin the client reached: behind TRUST_PROXY hops that is the
    // proxy's (X-Forwarded-Proto/Host), so one document fits every address the API has.
    ctx.body = { ...openapi, servers: [{ url: `${ctx.protocol}://${ctx.host}` }] };
  });

  // The task WebSocket's events (http/asyncapi.ts), for client generators.
  router.get("/asyncapi.json", (ctx) => {
    ctx.body = buildAsyncApi({ version: VERSION, serverUrl: `${ctx.protocol}://${ctx.host}` });
  });

  const { metrics } = deps.config;
  if (metrics.publicPort !== "absent") {
    router.get("/metrics", async (ctx) => {
      if (
        metrics.publicPort === "token" &&
        !bearerMatches(ctx.get("authorization"), metrics.token!)
      ) {
        const message = "A valid METRICS_TOKEN Bearer token is required.";
        throw new AppError(401, "unauthorized", message, undefined, {
          "WWW-Authenticate": "Bearer",
        });
      }
      const { contentType, body } = await renderMetrics();
      ctx.type = contentType;
      ctx.body = body;
    });
  }

  // No App yet: the page that registers one from app.yml (github/manifest.ts, via service.ts).
  deps.mountPages(router);

  router.post(webhookPath, async (ctx) => {
    const rawBody = await readRawBody(ctx as AppContext, GITHUB_BODY_LIMIT);
    const outcome = await deps.github.receive({
      id: ctx.get("x-github-delivery"),
      name: ctx.get("x-github-event"),
      signature: ctx.get("x-hub-signature-256"),
      rawBody,
    });
    ctx.status = 202;
    ctx.body = { ok: true, duplicate: outcome === "duplicate" };
  });

  // The vendors' signed endpoints (integrations/registry.ts): no API key, raw bodies.
  for (const vendor of vendorRoutes)
    router.post(vendor.path, async (ctx) => {
      const answer = await vendor.handle({
        params: ctx.params,
        readBody: () => readRawBody(ctx as AppContext),
        header: (name) => ctx.get(name),
      });
      ctx.status = answer.status;
      ctx.body = answer.body;
    });

  app.use(router.routes());
  // Without `throw`, the router sets 405/501 and the Allow header; the error middleware
  // then renders the error body for it (docs/api.md, "Errors").
  app.use(router.allowedMethods());
  return app;
}
