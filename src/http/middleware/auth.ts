import type { Next } from "koa";
import { authenticateKey } from "../../domain/accounts/keys.js";
import { errors } from "../../errors.js";
import type { AppContext, HttpDeps } from "../types.js";

/** Rejects the request with 401 unless it carries a valid, unrevoked X-API-Key. */
export function requireKey(deps: HttpDeps) {
  return async function authenticate(ctx: AppContext, next: Next): Promise<void> {
    const value = ctx.get("x-api-key");
    if (!value) throw errors.unauthorized();
    const principal = await authenticateKey(deps.models, value);
    if (!principal) throw errors.unauthorized("The API key is unknown or has been revoked.");
    ctx.state.principal = principal;
    return next();
  };
}

/** Like requireKey, but a request without the header passes through anonymously. */
export function optionalKey(deps: HttpDeps) {
  const strict = requireKey(deps);
  return async function maybeAuthenticate(ctx: AppContext, next: Next): Promise<void> {
    if (!ctx.get("x-api-key")) return next();
    return strict(ctx, next);
  };
}
