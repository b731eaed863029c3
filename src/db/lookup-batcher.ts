import type { Collection, Document } from "mongodb";

/*
 * Group reads for a hot `_id` lookup (the API key of every request): lookups made during the
 * same turn of the event loop go to the database as one `find({_id: {$in: [...]}})`, so N
 * concurrent requests cost one command instead of N. At low load a batch holds one id and
 * waits only for setImmediate. The embedded FerretDB serves `_id: {$in}` from the `_id`
 * index (src/db/embedded.ts); MongoDB always does.
 */

export type BatchedLookup<T> = (id: string) => Promise<T | null>;

interface Waiter<T> {
  resolve(doc: T | null): void;
  reject(error: unknown): void;
}

export function createLookupBatcher<T extends Document & { _id: string }>(
  collection: Collection<{ _id: string }>,
  projection: Document,
  maxBatch = 100,
): BatchedLookup<T> {
  let pending = new Map<string, Waiter<T>[]>();
  let scheduled = false;

  async function lookUp(slice: string[], waiting: Map<string, Waiter<T>[]>): Promise<void> {
    try {
      const docs = await collection.find<T>({ _id: { $in: slice } }, { projection }).toArray();
      const byId = new Map(docs.map((doc) => [String(doc._id), doc]));
      for (const id of slice) for (const w of waiting.get(id)!) w.resolve(byId.get(id) ?? null);
    } catch (error) {
      for (const id of slice) for (const w of waiting.get(id)!) w.reject(error);
    }
  }

  function flush(): void {
    scheduled = false;
    const waiting = pending;
    pending = new Map();
    const ids = [...waiting.keys()];
    // Slices go out together, not one round trip after another.
    for (let start = 0; start < ids.length; start += maxBatch)
      void lookUp(ids.slice(start, start + maxBatch), waiting);
  }

  return (id) =>
    new Promise<T | null>((resolve, reject) => {
      const waiting = pending.get(id);
      if (waiting) waiting.push({ resolve, reject });
      else pending.set(id, [{ resolve, reject }]);
      if (!scheduled) {
        scheduled = true;
        setImmediate(flush);
      }
    });
}
