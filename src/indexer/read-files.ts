/*
 * Reading many files of a working copy fast, with a size check before the bytes are read
 * and symbolic links refused, through the one reader of working copies (workcopy/fs.ts:
 * no link is followed, also one swapped in after the listing). In-process: its asynchronous
 * reads with a fixed number in flight, so the thread pool reads while the main thread
 * tokenizes what has arrived. On a worker thread: blocking reads into one reused buffer.
 */
import { readBytes, readBytesSync, type Refusal } from "../workcopy/fs.js";
import type { SkipReason } from "./skip.js";

/** Reads in flight at once; libuv runs four at a time, the rest wait queued and ready. */
export const READ_CONCURRENCY = 32;

function skipReason(refusal: Refusal): SkipReason {
  return refusal === "symlink" || refusal === "too-large" ? refusal : "unreadable";
}

/**
 * The bytes of the regular file `rel` under `root` of at most `maxBytes`, or why it was not
 * read: a symbolic link (at its end or on the way), too large, or unreadable (missing, not a
 * regular file, no permission).
 */
export async function readBounded(
  root: string,
  rel: string,
  maxBytes: number,
): Promise<Buffer | SkipReason> {
  const bytes = await readBytes(root, rel, { maxBytes });
  return typeof bytes === "string" ? skipReason(bytes) : bytes;
}

/**
 * readBounded for a worker thread, where blocking reads are cheapest. The bytes are read into
 * `scratch.buffer` (replaced by a larger one when a file does not fit), so the result is only
 * valid until the next call: callers tokenize it at once.
 */
export function readBoundedSync(
  root: string,
  rel: string,
  maxBytes: number,
  scratch: { buffer: Buffer },
): Buffer | SkipReason {
  const bytes = readBytesSync(root, rel, { maxBytes, scratch });
  return typeof bytes === "string" ? skipReason(bytes) : bytes;
}
