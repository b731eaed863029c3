/*
 * Reading many files fast, with a size check before the bytes are read and symbolic links
 * refused. In-process: callback fs calls (cheaper than FileHandle promises) with a fixed
 * number in flight, so the thread pool reads while the main thread tokenizes what has
 * arrived. On a worker thread: blocking reads into one reused buffer.
 */
import fs from "node:fs";
import type { SkipReason } from "./skip.js";

/** Reads in flight at once; libuv runs four at a time, the rest wait queued and ready. */
export const READ_CONCURRENCY = 32;

// O_NOFOLLOW: a symbolic link fails to open (ELOOP) instead of leading outside the tree.
const OPEN_FLAGS = fs.constants.O_RDONLY | (fs.constants.O_NOFOLLOW ?? 0);

/**
 * The bytes of a regular file of at most `maxBytes`, or why it was not read: a symbolic link,
 * too large, or unreadable (missing, not a regular file, no permission).
 */
export function readBounded(file: string, maxBytes: number): Promise<Buffer | SkipReason> {
  return new Promise((resolve) => {
    fs.open(file, OPEN_FLAGS, (openError, fd) => {
      if (openError) {
        resolve(openError.code === "ELOOP" ? "symlink" : "unreadable");
        return;
      }
      const finish = (result: Buffer | SkipReason) => fs.close(fd, () => resolve(result));
      fs.fstat(fd, (statError, stat) => {
        if (statError || !stat.isFile()) return finish("unreadable");
        if (stat.size > maxBytes) return finish("too-large");
        const buffer = Buffer.allocUnsafe(stat.size);
        let offset = 0;
        const next = (): void => {
          if (offset >= buffer.length) return finish(buffer);
          fs.read(fd, buffer, offset, buffer.length - offset, offset, (readError, n) => {
            if (readError) return finish("unreadable");
            // The file shrank while being read: keep what is there.
            if (n === 0) return finish(buffer.subarray(0, offset));
            offset += n;
            next();
          });
        };
        next();
      });
    });
  });
}

/**
 * readBounded for a worker thread, where blocking reads are cheapest. The bytes are read into
 * `scratch.buffer` (replaced by a larger one when a file does not fit), so the result is only
 * valid until the next call: callers tokenize it at once.
 */
export function readBoundedSync(
  file: string,
  maxBytes: number,
  scratch: { buffer: Buffer },
): Buffer | SkipReason {
  let fd: number;
  try {
    fd = fs.openSync(file, OPEN_FLAGS);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ELOOP" ? "symlink" : "unreadable";
  }
  try {
    const stat = fs.fstatSync(fd);
    if (!stat.isFile()) return "unreadable";
    if (stat.size > maxBytes) return "too-large";
    if (stat.size > scratch.buffer.length) {
      scratch.buffer = Buffer.allocUnsafeSlow(Math.max(stat.size, scratch.buffer.length * 2));
    }
    const buffer = scratch.buffer;
    let offset = 0;
    while (offset < stat.size) {
      const n = fs.readSync(fd, buffer, offset, stat.size - offset, offset);
      if (n === 0) break;
      offset += n;
    }
    return buffer.subarray(0, offset);
  } catch {
    return "unreadable";
  } finally {
    fs.closeSync(fd);
  }
}
