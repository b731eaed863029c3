/*
 * The read-only tools a model uses to explore a working copy: list_files, read_file and
 * search_code. Mistakes the model can fix (a bad path, a line past the end) come back as text
 * starting with "Error: " so it can correct itself; only unexpected failures throw.
 */
import path from "node:path";
import { z } from "zod";
import type { ExecutableTool } from "../llm/types.js";
import { PathError, resolveInside } from "../util/paths.js";
import { entryInfo, readBytes, type Refusal } from "../workcopy/fs.js";

import type { RepoIndex } from "../indexer/index.js";
import { holdsSecrets, looksBinary, mayHoldSecrets } from "../indexer/skip.js";
import type { SandboxRun } from "./syntax-check.js";

/** Caps on one tool result, so a single call cannot flood the model's context. */
const MAX_LIST_LINES = 500;
const MAX_READ_LINES = 400;
const MAX_READ_BYTES = 100 * 1024;
/** Files larger than this are not read at all (reading would hold them in memory whole). */
const MAX_FILE_BYTES = 16 * 1024 * 1024;
const SEARCH_HITS = 10;
/** Lines one grep shows at most, and the longest line shown whole. */
const GREP_LINES = 200;
const GREP_LINE_CHARS = 300;

const listFilesInput = z.strictObject({
  path: z
    .string()
    .max(1000)
    .optional()
    .describe("directory relative to the repository root; omit for the whole repository"),
});

const readFileInput = z.strictObject({
  path: z.string().min(1).max(1000).describe("file path relative to the repository root"),
  start_line: z.number().int().min(1).optional().describe("first line to show (1-based)"),
  end_line: z.number().int().min(1).optional().describe("last line to show (inclusive)"),
});

const searchCodeInput = z.strictObject({
  query: z
    .string()
    .min(1)
    .max(500)
    .describe(
      "words, an identifier or a path fragment, e.g. 'where is the rate limiter configured'",
    ),
});

function errorText(error: unknown): string {
  if (error instanceof PathError) return `Error: ${error.message}.`;
  // The path changed under the tool (a directory swapped, a file removed or replaced by a
  // link): a refusal for the model, not a crash of the stage.
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  if (code === "ELOOP")
    return "Error: the path ends in a symbolic link; use the file it points to.";
  if (code === "ENOENT" || code === "ENOTDIR" || code === "EEXIST" || code === "EISDIR")
    return `Error: the path changed or does not exist (${code}); check it and try again.`;
  throw error;
}

/** A read refused by workcopy/fs.ts (the file changed between the look and the read). */
function refusalText(rel: string, refusal: Refusal): string {
  switch (refusal) {
    case "symlink":
      return `Error: '${rel}' is, or passes through, a symbolic link; read the file it points to instead.`;
    case "not-a-file":
      return `Error: '${rel}' is not a regular file.`;
    case "too-large":
      return `Error: '${rel}' is too large to read.`;
    case "missing":
      return `Error: the path changed or does not exist; check it and try again.`;
    default:
      return `Error: '${rel}' could not be read (${refusal}).`;
  }
}

/** Relative posix form of an absolute path inside `root` ("" for the root itself). */
function relativeTo(root: string, abs: string): string {
  return path.relative(path.resolve(root), abs).split(path.sep).join("/");
}

