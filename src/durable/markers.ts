import { collectionOf, type Models, type OnceRecord } from "../db/models.js";
import { claimOnce, type Marker } from "./once.js";
import { isDuplicateKey } from "../util/duplicate-key.js";

/*
 * Once-markers for the doors, the pipeline and the domain: how a kind is declared by its
 * owner (durable/once.ts, re-exported here) and the few things done with one. A door
 * declares and claims its delivery, command and notice markers here, never through the
 * database modules. This module is the one that reads and writes `once_markers` for the
 * service (the scheduler's job store claims its job locks there itself, without the models:
 * durable/exclusive-locks.ts).
 */

/** The once-markers collection, typed by its records: this module's alone. */
const markersOf = (models: Models) => collectionOf<OnceRecord>(models.Once);

export {
  declaredMarkerKinds,
  generationMarker,
  markerKind,
  stateHash,
  type Marker,
  type MarkerKind,
  type MarkerPart,
} from "./once.js";

/**
 * Takes `marker` once across processes: true for the one caller that inserted it, false
 * for every other. `fields` are stored with it.
 */
export function claimMarker(
  models: Models,
  marker: Marker,
  fields?: Record<string, unknown> & { created_at?: Date },
): Promise<boolean> {
  return claimOnce(markersOf(models), marker, fields);
}

/**
 * Takes every one of `all` in one ordered insert (one round trip): true for the caller that
 * inserted them all. When one was taken before, false; the ones before it in the list stay
 * claimed (as with claimMarker one after the other).
 */
export async function claimMarkers(models: Models, all: readonly Marker[]): Promise<boolean> {
  const now = new Date();
  try {
    await markersOf(models).insertMany(
      all.map((marker) => ({ _id: marker.id, scope: marker.scope, created_at: now })),
      { ordered: true },
    );
    return true;
  } catch (error) {
    if (isDuplicateKey(error)) return false;
    throw error;
  }
}

/**
 * Claims each of `all` for `owner`: true when every one is new or was claimed for the same
 * owner before (the same work run again after a crash), false as soon as one belongs to
 * another (the work was done, or is being done, for someone else).
 */
export async function claimMarkersFor(
  models: Models,
  all: readonly Marker[],
  owner: string,
): Promise<boolean> {
  const collection = markersOf(models);
  for (const marker of all) {
    if (await claimMarker(models, marker, { owner })) continue;
    const held = await collection.findOne({ _id: marker.id }, { projection: { owner: 1 } });
    // Dropped or pruned since the insert failed: claim it again, once.
    if (!held) {
      if (await claimMarker(models, marker, { owner })) continue;
      return false;
    }
    if (held.owner !== owner) return false;
  }
  return true;
}

/** True when `marker` has been claimed (and not dropped or pruned since). */
export async function markerExists(models: Models, marker: Marker): Promise<boolean> {
  return Boolean(await models.Once.exists({ _id: marker.id }));
}

/**
 * The fields a claimed marker was stored with (`claimMarker`'s extra fields), or only the
 * `fields` named; null: unclaimed.
 */
export function markerFields(
  models: Models,
  marker: Marker,
  fields?: readonly string[],
): Promise<OnceRecord | null> {
  if (!fields) return markersOf(models).findOne({ _id: marker.id });
  return markersOf(models).findOne({ _id: marker.id }, { projection: projectionOf(fields) });
}

/** The `fields` of those of the markers `ids` that are claimed. */
export function markersFields(
  models: Models,
  ids: readonly string[],
  fields: readonly string[],
): Promise<OnceRecord[]> {
  return markersOf(models)
    .find({ _id: { $in: [...ids] } }, { projection: projectionOf(fields) })
    .toArray();
}

function projectionOf(fields: readonly string[]): Record<string, 1> {
  return Object.fromEntries(fields.map((field) => [field, 1]));
}

/** Sets fields on a claimed marker (nothing when it is not claimed). */
export async function setMarkerFields(
  models: Models,
  marker: Marker | string,
  fields: Record<string, unknown>,
): Promise<void> {
  await markersOf(models).updateOne({ _id: idOf(marker) }, { $set: fields });
}

/** Sets fields on a marker, creating it with `onInsert` when it is not claimed yet. */
export async function upsertMarker(
  models: Models,
  marker: Marker,
  fields: Record<string, unknown>,
  onInsert?: Record<string, unknown>,
): Promise<void> {
  await markersOf(models).updateOne(
    { _id: marker.id },
    { $set: fields, ...(onInsert ? { $setOnInsert: onInsert } : {}) },
    { upsert: true },
  );
}

/** Drops one marker; with `heldBy`, only while it still has those field values. */
export async function dropMarker(
  models: Models,
  marker: Marker,
  heldBy: Record<string, string | number> = {},
): Promise<void> {
  await markersOf(models).deleteOne({ _id: marker.id, ...heldBy });
}

/** Drops one marker if its `expires_at` has passed. */
export async function dropMarkerIfExpired(models: Models, marker: Marker): Promise<void> {
  await markersOf(models).deleteOne({ _id: marker.id, expires_at: { $lt: new Date() } });
}

/**
 * The ids of the leases (durable/lease.ts) of the kinds `prefixes` whose holder beat after
 * `beatSince`, has not released them, and is another process than `notHolder`.
 */
export async function liveLeaseIds(
  models: Models,
  prefixes: readonly string[],
  beatSince: Date,
  notHolder: string,
): Promise<string[]> {
  const leases = await markersOf(models)
    .find(
      {
        _id: { $regex: `^(${prefixes.join("|")}):` },
        released: { $ne: true },
        heartbeat_at: { $gt: beatSince },
        holder_id: { $exists: true, $ne: notHolder },
      },
      { projection: { _id: 1 } },
    )
    .toArray();
  return leases.map((lease) => String(lease._id));
}

function idOf(marker: Marker | string): string {
  return typeof marker === "string" ? marker : marker.id;
}

/** Drops claimed markers, so that the work they stand for may be done again. */
export async function dropMarkers(models: Models, claimed: readonly Marker[]): Promise<void> {
  await models.Once.deleteMany({ _id: { $in: claimed.map((marker) => marker.id) } });
}

/**
 * Drops markers created before `cutoff`, and those of the scopes in `shortLived` created
 * before their own cutoff (job locks, durable/exclusive-locks.ts: they matter only while a
 * lookup could still see the job state they name). One delete for all: each is a scan of the
 * collection on FerretDB.
 */
export async function pruneMarkers(
  models: Models,
  cutoff: Date,
  shortLived: Readonly<Record<string, Date>> = {},
): Promise<void> {
  await markersOf(models).deleteMany({
    $or: [
      { created_at: { $lt: cutoff } },
      ...Object.entries(shortLived).map(([scope, before]) => ({
        scope,
        created_at: { $lt: before },
      })),
    ],
  });
}
