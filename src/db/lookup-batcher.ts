import type { Collection, Document } from "mongodb";

/*
 * Group reads for a hot `_id` lookup (the API key of every request): lookups made during the
 * same turn of the event loop go to the database as one `find({_id: {$in: [...]}})`, so N
 * concurrent requests cost one command instead of N. At low load a batch holds one id and
 * waits only for setImmediate. The embedded FerretDB serves `_id: {$in}` from the `_id`
 * index (src/db/embedded.ts); MongoDB always does.
 */

export type BatchedLookup<T> = (id: string) => Promise<T | null>;

export function createLookupBatcher<T extends Document>(
  collection: Collection,
  projection: Document,
  maxBatch = 100,
): BatchedLookup<T> {
  let pending = new Map<
    string,
    Array<{ resolve(doc: T | null): void; reject(e: unknown): void }>
  >();
  let scheduled = false;

  async function flush(): Promise<void> {
    scheduled = false;
    const batch = pending;
    pending = new Map();
    const ids = [...batch.keys()];
    for (let start = 0; start < ids.length; start += maxBatch) {
      const slice = ids.slice(start, start + maxBatch);
      try {
        const docs = await collection
          .find<T>({ _id: { $in: slice as never[] } }, { projection })
          .toArray();
        const byId = new Map(docs.map((doc) => [String(doc._id), doc]));
        for (const id of slice) for (const w of batch.get(id)!) w.resolve(byId.get(id) ?? null);
      } catch (error) {
        for (const id of slice) for (const w of batch.get(id)!) w.reject(error);
      }
    }
  }

  return (id) =>
    new Promise<T | null>((resolve, reject) => {
      const waiting = pending.get(id);
      if (waiting) waiting.push({ resolve, reject });
      else pending.set(id, [{ resolve, reject }]);
      if (!scheduled) {
        scheduled = true;
        setImmediate(() => void flush());
      }
    });
}
