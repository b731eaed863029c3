import { createHash } from "node:crypto";
import type { Collection } from "mongodb";
import type { OnceRecord } from "../db/models.js";
import { isDuplicateKey } from "../util/duplicate-key.js";

/*
 * Once-markers: unique-`_id` documents of `once_markers` whose insert decides, across
 * processes, that something happens once (a delivery, a command, a notice, a stage's
 * outcome, a job lock, a lease attempt...). Their ids are stored for days (pruned after 14),
 * so each kind is declared once, by the module that owns the concept (`markerKind` below:
 * the task's ending in domain/tasks/endings.ts, a GitHub delivery in github/delivery.ts, a
 * Slack event in integrations/slack/door.ts...), its prefix and scope written there and
 * nowhere else. Every declaration is recorded (`declaredMarkerKinds`): two owners of one
 * prefix with different scopes is an error at import, and test/unit/markers.test.ts pins
 * every declared kind to the id format stored before; changing one orphans the markers of
 * running databases.
 *
 * Doors do not import this module (the layering of docs/architecture.md): they declare and
 * claim markers through durable/markers.ts, which re-exports `markerKind`.
 */

/** A once-marker to claim, look up or drop: its `_id` and the scope it is stored under. */
export interface Marker<S extends string = string> {
  readonly id: string;
  readonly scope: S;
}

/** One part of a marker id. */
export type MarkerPart = string | number;

/** A builder of one marker kind; `scope` and `prefix` are readable for queries by kind. */
export interface MarkerKind<S extends string, A extends unknown[]> {
  (...args: A): Marker<S>;
  readonly prefix: string;
  readonly scope: S;
}

/** Every declared kind: prefix → scope (one prefix may serve several kinds of one scope). */
const declared = new Map<string, string>();

function declare(prefix: string, scope: string): void {
  const known = declared.get(prefix);
  if (known !== undefined && known !== scope)
    throw new Error(
      `once-marker prefix "${prefix}" is declared with scope "${known}" and "${scope}"`,
    );
  declared.set(prefix, scope);
}

/**
 * Declares a kind whose id is `<prefix>:<part>:<part>...`, its parts typed by `parts`'
 * parameters. Called once, at the top of the module that owns the concept, e.g.
 * `export const taskEnd = markerKind("task-end", "task-end", (taskId: string) => [taskId]);`
 */
export function markerKind<const S extends string, A extends unknown[]>(
  prefix: string,
  scope: S,
  parts: (...args: A) => MarkerPart[],
): MarkerKind<S, A> {
  declare(prefix, scope);
  const build = (...args: A): Marker<S> => ({
    id: [prefix, ...parts(...args)].join(":"),
    scope,
  });
  return Object.assign(build, { prefix, scope });
}

/**
 * Declares a shared generation marker (durable/marker-cache.ts): a fixed id whose `value`
 * changes whenever what it stands for changes, scope `marker`. Upserted, never claimed.
 */
export function generationMarker(name: string): Marker<"marker"> {
  declare(name, "marker");
  return { id: name, scope: "marker" };
}

/** The kinds declared by the modules loaded so far (prefix and scope), for tests and docs. */
export function declaredMarkerKinds(): Array<{ prefix: string; scope: string }> {
  return [...declared].map(([prefix, scope]) => ({ prefix, scope }));
}

/** A job-lock time part: the epoch milliseconds, or `-` when there is none. */
export const lockTime = (date: Date | null | undefined): MarkerPart =>
  date ? new Date(date).getTime() : "-";

/** A secret state (a link or install state) is stored as its sha256: never the value. */
export const stateHash = (state: string): string =>
  createHash("sha256").update(state).digest("base64url");

/**
 * Takes a once-marker (a unique `_id` insert into `once_markers`, atomic on MongoDB and
 * FerretDB alike): true for the one caller that inserted it, false for every other.
 * `fields` are stored with it (an outcome, an expiry); `created_at` is set for pruning,
 * to now unless `fields` gives it.
 */
export async function claimOnce(
  collection: Collection<OnceRecord>,
  marker: Marker,
  fields: Record<string, unknown> & { created_at?: Date } = {},
): Promise<boolean> {
  try {
    await collection.insertOne({
      ...fields,
      _id: marker.id,
      scope: marker.scope,
      created_at: fields.created_at ?? new Date(),
    });
    return true;
  } catch (error) {
    if (isDuplicateKey(error)) return false;
    throw error;
  }
}
