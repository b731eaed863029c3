import type Router from "@koa/router";
import type { RouterMiddleware } from "@koa/router";
import type { z } from "zod";
import { type ZodType } from "zod";
import type { Principal } from "../domain/keys.js";
import type { TaskDeps } from "../domain/tasks.js";
import { errors } from "../errors.js";
import type { AppContext, HttpDeps } from "./types.js";
import { requireKey, optionalKey } from "./middleware/auth.js";
import { parseInput } from "./middleware/validate.js";

export type Method = "get" | "post" | "patch" | "delete" | "put";
export type Auth = "key" | "optional-key" | "none";

export interface ResponseSpec {
  description: string;
  schema?: ZodType;
}

export interface RouteSpec<
  B extends ZodType = ZodType,
  Q extends ZodType = ZodType,
  P extends ZodType = ZodType,
> {
  method: Method;
  /** Koa-router style path, e.g. `/keys/:key_id`. */
  path: string;
  operationId: string;
  summary: string;
  description?: string;
  tag: string;
  auth: Auth;
  body?: B;
  query?: Q;
  params?: P;
  /** The status a successful call answers with, and what it returns. */
  status: number;
  response: ResponseSpec;
  /** Error statuses the route may answer with besides the common ones. */
  errors?: number[];
  handler: (
    ctx: AppContext,
    input: {
      body: z.infer<B>;
      query: z.infer<Q>;
      params: z.infer<P>;
      principal: Principal | undefined;
      deps: HttpDeps;
    },
  ) => Promise<unknown>;
}

/** Identity helper that keeps the zod inference of one route's schemas. */
export function route<
  B extends ZodType = ZodType,
  Q extends ZodType = ZodType,
  P extends ZodType = ZodType,
>(spec: RouteSpec<B, Q, P>): RouteSpec<B, Q, P> {
  return spec;
}

// Routes are collected from many modules with their own schema types.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyRoute = RouteSpec<any, any, any>;

/** True for a parsed body with content; `null`, `{}` and no body at all carry none. */
function carriesContent(body: unknown): boolean {
  if (body === undefined || body === null) return false;
  return !(typeof body === "object" && Object.keys(body).length === 0);
}

/** Mounts routes on the router; the same specs feed the OpenAPI document. */
export function mountRoutes(router: Router, routes: AnyRoute[], deps: HttpDeps): void {
  for (const spec of routes) {
    const auth =
      spec.auth === "key"
        ? requireKey(deps)
        : spec.auth === "optional-key"
          ? optionalKey(deps)
          : null;
    const handle = async (ctx: AppContext) => {
      const body = spec.body
        ? parseInput(spec.body, ctx.state.body ?? undefined, "body")
        : undefined;
      if (!spec.body && carriesContent(ctx.state.body)) {
        // A body on a route that takes none is most likely a client mistake: say so.
        throw errors.validation([
          { path: "body", message: "This endpoint takes no request body." },
        ]);
      }
      const query = spec.query ? parseInput(spec.query, { ...ctx.query }, "query") : undefined;
      const params = spec.params ? parseInput(spec.params, { ...ctx.params }, "path") : undefined;
      const result = await spec.handler(ctx, {
        body,
        query,
        params,
        principal: ctx.state.principal,
        deps,
      });
      ctx.status = spec.status;
      if (spec.status !== 204) ctx.body = result;
    };
    const middleware = auth ? [auth, handle] : [handle];
    router[spec.method](spec.operationId, spec.path, ...(middleware as RouterMiddleware[]));
  }
}

/** The task operations of this server (absent only on a server built without them: 503). */
export function tasksOf(deps: HttpDeps): TaskDeps {
  if (!deps.tasks) throw errors.notReady("Tasks are not available on this server.");
  return deps.tasks;
}
