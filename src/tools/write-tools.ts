/*
 * The tools a model uses to change a working copy: write_file, edit_file and delete_file
 * (docs/architecture.md, "Model tool protocol"). Every path is confined by resolveInside; on
 * top of that a write never goes through a symbolic link, never touches files that may hold
 * credentials, and, for a parallel worker, only touches the files of its part of the plan.
 * Mistakes the model can fix come back as text starting with "Error: "; only unexpected
 * failures throw.
 */
import { randomBytes } from "node:crypto";
// lstat and realpath decide where a write may go (confined by util/paths.ts); the file reads
// here go through workcopy/fs.ts.
// eslint-disable-next-line no-restricted-imports -- write confinement, not a read of content
import { chmod, lstat, mkdir, realpath, rename, unlink, writeFile } from "node:fs/promises";
import type { Stats } from "node:fs";
import path from "node:path";
import { z } from "zod";
import type { ExecutableTool } from "../llm/types.js";
import { inCheckedDir, PathError, resolveInside } from "../util/paths.js";
import { REDACTION_MARK } from "../util/redact.js";
import { readBytes } from "../workcopy/fs.js";
import { looksBinary, mayHoldSecrets } from "../indexer/skip.js";
import { numberedLines, type SyntaxChecker } from "./syntax-check.js";

/** Default cap on the size of a file the model writes. */
const DEFAULT_MAX_WRITE_BYTES = 1024 * 1024;
/** How many allowed files an allowedFiles refusal lists before "… and N more". */
const LISTED_ALLOWED = 20;
/** How many occurrence line numbers an ambiguous edit lists. */
const LISTED_OCCURRENCES = 10;
/** Files with more lines than this get no "closest line" hint (it costs lines × length). */
const HINT_MAX_LINES = 20_000;

/** A change a write tool made, reported to `onChange` with the repository-relative path. */
export interface FileChange {
  path: string;
  kind: "write" | "edit" | "delete";
}

/** Options of createWriteTools. */
export interface WriteToolOptions {
  /** When given, only these repository-relative paths may be written, edited or deleted. */
  allowedFiles?: ReadonlySet<string>;
  /** Called after each successful change. */
  onChange?: (change: FileChange) => void;
  /** Largest file a write or edit may produce, in bytes (default 1 MiB). */
  maxFileBytes?: number;
  /** Checks a written or edited file's syntax (tools/syntax-check.ts); none when not given. */
  syntaxCheck?: SyntaxChecker;
}

/** Lines shown around a syntax error, before and after it. */
const ERROR_CONTEXT = 3;
/** Lines shown around an edit, before and after the new text. */
const EDIT_CONTEXT = 2;

const writeFileInput = z.strictObject({
  path: z.string().min(1).max(1000).describe("file path relative to the repository root"),
  content: z.string().describe("the complete new content of the file"),
});

const editFileInput = z.strictObject({
  path: z.string().min(1).max(1000).describe("file path relative to the repository root"),
  old_text: z
    .string()
    .describe("text to replace, copied exactly from the file; it must occur exactly once"),
  new_text: z.string().describe("the replacement text"),
});

const deleteFileInput = z.strictObject({
  path: z.string().min(1).max(1000).describe("file path relative to the repository root"),
});

/** A refusal the model can act on; turned into "Error: …" text at the tool boundary. */
class ToolRefusal extends Error {
  override name = "ToolRefusal";
}

function refuse(message: string): never {
  throw new ToolRefusal(message);
}

const marks = (text: string) => text.split(REDACTION_MARK).length - 1;

/**
 * Refuses new text holding more redaction marks than what it replaces: the model read a mark
 * in place of a secret value (of the task's account), and writing it back would replace the
 * repository's text with it (docs/operations.md, "Secret redaction").
 */
function refuseRedactionMarks(rel: string, text: string, replaced: string): void {
  if (marks(text) <= marks(replaced)) return;
  refuse(
    `the new text holds ${REDACTION_MARK}, which stands for text the service hid from you (a secret value); writing it would replace that text in ${rel}. Leave those parts as they are and change the file around them with edit_file.`,
  );
}

