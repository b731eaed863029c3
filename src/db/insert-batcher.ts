import {
  MongoBulkWriteError,
  type Collection,
  type Document,
  type OptionalUnlessRequiredId,
} from "mongodb";

/*
 * Group commit for a hot insert path: documents inserted during the same turn of the event
 * loop go to the database as one unordered insertMany, so N concurrent requests cost one
 * round trip (and one SQLite transaction on FerretDB) instead of N. Each caller still gets
 * its own outcome: a document the database refused rejects only its own promise. At low
 * load a batch holds one document and waits only for setImmediate.
 */

interface Pending<T extends Document> {
  doc: OptionalUnlessRequiredId<T>;
  resolve(): void;
  reject(error: unknown): void;
}

export type BatchedInsert<T extends Document> = (doc: OptionalUnlessRequiredId<T>) => Promise<void>;

/** An insert function that batches concurrent calls into unordered insertMany commands. */
export function createInsertBatcher<T extends Document>(
  collection: Collection<T>,
  maxBatch = 200,
): BatchedInsert<T> {
  let pending: Pending<T>[] = [];
  let scheduled = false;

  async function flush(): Promise<void> {
    scheduled = false;
    const batch = pending.slice(0, maxBatch);
    pending = pending.slice(maxBatch);
    if (pending.length > 0) schedule();
    if (batch.length === 0) return;
    try {
      await collection.insertMany(
        batch.map((p) => p.doc),
        { ordered: false },
      );
      for (const p of batch) p.resolve();
    } catch (error) {
      if (!(error instanceof MongoBulkWriteError)) {
        for (const p of batch) p.reject(error);
        return;
      }
      const failed = new Map<number, unknown>();
      const writeErrors = Array.isArray(error.writeErrors)
        ? error.writeErrors
        : [error.writeErrors];
      for (const writeError of writeErrors) {
        failed.set(
          writeError.index,
          Object.assign(new Error(writeError.errmsg ?? "insert failed"), { code: writeError.code }),
        );
      }
      batch.forEach((p, index) => (failed.has(index) ? p.reject(failed.get(index)) : p.resolve()));
    }
  }

  function schedule(): void {
    if (scheduled) return;
    scheduled = true;
    setImmediate(() => void flush());
  }

  return (doc) =>
    new Promise<void>((resolve, reject) => {
      pending.push({ doc, resolve, reject });
      schedule();
    });
}
