import type Router from "@koa/router";
import type { RouterMiddleware } from "@koa/router";
import type { z } from "zod";
import { type ZodType } from "zod";
import type { Principal } from "../domain/accounts/keys.js";
import type { TaskDeps } from "../domain/tasks/model.js";
import { errors } from "../errors.js";
import type { AppContext, HttpDeps } from "./types.js";
import { requireKey, optionalKey } from "./middleware/auth.js";
import { parseInput } from "./middleware/validate.js";
import {
  checkIdempotencyKey,
  claimIdempotencyKey,
  requestFingerprint,
  type Claim,
} from "./idempotency.js";
import {
  pageRequest,
  setNextPageHeaders,
  takePage,
  type PageRequest,
  type SortKey,
} from "./paging.js";

export type Method = "get" | "post" | "patch" | "delete" | "put";
export type Auth = "key" | "optional-key" | "none";

export interface ResponseSpec<R extends ZodType | undefined = ZodType | undefined> {
  description: string;
  schema?: R;
  /**
   * Another media type than JSON: the handler answers the body as text already in it (e.g.
   * `application/x-ndjson`); the schema then describes one item of it.
   */
  contentType?: string;
}

/**
 * What a handler answers for the response schema `R`. Nothing parses or fills in the answer
 * on its way out (mountRoutes sends the handler's value as JSON), and the OpenAPI document
 * describes responses as the schema's output (openapi.ts, `io: "output"`): so the value must
 * already be the schema's output, defaults applied (`z.output`, not `z.input`). A route
 * without a body (no schema, or `noContent`) answers nothing.
 */
export type HandlerResult<R> =
  // AnyRoute (R = any): any answer; each route was checked against its own schema.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  0 extends 1 & R ? any : HandlerResultOf<R>;

type HandlerResultOf<R> = [R] extends [ZodType]
  ? [z.output<R>] extends [undefined]
    ? void
    : z.output<R>
  : void;

/** One item of a paged list's answer. */
type ItemOf<R> = HandlerResult<R> extends ReadonlyArray<infer T> ? T : never;

/**
 * The caller a handler sees: always there behind `auth: "key"` (requireKey answered 401
 * otherwise), perhaps behind "optional-key", never on a route without a key.
 */
export type PrincipalOf<A extends Auth> = A extends "key"
  ? Principal
  : A extends "optional-key"
    ? Principal | undefined
    : undefined;

export interface RouteSpec<
  B extends ZodType = ZodType,
  Q extends ZodType = ZodType,
  P extends ZodType = ZodType,
  R extends ZodType | undefined = ZodType | undefined,
  A extends Auth = Auth,
> {
  method: Method;
  /** Koa-router style path, e.g. `/keys/:key_id`. */
  path: string;
  operationId: string;
  summary: string;
  description?: string;
  tag: string;
  auth: A;
  body?: B;
  query?: Q;
  params?: P;
  /** The status a successful call answers with, and what it returns. */
  status: number;
  response: ResponseSpec<R>;
  /** Error statuses the route may answer with besides the common ones. */
  errors?: number[];
  /** The created resource's URL, sent as `Location` (every 201; 202 when it can be polled). */
  location?: (result: HandlerResult<R>) => string;
  /**
   * A paged list (http/paging.ts): the query takes `limit` and `cursor`, the handler answers
   * the items after `page.after` (all of them, or at least `limit + 1` when it reads a page
   * from the database), sorted descending by `key`, and this layer cuts the page.
   */
  page?: { key: (item: ItemOf<R>, index: number) => SortKey };
  /**
   * Honours `Idempotency-Key` (http/idempotency.ts). Defaults to true for a POST that answers
   * 201 or 202: every POST that creates something.
   */
  idempotent?: boolean;
  /** Answers with the RateLimit headers (http/rate-limit.ts); documented in the OpenAPI. */
  rateLimited?: boolean;
  /**
   * A page for browsers: when the client prefers text/html to JSON, the answer is this
   * rendering of the handler's result (as `text/html; charset=utf-8`) instead of the JSON.
   */
  html?: (result: HandlerResult<R>) => string;
  handler: (
    ctx: AppContext,
    input: {
      body: z.infer<B>;
      query: z.infer<Q>;
      params: z.infer<P>;
      principal: PrincipalOf<A>;
      deps: HttpDeps;
      /** Paged lists only: the page asked for. */
      page: PageRequest;
    },
  ) => Promise<HandlerResult<R>>;
}

/**
 * Identity helper that keeps the zod inference of one route's schemas: the handler's input
 * from the request schemas and `auth`, its answer from the response schema.
 */
