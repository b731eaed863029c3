/*
 * A sandboxed command's output: a FIFO, bounded and redacted collection, and the one-line
 * descriptions of a run for logs and task errors (run.ts).
 */
import { closeSync, constants as fsConstants, openSync } from "node:fs";
import { Socket } from "node:net";
import { execFileAsync } from "../util/launcher.js";
import { redactText } from "../util/redact.js";
import { type SandboxResult } from "./settings.js";

export const DEFAULT_MAX_OUTPUT = 64 * 1024;
/**
 * Context kept beyond each cut of the output so a secret crossing a cut is still seen whole
 * by the redactor (PEM private keys are the longest, about 3.3 KiB for RSA-4096).
 */
const REDACT_MARGIN = 8 * 1024;
/** The heartbeat line of a long command, e.g. "still running `npm ci` (40 s)". */
export function heartbeatLine(command: string, elapsedMs: number): string {
  const oneLine = redactText(command).replace(/\s+/g, " ").trim();
  const name = oneLine.length > 100 ? `${oneLine.slice(0, 99)}…` : oneLine;
  return `still running \`${name}\` (${Math.round(elapsedMs / 1000)} s)`;
}

type OutputCollector = {
  push(chunk: Buffer): void;
  text(): string;
};

/*
 * Keeps the first headCap and the last tailCap bytes (plus REDACT_MARGIN each) of a stream,
 * in constant memory, and renders them redacted with an omission marker between.
 */
export function createCollector(maxBytes: number): OutputCollector {
  const headCap = Math.floor(maxBytes / 4);
  const tailCap = maxBytes - headCap;
  const head: Buffer[] = [];
  let headBytes = 0;
  const tail: Buffer[] = [];
  let tailBytes = 0;
  let total = 0;

  function push(chunk: Buffer): void {
    total += chunk.length;
    const room = headCap + REDACT_MARGIN - headBytes;
    if (room > 0) {
      const part = chunk.subarray(0, room);
      head.push(part);
      headBytes += part.length;
    }
    // The tail window sees every byte, including those also in the head, so that the kept
    // tail can start inside the head window when the output is only slightly too long.
    tail.push(chunk);
    tailBytes += chunk.length;
    const limit = tailCap + REDACT_MARGIN;
    while (tailBytes > limit) {
      const first = tail[0];
      if (!first) break;
      const excess = tailBytes - limit;
      if (first.length <= excess) {
        tail.shift();
        tailBytes -= first.length;
      } else {
        tail[0] = first.subarray(excess);
        tailBytes -= excess;
      }
    }
  }

  function text(): string {
    const headBuf = Buffer.concat(head);
    const tailBuf = Buffer.concat(tail);
    if (total <= maxBytes) {
      const rest = tailBuf.subarray(tailBuf.length - (total - headBuf.length));
      return redactText(Buffer.concat([headBuf, rest]).toString("utf8"));
    }
    // Cut on UTF-8 character boundaries so no replacement characters appear at the seams.
    let headCut = Math.min(headCap, headBuf.length);
    while (headCut > 0 && isContinuation(headBuf[headCut])) headCut--;
    let tailCut = Math.max(0, tailBuf.length - tailCap);
    while (tailCut < tailBuf.length && isContinuation(tailBuf[tailCut])) tailCut++;

    // Redact each kept part both alone and with the margin beyond its cut, and keep only
    // where the two agree: a secret crossing the cut is whole (so redacted) in the wider
    // version and partial in the narrow one, so the part ends just before it.
    const headNarrow = redactText(headBuf.subarray(0, headCut).toString("utf8"));
    const headWide = redactText(headBuf.toString("utf8"));
    const headText = headNarrow.slice(0, commonPrefixLength(headNarrow, headWide));
    const tailNarrow = redactText(tailBuf.subarray(tailCut).toString("utf8"));
    const tailWide = redactText(tailBuf.toString("utf8"));
    const tailText = tailNarrow.slice(tailNarrow.length - commonSuffixLength(tailNarrow, tailWide));

    const omitted = total - headCut - (tailBuf.length - tailCut);
    return `${headText}\n[… ${omitted} bytes omitted …]\n${tailText}`;
  }

  return { push, text };
}

function isContinuation(byte: number | undefined): boolean {
  return byte !== undefined && (byte & 0xc0) === 0x80;
}

function commonPrefixLength(a: string, b: string): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}

function commonSuffixLength(a: string, b: string): number {
  let i = 0;
  while (i < a.length && i < b.length && a[a.length - 1 - i] === b[b.length - 1 - i]) i++;
  return i;
}

export interface OutputFifo {
  path: string;
  reader: Socket;
  closeWriter(): void;
  close(): void;
}

/**
 * A FIFO for the command's output, opened for reading (non-blocking, as a stream) and for
 * writing: without a writer of ours, reading would see end-of-file before the command has
 * opened its end.
 */
export async function openOutputFifo(fifoPath: string): Promise<OutputFifo> {
  await execFileAsync("mkfifo", ["-m", "600", fifoPath]);
  const readFd = openSync(fifoPath, fsConstants.O_RDONLY | fsConstants.O_NONBLOCK);
  let writeFd: number | undefined = openSync(
    fifoPath,
    fsConstants.O_WRONLY | fsConstants.O_NONBLOCK,
  );
  const reader = new Socket({ fd: readFd, readable: true, writable: false });
  const closeWriter = () => {
    if (writeFd === undefined) return;
    closeSync(writeFd);
    writeFd = undefined;
  };
  return {
    path: fifoPath,
    reader,
    closeWriter,
    close() {
      closeWriter();
      reader.destroy();
    },
  };
}

function formatDuration(ms: number): string {
  if (ms < 1000) return `${ms} ms`;
  if (ms < 10_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.round(ms / 1000)} s`;
}

/** One line for logs and task errors, e.g. "`npm test` failed with exit code 1 after 3.2 s". */
export function describeResult(result: SandboxResult): string {
  const oneLine = result.command.replace(/\s+/g, " ").trim();
  const name = `\`${oneLine.length > 100 ? `${oneLine.slice(0, 99)}…` : oneLine}\``;
  const after = formatDuration(result.durationMs);
  if (result.timedOut) return `${name} timed out after ${after}`;
  if (result.aborted) return `${name} was cancelled after ${after}`;
  if (result.ok) return `${name} succeeded after ${after}`;
  const limit = result.limit ? ` (${result.limit})` : "";
  if (result.disk) return `${name} was stopped after ${after}${limit}`;
  if (result.exitCode !== null)
    return `${name} failed with exit code ${result.exitCode} after ${after}${limit}`;
  return `${name} was killed by ${result.signal ?? "a signal"} after ${after}${limit}`;
}