function errorText(error: unknown): string {
  if (error instanceof PathError) return `Error: ${error.message}.`;
  if (error instanceof ToolRefusal) return `Error: ${error.message}`;
  // The path changed under the tool (a directory swapped, a file removed or replaced by a
  // link): a refusal for the model, not a crash of the stage.
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  if (code === "ELOOP")
    return "Error: the path ends in a symbolic link; use the file it points to.";
  if (code === "ENOENT" || code === "ENOTDIR" || code === "EEXIST" || code === "EISDIR")
    return `Error: the path changed or does not exist (${code}); check it and try again.`;
  throw error;
}

function toPosix(rel: string): string {
  return rel.split(path.sep).join("/");
}

function normalizeAllowed(file: string): string {
  const normal = path.posix.normalize(file.replace(/\\/g, "/"));
  return normal.startsWith("./") ? normal.slice(2) : normal;
}

async function lstatOrUndefined(abs: string): Promise<Stats | undefined> {
  return lstat(abs).catch((error: NodeJS.ErrnoException) => {
    if (error.code === "ENOENT" || error.code === "ENOTDIR") return undefined;
    throw error;
  });
}

/**
 * The first `limit` bytes of the file `rel` as text: enough to tell its line endings. Read
 * through workcopy/fs.ts, so a link swapped in meanwhile is refused, not followed.
 */