/** The read tools over the working copy at `root`; `getIndex` gives the current index. */
export function createReadTools(root: string, getIndex: () => RepoIndex): ExecutableTool[] {
  const listFiles: ExecutableTool<z.infer<typeof listFilesInput>> = {
    name: "list_files",
    description:
      "List the repository's indexed files (vendored, generated and binary files left out) " +
      `under a directory, one relative path per line, at most ${MAX_LIST_LINES}.`,
    input: listFilesInput,
    async execute({ path: dir }) {
      const index = getIndex();
      let rel = "";
      if (dir !== undefined && dir.trim() !== "" && dir.trim() !== ".") {
        try {
          rel = relativeTo(root, await resolveInside(root, dir.trim()));
        } catch (error) {
          return errorText(error);
        }
      }
      if (rel !== "" && index.has(rel)) {
        return `Error: '${rel}' is a file, not a directory; use read_file to read it.`;
      }
      const files = index.listFiles(rel);
      if (files.length === 0) {
        return rel === ""
          ? "The repository has no indexed files."
          : `Error: no directory '${rel}' with indexed files (it does not exist, or everything in it is ignored, vendored or generated).`;
      }
      const shown = files.slice(0, MAX_LIST_LINES);
      if (files.length > shown.length) {
        shown.push(`… ${files.length - shown.length} more (list a subdirectory to see them)`);
      }
      return shown.join("\n");
    },
  };

  const readFileTool: ExecutableTool<z.infer<typeof readFileInput>> = {
    name: "read_file",
    description:
      "Read a text file of the repository, with line numbers. Shows at most " +
      `${MAX_READ_LINES} lines or ${MAX_READ_BYTES / 1024} KB per call; use start_line and ` +
      "end_line to read a long file in parts.",
    input: readFileInput,
    async execute({ path: file, start_line: startLine, end_line: endLine }) {
      let abs: string;
      try {
        abs = await resolveInside(root, file);
      } catch (error) {
        return errorText(error);
      }
      const rel = relativeTo(root, abs);
      if (rel === "") return "Error: that is the repository root; use list_files to see it.";
      if (mayHoldSecrets(rel))
        return `Error: ${rel} may hold credentials, so it is not shown; work from its example or documentation instead.`;
      // What is there, and the bytes, through workcopy/fs.ts: no link is followed, at
      // the end of the path or on the way, also one swapped in since resolveInside looked.
      const info = await entryInfo(root, rel);
      if (info === undefined) {
        // Nothing there, or a folder on the way is a link: which one, for the model.
        const why = await readBytes(root, rel, { maxBytes: 0, partial: true });
        if (why === "symlink")
          return `Error: '${rel}' passes through a symbolic link; use the path it points to instead.`;
        return `Error: no file '${rel}' in the repository; use list_files or search_code to find the right path.`;
      }
      if (info.type === "directory") {
        return `Error: '${rel}' is a directory; use list_files to see its files.`;
      }
      if (info.type === "symlink")
        return `Error: '${rel}' is a symbolic link; read the file it points to instead.`;
      if (info.type !== "file") return `Error: '${rel}' is not a regular file.`;
      if (info.size > MAX_FILE_BYTES) {
        return `Error: '${rel}' is ${(info.size / 1024 / 1024).toFixed(1)} MB, too large to read.`;
      }
      const bytes = await readBytes(root, rel, { maxBytes: MAX_FILE_BYTES });
      if (typeof bytes === "string") return refusalText(rel, bytes);
      if (holdsSecrets(bytes))
        return `Error: ${rel} holds credentials (a private key or a token), so it is not shown.`;
      if (looksBinary(bytes)) {
        return `Error: '${rel}' is a binary file (${bytes.length} bytes); it cannot be shown as text.`;
      }
      return numberedLines(rel, bytes.toString("utf8"), startLine, endLine);
    },
  };

  const searchCode: ExecutableTool<z.infer<typeof searchCodeInput>> = {
    name: "search_code",
    description:
      "Search the repository's indexed files by words, identifiers or path fragments (ranked " +
      "by BM25 over paths, defined symbols and content). Returns the best files with a " +
      "numbered snippet around the best-matching line.",
    input: searchCodeInput,
    async execute({ query }) {
      const hits = getIndex().search(query, SEARCH_HITS);
      if (hits.length === 0) {
        return `No matches for "${query}". Try other words, a symbol name, or list_files.`;
      }
      return hits
        .map((hit) => {
          const snippet = hit.snippet
            .split("\n")
            .map((line) => `  ${line}`)
            .join("\n");
          return `${hit.path} (score ${hit.score.toFixed(2)})\n${snippet}`;
        })
        .join("\n\n");
    },
  };

  return [listFiles, readFileTool, searchCode];
}

