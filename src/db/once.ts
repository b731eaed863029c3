import type { Collection, Document } from "mongodb";
import { isDuplicateKey } from "../util/duplicate-key.js";

/**
 * Takes the once-marker `id` (a unique `_id` insert into `once_markers`, atomic on MongoDB and
 * FerretDB alike): true for the one caller that inserted it, false for every other.
 * `fields` are stored with it (an outcome, an expiry); `created_at` is set for pruning.
 */
export async function claimOnce(
  markers: Collection<Document>,
  id: string,
  scope: string,
  fields: Record<string, unknown> = {},
): Promise<boolean> {
  try {
    await markers.insertOne({ ...fields, _id: id as never, scope, created_at: new Date() });
    return true;
  } catch (error) {
    if (isDuplicateKey(error)) return false;
    throw error;
  }
}
