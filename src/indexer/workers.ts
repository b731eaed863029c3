/*
 * Indexing on worker threads. Tokenizing is CPU-bound, so large repositories are indexed by a
 * small pool of workers (one per core, at most four) that pull batches of paths, read them
 * and return shards; the main thread only hands out batches, and its event loop stays free.
 * The pool lives as long as the process, unreferenced while idle so it never holds it open.
 * When workers cannot be started, `indexOnWorkers` answers undefined and the caller indexes
 * in-process instead.
 */
import os from "node:os";
import { Worker } from "node:worker_threads";
import type { Shard } from "./shard.js";

export type ToWorker =
  { type: "files"; root: string; maxFileBytes: number; paths: string[] } | { type: "finish" };

export type FromWorker =
  { type: "more" } | { type: "shard"; shard: Shard } | { type: "failed"; message: string };

/** Paths handed to a worker at a time: small enough to balance, large enough to be cheap. */
const BATCH = 256;
const MAX_WORKERS = 4;

let pool: Worker[] | undefined;
let unavailable = false;
/** Builds take turns on the pool. */
let turn: Promise<unknown> = Promise.resolve();

function spawn(): Worker {
  if (import.meta.url.endsWith(".ts")) {
    // Running from TypeScript sources (tsx, vitest): the worker registers tsx's loader before
    // loading its entry. Built code (dist/) starts the compiled entry directly.
    const tsx = import.meta.resolve("tsx/esm/api");
    const entry = new URL("./index-worker.ts", import.meta.url).href;
    const boot =
      `import(${JSON.stringify(tsx)}).then((m) => { m.register(); ` +
      `return import(${JSON.stringify(entry)}); });`;
    return new Worker(boot, { eval: true });
  }
  return new Worker(new URL("./index-worker.js", import.meta.url));
}

/** Shards of `paths` (relative to `root`) indexed on the worker pool, or undefined. */
export function indexOnWorkers(
  root: string,
  paths: readonly string[],
  maxFileBytes: number,
): Promise<Shard[] | undefined> {
  const run = turn.then(() => dispatch(root, paths, maxFileBytes));
  turn = run.catch(() => undefined);
  return run;
}

async function dispatch(
  root: string,
  paths: readonly string[],
  maxFileBytes: number,
): Promise<Shard[] | undefined> {
  if (unavailable) return undefined;
  let workers: Worker[];
  try {
    pool ??= Array.from(
      { length: Math.max(1, Math.min(MAX_WORKERS, os.availableParallelism())) },
      spawn,
    );
    workers = pool;
  } catch {
    unavailable = true;
    return undefined;
  }
  let next = 0;
  const take = (): string[] | undefined => {
    if (next >= paths.length) return undefined;
    const batch = paths.slice(next, next + BATCH);
    next += BATCH;
    return batch;
  };
  try {
    return await Promise.all(workers.map((worker) => run(worker, root, maxFileBytes, take)));
  } catch {
    // A worker that failed to start or crashed: no more workers in this process, and the
    // caller redoes the whole build in-process.
    unavailable = true;
    pool = undefined;
    await Promise.allSettled(workers.map((w) => w.terminate()));
    return undefined;
  }
}

function run(
  worker: Worker,
  root: string,
  maxFileBytes: number,
  take: () => string[] | undefined,
): Promise<Shard> {
  return new Promise((resolve, reject) => {
    const send = () => {
      const paths = take();
      const message: ToWorker =
        paths === undefined ? { type: "finish" } : { type: "files", root, maxFileBytes, paths };
      worker.postMessage(message);
    };
    const done = () => {
      worker.off("message", onMessage);
      worker.off("error", onError);
      worker.off("exit", onExit);
      worker.unref();
    };
    const onMessage = (message: FromWorker) => {
      if (message.type === "more") return send();
      done();
      if (message.type === "shard") resolve(message.shard);
      else reject(new Error(`index worker failed: ${message.message}`));
    };
    const onError = (error: Error) => {
      done();
      reject(error);
    };
    const onExit = (code: number) => {
      done();
      reject(new Error(`index worker exited with code ${code}`));
    };
    worker.on("message", onMessage);
    worker.on("error", onError);
    worker.on("exit", onExit);
    worker.ref();
    send();
  });
}