function numberedLines(
  rel: string,
  text: string,
  startLine: number | undefined,
  endLine: number | undefined,
): string {
  const lines = text.split("\n");
  // A final newline ends the last line; it does not start another.
  if (lines.length > 0 && lines[lines.length - 1] === "") lines.pop();
  const total = lines.length;
  if (total === 0) return `(${rel} is empty)`;
  const start = startLine ?? 1;
  if (start > total) {
    return `Error: '${rel}' has ${total} ${total === 1 ? "line" : "lines"}; start_line must be at most ${total}.`;
  }
  if (endLine !== undefined && endLine < start) {
    return `Error: end_line (${endLine}) is before start_line (${start}).`;
  }
  const wanted = Math.min(endLine ?? total, total);
  const out: string[] = [];
  let bytes = 0;
  let last = start - 1;
  for (let n = start; n <= wanted && n < start + MAX_READ_LINES; n++) {
    let line = lines[n - 1]!.replace(/\r$/, "");
    if (bytes + line.length > MAX_READ_BYTES) {
      if (out.length > 0) break;
      // One enormous line (minified code, data): show its start rather than nothing.
      line = `${line.slice(0, MAX_READ_BYTES)}… (line cut at ${MAX_READ_BYTES / 1024} KB)`;
    }
    out.push(`${n}: ${line}`);
    bytes += line.length + 1;
    last = n;
  }
  if (last < wanted) {
    out.push(
      `… (showing lines ${start}–${last} of ${total}; call read_file with start_line=${last + 1} to read further)`,
    );
  }
  return out.join("\n");
}

const grepInput = z.strictObject({
  pattern: z
    .string()
    .min(1)
    .max(500)
    .describe("an extended regular expression (POSIX ERE, as grep -E), e.g. 'function +greet'"),
  path: z
    .string()
    .max(300)
    .optional()
    .describe("only files matching this glob, relative to the repository root, e.g. 'src/**/*.ts'"),
  ignore_case: z.boolean().optional().describe("match regardless of case"),
});

/** A value as one single-quoted shell word. */
function shellWord(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`;
}

/**
 * `grep`: every line matching a regular expression, as `path:line:text`, over the working
 * copy's tracked and new files (not ignored ones). It is `git grep` run in the task's sandbox
 * (`run`): git reads the working copy without following links out of it, the expression runs
 * in git's matcher under the sandbox's limits (never in the service), and a path glob is a
 * git pathspec, which cannot name anything outside the repository.
 */
export function createGrepTool(run: SandboxRun): ExecutableTool<z.infer<typeof grepInput>> {
  return {
    name: "grep",
    description:
      "Find every line matching a regular expression (extended, as grep -E) in the repository's " +
      "files, optionally only under a path glob. Shows path:line:text, at most " +
      `${GREP_LINES} lines. Use search_code to find code by meaning, grep for exact text.`,
    input: grepInput,
    async execute({ pattern, path: glob, ignore_case: ignoreCase }) {
      const where = glob?.trim().replace(/^\.\//, "") ?? "";
      if (where.startsWith("/") || where.split("/").includes(".."))
        return "Error: the path glob must be relative to the repository root, without '..'.";
      const spec = where ? shellWord(`:(glob)${where}`) : ".";
      const result = await run(
        `git -c core.quotePath=false grep -n -I --untracked --no-color -E ${ignoreCase ? "-i " : ""}-e ${shellWord(pattern)} -- ${spec}`,
      );
      const lines = result.output.split("\n").filter((line) => line !== "");
      if (!result.ok) {
        // git grep exits 1 with no output when nothing matches.
        if (lines.length === 0) return `No lines match /${pattern}/${where ? ` in ${where}` : ""}.`;
        return `Error: ${lines.slice(0, 3).join(" ")}`;
      }
      const shown: string[] = [];
      let hidden = 0;
      for (const line of lines) {
        const file = line.slice(0, line.indexOf(":"));
        // The files read_file refuses are not shown here either.
        if (mayHoldSecrets(file)) {
          hidden++;
          continue;
        }
        if (shown.length < GREP_LINES)
          shown.push(line.length > GREP_LINE_CHARS ? `${line.slice(0, GREP_LINE_CHARS)}…` : line);
      }
      const total = lines.length - hidden;
      if (total === 0) return `No lines match /${pattern}/${where ? ` in ${where}` : ""}.`;
      if (total > shown.length)
        shown.push(
          `… ${total - shown.length} more matching lines (narrow the pattern or the path)`,
        );
      return shown.join("\n");
    },
  };
}