async function readStart(root: string, rel: string, limit: number): Promise<string> {
  const bytes = await readBytes(root, rel, { maxBytes: limit, partial: true });
  return typeof bytes === "string" ? "" : bytes.toString("utf8");
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

function countLines(text: string): number {
  if (text === "") return 0;
  const breaks = text.split("\n").length - 1;
  return text.endsWith("\n") ? breaks : breaks + 1;
}

/** True when most line breaks of `text` are CRLF: such files keep CRLF after a change. */
function usesCrlf(text: string): boolean {
  const crlf = text.split("\r\n").length - 1;
  const all = text.split("\n").length - 1;
  return crlf > 0 && crlf >= all - crlf;
}

function toCrlf(text: string): string {
  return text.replace(/\r?\n/g, "\r\n");
}

/** Start offsets of every (non-overlapping) occurrence of `needle` in `text`. */
function occurrences(text: string, needle: string): number[] {
  const found: number[] = [];
  for (let at = text.indexOf(needle); at !== -1; at = text.indexOf(needle, at + needle.length)) {
    found.push(at);
  }
  return found;
}

function lineAt(text: string, offset: number): number {
  let line = 1;
  for (let i = text.indexOf("\n"); i !== -1 && i < offset; i = text.indexOf("\n", i + 1)) line++;
  return line;
}

function bigrams(text: string): Map<string, number> {
  const counts = new Map<string, number>();
  for (let i = 0; i < text.length - 1; i++) {
    const pair = text.slice(i, i + 2);
    counts.set(pair, (counts.get(pair) ?? 0) + 1);
  }
  return counts;
}

/** Dice coefficient over character bigrams: 1 for equal strings, near 0 for unrelated ones. */
function similarity(a: Map<string, number>, aSize: number, b: string): number {
  if (aSize === 0 || b.length < 2) return 0;
  let shared = 0;
  const seen = new Map<string, number>();
  for (let i = 0; i < b.length - 1; i++) {
    const pair = b.slice(i, i + 2);
    const used = seen.get(pair) ?? 0;
    if (used < (a.get(pair) ?? 0)) shared++;
    seen.set(pair, used + 1);
  }
  return (2 * shared) / (aSize + b.length - 1);
}

function squeeze(line: string): string {
  return line.trim().replace(/\s+/g, " ");
}

/**
 * A hint pointing at the file line most like the first non-blank line of old_text, so the
 * model sees what it got wrong (indentation, a renamed identifier) without reading again.
 */
function closestLineHint(text: string, oldText: string): string {
  const wanted = oldText
    .split("\n")
    .map(squeeze)
    .find((line) => line !== "");
  if (wanted === undefined) return "";
  const lines = text.split("\n");
  if (lines.length > HINT_MAX_LINES) return "";
  const wantedPairs = bigrams(wanted);
  let best = { score: 0, index: -1 };
  for (const [index, raw] of lines.entries()) {
    const line = squeeze(raw);
    const score = line === wanted ? 1 : similarity(wantedPairs, wanted.length - 1, line);
    if (score > best.score) best = { score, index };
    if (score === 1) break;
  }
  if (best.index < 0 || best.score < 0.5) return "";
  const shown = lines[best.index]!.replace(/\r$/, "");
  const clipped = shown.length > 200 ? `${shown.slice(0, 200)}…` : shown;
  const what =
    best.score === 1
      ? "The first line of old_text matches"
      : "The line most like the first line of old_text is";
  return ` ${what} line ${best.index + 1}: ${JSON.stringify(clipped)}.`;
}

/**
 * Replaces a file's content without following a link at its final component and without
 * reaching another inode through a hard link: a new file next to it is renamed over it.
 * Both live in the directory opened and checked by inCheckedDir, so swapping a directory
 * of the path for a link meanwhile cannot carry the write outside the working copy.
 */
async function replaceFile(
  root: string,
  abs: string,
  data: string,
  previous: Stats | undefined,
): Promise<void> {
  await inCheckedDir(root, path.dirname(abs), async (dir) => {
    const temp = path.join(
      dir,
      `.${path.basename(abs)}.foreman-${randomBytes(6).toString("hex")}.tmp`,
    );
    try {
      // "wx" fails rather than follows if something appears at the temporary name meanwhile.
      await writeFile(temp, data, { flag: "wx" });
      if (previous !== undefined) await chmod(temp, previous.mode & 0o7777);
      await rename(temp, path.join(dir, path.basename(abs)));
    } catch (error) {
      await unlink(temp).catch(() => undefined);
      throw error;
    }
  });
}

/** The write tools over the working copy at `root`, confined to `options.allowedFiles` if given. */
export function createWriteTools(root: string, options: WriteToolOptions = {}): ExecutableTool[] {
  const maxBytes = options.maxFileBytes ?? DEFAULT_MAX_WRITE_BYTES;
  const allowed =
    options.allowedFiles === undefined
      ? undefined
      : new Set([...options.allowedFiles].map(normalizeAllowed));

  /**
   * The absolute path and repository-relative path of a file the model may change. The
   * relative path is taken after resolving links in the directories, so a link inside the
   * repository cannot smuggle a write past allowedFiles or the secrets rule.
   */
  async function target(file: string): Promise<{ abs: string; rel: string }> {
    const abs = await resolveInside(root, file);
    const realRoot = await realpath(path.resolve(root));
    let existing = path.dirname(abs);
    const missing: string[] = [path.basename(abs)];
    let realDir: string | undefined;
    while (realDir === undefined) {
      realDir = await realpath(existing).catch((error: NodeJS.ErrnoException) => {
        if (error.code === "ENOENT" || error.code === "ENOTDIR") return undefined;
        throw error;
      });
      if (realDir === undefined) {
        missing.unshift(path.basename(existing));
        existing = path.dirname(existing);
      }
    }
    const rel = toPosix(path.relative(realRoot, path.join(realDir, ...missing)));
    if (rel === "" || abs === path.resolve(root)) refuse("that is the repository root.");
    if (mayHoldSecrets(rel) || mayHoldSecrets(toPosix(path.relative(path.resolve(root), abs)))) {
      refuse(`${rel} may hold credentials, so it may not be changed.`);
    }
    if (allowed !== undefined && !allowed.has(rel)) {
      const files = [...allowed].sort();
      const listed = files.slice(0, LISTED_ALLOWED).join(", ");
      const more =
        files.length > LISTED_ALLOWED ? `, … and ${files.length - LISTED_ALLOWED} more` : "";
      refuse(
        files.length === 0
          ? `${rel} is not in the files of this worker's part of the plan: it lists no files.`
          : `${rel} is not in the files of this worker's part of the plan: ${listed}${more}. ` +
              "Change only those files.",
      );
    }
    return { abs, rel };
  }

  /** The existing regular file at `abs`, or a refusal saying what is there instead. */
  async function existingFile(abs: string, rel: string, verb: string): Promise<Stats> {
    const info = await lstatOrUndefined(abs);
    if (info === undefined) {
      refuse(
        verb === "edit"
          ? `no file ${rel} in the repository; use write_file to create it.`
          : `no file ${rel} in the repository, so there is nothing to delete.`,
      );
    }
    if (info.isSymbolicLink()) {
      if (verb === "delete") return info;
      refuse(`${rel} is a symbolic link; change the file it points to instead.`);
    }
    if (info.isDirectory()) refuse(`${rel} is a directory, not a file.`);
    if (!info.isFile()) refuse(`${rel} is not a regular file.`);
    return info;
  }

  /**
   * What the syntax check says of the new text: a line when it passed, the parser's message
   * and the lines around the error when it did not; "" for languages not checked. A checker
   * that fails itself says nothing: the change stands either way.
   */
  async function syntaxNote(rel: string, text: string): Promise<string> {
    if (!options.syntaxCheck) return "";
    const report = await options.syntaxCheck(rel, text).catch(() => null);
    if (!report) return "";
    if (report.ok) return `\nSyntax check (${report.checker}): no errors.`;
    const around =
      report.line === null
        ? ""
        : `\n${numberedLines(text, report.line - ERROR_CONTEXT, report.line + ERROR_CONTEXT)}`;
    return `\nSyntax error (${report.checker})${report.line === null ? "" : ` at line ${report.line}`}:\n${report.message}${around}\nFix it before going on.`;
  }

  function tooLarge(rel: string, bytes: number): string {
    return `the new content of ${rel} would be ${bytes} bytes, more than the limit of ${maxBytes} bytes.`;
  }

  const writeFileTool: ExecutableTool<z.infer<typeof writeFileInput>> = {
    name: "write_file",
    description:
      "Create a file or replace its whole content (parent directories are created). For a " +
      "small change to an existing file prefer edit_file. " +
      `At most ${Math.floor(maxBytes / 1024)} KB.`,
    input: writeFileInput,
    async execute({ path: file, content }) {
      try {
        const { abs, rel } = await target(file);
        const previous = await lstatOrUndefined(abs);
        if (previous?.isSymbolicLink()) {
          refuse(`${rel} is a symbolic link; write the file it points to instead.`);
        }
        if (previous?.isDirectory()) refuse(`${rel} is a directory; choose a file path.`);
        if (previous !== undefined && !previous.isFile()) refuse(`${rel} is not a regular file.`);

        if (content.includes(REDACTION_MARK)) {
          const before = previous ? await readBytes(root, rel, { maxBytes }) : "";
          refuseRedactionMarks(rel, content, typeof before === "string" ? "" : before.toString());
        }
        let data = content;
        // read_file strips CR, so a model rewriting a CRLF file writes LF; keep the file's
        // line endings rather than turn every line into a diff.
        let kept = "";
        if (previous !== undefined && !content.includes("\r")) {
          if (usesCrlf(await readStart(root, rel, 64 * 1024))) {
            data = toCrlf(content);
            kept = ", CRLF line endings kept";
          }
        }
        const bytes = Buffer.byteLength(data, "utf8");
        if (bytes > maxBytes) refuse(tooLarge(rel, bytes));

        try {
          await mkdir(path.dirname(abs), { recursive: true });
        } catch (error) {
          const code = (error as NodeJS.ErrnoException).code;
          if (code !== "EEXIST" && code !== "ENOTDIR") throw error;
          refuse(`cannot create the directory of ${rel}: part of its path is a file.`);
        }
        // mkdir created only directories resolveInside saw missing; check the result anyway
        // so a link that appeared meanwhile cannot carry the write outside.
        await resolveInside(root, file);
        await replaceFile(root, abs, data, previous);
        options.onChange?.({ path: rel, kind: "write" });
        const verb = previous === undefined ? "Created" : "Wrote";
        return `${verb} ${rel} (${plural(countLines(data), "line")}, ${plural(bytes, "byte")}${kept}).${await syntaxNote(rel, data)}`;
      } catch (error) {
        return errorText(error);
      }
    },
  };

  const editFileTool: ExecutableTool<z.infer<typeof editFileInput>> = {
    name: "edit_file",
    description:
      "Replace one exact occurrence of old_text in a file with new_text. Copy old_text from " +
      "read_file output without the line-number prefixes, with enough surrounding lines that " +
      "it occurs exactly once. The file's line endings are kept.",
    input: editFileInput,
    async execute({ path: file, old_text: oldText, new_text: newText }) {
      try {
        const { abs, rel } = await target(file);
        if (oldText === "") {
          refuse(
            "old_text is empty; copy the exact text to replace from the file (use write_file to create or replace a whole file).",
          );
        }
        if (oldText === newText)
          refuse("old_text and new_text are the same; nothing would change.");
        refuseRedactionMarks(rel, newText, oldText);
        const info = await existingFile(abs, rel, "edit");
        if (info.size > maxBytes) {
          refuse(
            `${rel} is ${info.size} bytes, more than the limit of ${maxBytes} bytes for editing.`,
          );
        }
        // Through workcopy/fs.ts by the path links in the directories resolved to.
        const bytes = await readBytes(root, rel, { maxBytes });
        if (typeof bytes === "string")
          refuse(`${rel} could not be read (${bytes}); it changed while in use, look again.`);
        if (looksBinary(bytes)) refuse(`${rel} is a binary file; it cannot be edited as text.`);
        const text = bytes.toString("utf8");
        // Writing back text that was not valid UTF-8 would replace its other bytes with U+FFFD.
        if (!Buffer.from(text, "utf8").equals(bytes)) {
          refuse(
            `${rel} is not UTF-8 text; editing it would damage it. Use write_file to replace it whole.`,
          );
        }

        // The model sees LF (read_file strips CR); match and write CRLF in a CRLF file.
        const candidates: Array<{ find: string; replace: string }> = [];
        if (usesCrlf(text) && !oldText.includes("\r")) {
          const replace = newText.includes("\r") ? newText : toCrlf(newText);
          candidates.push({ find: toCrlf(oldText), replace });
        }
        candidates.push({ find: oldText, replace: newText });
        let chosen: { find: string; replace: string; at: number[] } | undefined;
        for (const candidate of candidates) {
          const at = occurrences(text, candidate.find);
          if (at.length > 0) {
            chosen = { ...candidate, at };
            break;
          }
        }
        if (chosen === undefined) {
          refuse(
            `old_text was not found in ${rel}; read the file again and copy the text exactly.` +
              closestLineHint(text, oldText),
          );
        }
        if (chosen.at.length > 1) {
          const lines = chosen.at.slice(0, LISTED_OCCURRENCES).map((at) => lineAt(text, at));
          const more = chosen.at.length > LISTED_OCCURRENCES ? ", …" : "";
          refuse(
            `old_text occurs ${chosen.at.length} times in ${rel} (at lines ${lines.join(", ")}${more}); ` +
              "include more surrounding lines so it is unique.",
          );
        }
        const at = chosen.at[0]!;
        const updated = text.slice(0, at) + chosen.replace + text.slice(at + chosen.find.length);
        const size = Buffer.byteLength(updated, "utf8");
        if (size > maxBytes) refuse(tooLarge(rel, size));
        await replaceFile(root, abs, updated, info);
        options.onChange?.({ path: rel, kind: "edit" });
        const line = lineAt(text, at);
        const removed = countLines(chosen.find) || 1;
        const added = countLines(chosen.replace);
        const shown = numberedLines(
          updated,
          line - EDIT_CONTEXT,
          line + Math.max(added, 1) - 1 + EDIT_CONTEXT,
        );
        return `Edited ${rel} at line ${line}: replaced ${plural(removed, "line")} with ${plural(added, "line")}. The lines around the edit now:\n${shown}${await syntaxNote(rel, updated)}`;
      } catch (error) {
        return errorText(error);
      }
    },
  };

  const deleteFileTool: ExecutableTool<z.infer<typeof deleteFileInput>> = {
    name: "delete_file",
    description: "Delete a file of the repository (not a directory).",
    input: deleteFileInput,
    async execute({ path: file }) {
      try {
        const { abs, rel } = await target(file);
        const info = await existingFile(abs, rel, "delete");
        // unlink removes a link itself, never what it points to; in the checked directory.
        await inCheckedDir(root, path.dirname(abs), (dir) =>
          unlink(path.join(dir, path.basename(abs))),
        );
        options.onChange?.({ path: rel, kind: "delete" });
        return info.isSymbolicLink() ? `Deleted the symbolic link ${rel}.` : `Deleted ${rel}.`;
      } catch (error) {
        return errorText(error);
      }
    },
  };

  return [writeFileTool, editFileTool, deleteFileTool];
}