export function route<
  B extends ZodType = ZodType,
  Q extends ZodType = ZodType,
  P extends ZodType = ZodType,
  R extends ZodType | undefined = undefined,
  A extends Auth = Auth,
>(
  spec: RouteSpec<B, Q, P, R, A>,
): RouteSpec<NoInfer<B>, NoInfer<Q>, NoInfer<P>, NoInfer<R>, NoInfer<A>> {
  return spec;
}

// Routes are collected from many modules with their own schema types.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyRoute = RouteSpec<any, any, any, any, any>;

type PageQuery = { limit: number; cursor?: string | undefined };

/** Without a handler deadline (unit use), a repeat of an idempotent request waits this long. */
const IDEMPOTENT_WAIT_MS = 10_000;
/** A repeat stops waiting this long before its deadline, to answer its own 409. */
const IDEMPOTENT_WAIT_MARGIN_MS = 1_000;

/** Every POST that creates something (201, or 202 for queued work) takes Idempotency-Key. */
export function isIdempotent(spec: AnyRoute): boolean {
  return (
    spec.idempotent ?? (spec.method === "post" && (spec.status === 201 || spec.status === 202))
  );
}

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
      const principal = ctx.state.principal;
      const idempotencyKey = isIdempotent(spec) ? ctx.get("idempotency-key") : "";
      let claim: Claim | undefined;
      if (idempotencyKey) {
        checkIdempotencyKey(idempotencyKey);
        // Keys are the account's; sign-up (no key yet) scopes them to the client address.
        const scope = principal ? `account:${principal.accountId}` : `address:${ctx.ip}`;
        claim = await claimIdempotencyKey(
          deps.models,
          scope,
          idempotencyKey,
          requestFingerprint({
            method: ctx.method,
            path: ctx.path,
            query: { ...ctx.query },
            body: ctx.state.body,
          }),
          // A repeat waits for the first request as long as this one may take, less a margin
          // to answer its 409 itself (the first request is answered by then too).
          (ctx.state.deadline ?? Date.now() + IDEMPOTENT_WAIT_MS) - IDEMPOTENT_WAIT_MARGIN_MS,
        );
        if (claim.kind === "replay") {
          ctx.status = claim.answer.status;
          for (const [name, value] of Object.entries(claim.answer.headers)) ctx.set(name, value);
          ctx.set("Idempotent-Replayed", "true");
          if (claim.answer.status !== 204) ctx.body = claim.answer.body;
          return;
        }
      }
      const page = spec.page ? pageRequest(query as PageQuery) : { limit: Number.MAX_SAFE_INTEGER };
      // AnyRoute: each route's own spec checked its handler's answer against its schema.
      let result: Awaited<ReturnType<AnyRoute["handler"]>>;
      const headers: Record<string, string> = {};
      try {
        result = await spec.handler(ctx, { body, query, params, principal, deps, page });
        if (spec.page) {
          const served = takePage(result, page, spec.page.key);
          setNextPageHeaders(ctx, served.next);
          result = served.items;
        }
        if (spec.location) headers.Location = spec.location(result);
      } catch (error) {
        // Nothing stored: the key is free again (and repeats waiting here go on at once).
        if (claim?.kind === "run") await claim.abandon().catch(() => undefined);
        throw error;
      }
      for (const [name, value] of Object.entries(headers)) ctx.set(name, value);
      if (spec.html && ctx.accepts("application/json", "text/html") === "text/html") {
        ctx.type = "text/html; charset=utf-8";
        result = spec.html(result);
      }
      ctx.status = spec.status;
      if (spec.response.contentType) ctx.type = spec.response.contentType;
      if (spec.status !== 204) ctx.body = result;
      if (claim?.kind === "run") {
        // JSON as sent, so a replay answers exactly the same body.
        const sent =
          spec.status === 204 ? null : (JSON.parse(JSON.stringify(result ?? null)) as unknown);
        await claim.finish({ status: spec.status, body: sent, headers }).catch((error: unknown) => {
          // The work is done: answer it. A retry finds the record pending until its lease ends.
          deps.logger.error({ err: error, path: ctx.path }, "storing an idempotent answer failed");
        });
      }
    };
    const middleware = auth ? [auth, handle] : [handle];
    router[spec.method](spec.operationId, spec.path, ...(middleware as RouterMiddleware[]));
  }
}

/** The task operations of this server. */
export function tasksOf(deps: HttpDeps): TaskDeps {
  return deps.tasks;
}
