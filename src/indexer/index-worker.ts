/*
 * Entry of an index worker thread (see workers.ts): reads the batches of paths it is given
 * with blocking reads (cheapest here, and no other work shares this thread) into one shard,
 * and posts the shard back, its arrays transferred rather than copied, when told to finish.
 */
import { parentPort } from "node:worker_threads";
import { readBoundedSync } from "./read-files.js";
import { ShardBuilder, shardBuffers } from "./shard.js";
import type { FromWorker, ToWorker } from "./workers.js";

const port = parentPort;
if (port === null) throw new Error("index-worker.ts runs only as a worker thread");

let builder: ShardBuilder | undefined;
// Files are read into one reused buffer: each is tokenized before the next is read.
const scratch = { buffer: Buffer.allocUnsafeSlow(256 * 1024) };

port.on("message", (message: ToWorker) => {
  try {
    if (message.type === "files") {
      builder ??= new ShardBuilder();
      for (const rel of message.paths) {
        const content = readBoundedSync(message.root, rel, message.maxFileBytes, scratch);
        if (typeof content === "string") builder.skip(content);
        else builder.addFile(rel, content);
      }
      port.postMessage({ type: "more" } satisfies FromWorker);
    } else {
      const shard = (builder ?? new ShardBuilder()).finish();
      builder = undefined;
      port.postMessage({ type: "shard", shard } satisfies FromWorker, shardBuffers(shard));
    }
  } catch (error) {
    builder = undefined;
    const text = error instanceof Error ? (error.stack ?? error.message) : String(error);
    port.postMessage({ type: "failed", message: text } satisfies FromWorker);
  }
});
