import Router from "@koa/router";
import Koa, { type Next } from "koa";
import { randomUUID } from "node:crypto";
import { errors } from "../errors.js";
import { jsonBody, readRawBody } from "./middleware/body.js";
import { errorHandler } from "./middleware/errors.js";
import { buildOpenApi } from "./openapi.js";
import { mountRoutes, type AnyRoute } from "./route.js";
import { agentRoutes } from "./routes/agents/routes.js";
import { automationRoutes } from "./routes/automations/routes.js";
import { analyticsRoutes } from "./routes/analytics/routes.js";
import { healthReportRoutes } from "./routes/health-reports/routes.js";
import { githubRoutes } from "./routes/github/routes.js";
import { keyRoutes } from "./routes/keys/routes.js";
import { prismRoutes } from "./routes/prism/routes.js";
import { skillRoutes } from "./routes/skills/routes.js";
import { systemRoutes } from "./routes/system/routes.js";
import { taskRoutes } from "./routes/tasks/routes.js";
import { workspaceRoutes } from "./routes/workspaces/routes.js";
import type { AppContext, AppState, HttpDeps } from "./types.js";

export const VERSION = "1.3.0";

/** Every documented route of the API, in one list: the router and the OpenAPI document use it. */
export function allRoutes(): AnyRoute[] {
  return [
    ...systemRoutes,
    ...keyRoutes,
    ...workspaceRoutes,
    ...taskRoutes,
    ...agentRoutes,
    ...skillRoutes,
    ...prismRoutes,
    ...automationRoutes,
    ...healthReportRoutes,
    ...analyticsRoutes,
    ...githubRoutes,
  ];
}

const GITHUB_BODY_LIMIT = 25 * 1024 * 1024; // GitHub caps deliveries at 25 MB

/** The Koa application: one error format, one body parser, thin routes over the domain. */
export function createApp(deps: HttpDeps): Koa<AppState> {
  const app = new Koa<AppState>({ proxy: deps.config.trustProxy });
  const routes = allRoutes();
  const webhookPath = deps.config.github?.webhookPath ?? "/github/webhooks";
  let openapi: Record<string, unknown> | undefined;

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
  app.use(jsonBody({ skip: [webhookPath], allowDollarKeys: ["/automations/webhook"] }));

  const router = new Router<AppState>();
  mountRoutes(router as unknown as Router, routes, deps);

  router.get("/openapi.json", (ctx) => {
    openapi ??= buildOpenApi(allRoutes(), { version: VERSION });
    ctx.body = openapi;
  });

  router.post(webhookPath, async (ctx) => {
    if (!deps.github)
      throw errors.notFound("route (the GitHub App is not configured on this server)");
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

  app.use(router.routes());
  // Without `throw`, the router sets 405/501 and the Allow header; the error middleware
  // then renders the SPEC §1 body for it.
  app.use(router.allowedMethods());
  return app;
}
