import { z } from "zod";
import { errors } from "../errors.js";
import type { PageRequest, SortKey } from "../util/paging.js";

export { positionKey, takePage, type PageRequest, type SortKey } from "../util/paging.js";
import type { AppContext } from "./types.js";

/**
 * One paging convention for every list (docs/api.md, "Paging"): `limit` (default 50, max 200)
 * and an opaque `cursor` in the query; the body stays a JSON array, and the next page's URL
 * comes in `Link: <…>; rel="next"` (RFC 8288) with the bare cursor in `X-Next-Cursor`.
 * A cursor is the sort key of the last item served, e.g. (created_at, id), so items inserted
 * meanwhile (newer, hence earlier in the list) never shift a later page.
 */
export const DEFAULT_LIMIT = 50;
export const MAX_LIMIT = 200;

export const pageFields = {
  limit: z.coerce
    .number()
    .int()
    .min(1)
    .max(MAX_LIMIT)
    .default(DEFAULT_LIMIT)
    .describe(`page size, 1–${MAX_LIMIT}`),
  cursor: z
    .string()
    .min(1)
    .max(512)
    .optional()
    .describe("opaque: the `X-Next-Cursor` (or `Link` rel=next) of the previous page"),
};
export const pageQuery = z.strictObject(pageFields);

export function encodeCursor(key: SortKey): string {
  return Buffer.from(JSON.stringify(key), "utf8").toString("base64url");
}

export function decodeCursor(cursor: string): SortKey {
  try {
    const key: unknown = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
    if (Array.isArray(key) && key.length > 0 && key.every((k) => typeof k === "string"))
      return key as SortKey;
  } catch {
    // fall through to the 400 below
  }
  throw errors.validation([{ path: "query.cursor", message: "Not a cursor this API gave out." }]);
}

/** The page request of a validated query (`limit`, `cursor`). */
export function pageRequest(query: { limit: number; cursor?: string | undefined }): PageRequest {
  return { limit: query.limit, after: query.cursor ? decodeCursor(query.cursor) : undefined };
}

/** Sets `Link: <…>; rel="next"` and `X-Next-Cursor` when a next page exists. */
export function setNextPageHeaders(ctx: AppContext, next: SortKey | undefined): void {
  if (!next) return;
  const cursor = encodeCursor(next);
  const params = new URLSearchParams(ctx.querystring);
  params.set("cursor", cursor);
  params.delete("before");
  ctx.set("Link", `<${ctx.path}?${params.toString()}>; rel="next"`);
  ctx.set("X-Next-Cursor", cursor);
}
