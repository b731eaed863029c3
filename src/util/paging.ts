import { errors } from "../errors.js";

/**
 * Paging of lists by sort key (the HTTP side, cursors and headers, is http/paging.ts). A list
 * is sorted descending by its key, e.g. (created_at, id); a page starts strictly after the
 * key of the previous page's last item, so inserts meanwhile never shift a later page.
 */
/** A list's sort key, compared left to right; lists are sorted by it in descending order. */
export type SortKey = string[];

export interface PageRequest {
  limit: number;
  /** The key of the last item of the previous page: serve only items strictly after it. */
  after?: SortKey | undefined;
}

/** -1, 0, 1 comparing two sort keys element by element (plain string order). */
export function compareKeys(a: SortKey, b: SortKey): number {
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const x = a[i] ?? "";
    const y = b[i] ?? "";
    if (x !== y) return x < y ? -1 : 1;
  }
  return 0;
}

/**
 * The `(time, id)` filter for a database list sorted `{[timeField]: -1, [idField]: -1}`:
 * documents strictly after the cursor `[ISO time, id]`.
 */
export function afterFilter(
  after: SortKey | undefined,
  timeField = "created_at",
  idField = "_id",
): Record<string, unknown> {
  if (!after) return {};
  const [time, id] = after;
  const at = new Date(time ?? "");
  if (Number.isNaN(at.getTime()) || id === undefined)
    throw errors.validation([{ path: "query.cursor", message: "Not a cursor of this list." }]);
  return {
    $or: [{ [timeField]: { $lt: at } }, { [timeField]: at, [idField]: { $lt: id } }],
  };
}

/** A served page: the items, and the key of the last one when more follow. */
export interface Page<T> {
  items: T[];
  next?: SortKey | undefined;
}

/**
 * Cuts one page out of `items` (sorted by `key`, descending). Works on a whole list read
 * into memory and on a database read of `limit + 1` items already filtered by the cursor.
 */
export function takePage<T>(
  items: T[],
  page: PageRequest,
  key: (item: T, index: number) => SortKey,
): Page<T> {
  const keyed = items.map((item, index) => ({ item, key: key(item, index) }));
  const after = page.after;
  const rest = after ? keyed.filter((k) => compareKeys(k.key, after) < 0) : keyed;
  const served = rest.slice(0, page.limit);
  const last = served[served.length - 1];
  return {
    items: served.map((k) => k.item),
    next: rest.length > page.limit && last !== undefined ? last.key : undefined,
  };
}

/**
 * A key for fixed lists answered whole (built-in agents and skills, a workspace's
 * repositories): the position, written so that later items have smaller keys.
 */
export function positionKey(index: number): string {
  return String(999_999 - index).padStart(6, "0");
}
