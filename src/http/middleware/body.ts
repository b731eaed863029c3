import type { Next } from "koa";
import getRawBody from "raw-body";
import { errors } from "../../errors.js";
import type { AppContext } from "../types.js";
import { dollarKeys } from "./validate.js";

export const BODY_LIMIT = 1024 * 1024;

/** Reads the raw request body as UTF-8 text, at most `limit` bytes (413 beyond). */
export async function readRawBody(ctx: AppContext, limit = BODY_LIMIT): Promise<string> {
  const length = ctx.request.length;
  if (length !== undefined && length > limit) throw errors.payloadTooLarge(limit);
  return getRawBody(ctx.req, { limit, length, encoding: "utf8" });
}

/** Bodies are read as UTF-8 text: a compressed body or another charset is refused (415). */
function plainUtf8(ctx: AppContext): boolean {
  const encoding = ctx.get("content-encoding").trim().toLowerCase();
  if (encoding !== "" && encoding !== "identity") return false;
  const charset = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(ctx.get("content-type"))?.[1];
  return charset === undefined || ["utf-8", "utf8", "us-ascii"].includes(charset.toLowerCase());
}

function hasBody(ctx: AppContext): boolean {
  const length = ctx.request.length;
  return (length !== undefined && length > 0) || ctx.get("transfer-encoding") !== "";
}

/**
 * JSON bodies for the API: 1 MiB limit, 415 for another media type, 400 `invalid_json` for
 * malformed JSON, 400 for `$`-prefixed keys. The raw text stays on `ctx.state.rawBody` for
 * signature checks. Paths in `skip` read their own bodies (the GitHub webhook).
 */
export function jsonBody(options: {
  skip: string[];
  /** Paths that read their own bodies too, by shape (vendors' signed webhooks). */
  skipWhen?: (path: string) => boolean;
  allowDollarKeys: string[];
}) {
  return async function parseJsonBody(ctx: AppContext, next: Next): Promise<void> {
    if (
      ctx.method === "GET" ||
      ctx.method === "HEAD" ||
      ctx.method === "OPTIONS" ||
      options.skip.includes(ctx.path) ||
      options.skipWhen?.(ctx.path) ||
      !hasBody(ctx)
    ) {
      return next();
    }
    if (!ctx.is("application/json", "+json") || !plainUtf8(ctx)) {
      // Drain what the client sent before answering, so the connection stays usable.
      await readRawBody(ctx).catch(() => undefined);
      throw errors.unsupportedMediaType();
    }
    const raw = await readRawBody(ctx);
    ctx.state.rawBody = raw;
    if (raw.trim() === "") return next();
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw);
    } catch (error) {
      throw errors.invalidJson(`The request body is not valid JSON: ${(error as Error).message}`);
    }
    if (!options.allowDollarKeys.includes(ctx.path)) {
      const bad = dollarKeys(parsed);
      if (bad.length > 0) {
        throw errors.validation(
          bad.map((path) => ({ path, message: "Keys may not start with $." })),
        );
      }
    }
    ctx.state.body = parsed;
    return next();
  };
}
