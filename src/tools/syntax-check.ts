import path from "node:path";

/*
 * The fast syntax check after the model writes or edits a file (write_file, edit_file): the
 * language's own parser, so a broken bracket is seen at once rather than rounds later in
 * the checks. JavaScript and Python run in the task's sandbox (`node --check`, Python's
 * `compile`), reading the file on stdin so nothing is written next to it (no __pycache__);
 * TypeScript is parsed with the TypeScript compiler the service ships (parsing only, nothing
 * runs); JSON with JSON.parse. Other languages are not checked.
 */

/** What a syntax check found. */
export interface SyntaxReport {
  /** The parser, as the tool result names it ("node --check", "python3 compile", …). */
  checker: string;
  ok: boolean;
  /** The first lines of the parser's message when not ok. */
  message: string;
  /** The line the parser points at, when it says. */
  line: number | null;
}

/** Runs a command in the working copy's sandbox: its exit, and its output (stdout + stderr). */
export type SandboxRun = (command: string) => Promise<{ ok: boolean; output: string }>;

/** Checks the file `rel` whose new text is `text`; null when its language is not checked. */
export type SyntaxChecker = (rel: string, text: string) => Promise<SyntaxReport | null>;

/** Lines of a parser's message kept in the tool result. */
const MESSAGE_LINES = 6;

/** A path as one shell word, starting ./ so it can never read as an option. */
function shellPath(rel: string): string {
  return `'./${rel.replace(/'/g, `'\\''`)}'`;
}

/** The parser's message without its stack: the lines up to and including the error's. */
function trimMessage(output: string): string {
  const lines = output
    .replace(/\r/g, "")
    .split("\n")
    .filter((l) => !/^\s+at /.test(l) && !/^Node\.js v/.test(l));
  const error = lines.findIndex((l) => /(Syntax|Indentation|Tab)Error\b/.test(l));
  const kept = error >= 0 ? lines.slice(Math.max(0, error - 4), error + 1) : lines;
  return kept
    .filter((l) => l.trim() !== "")
    .slice(-MESSAGE_LINES)
    .join("\n");
}

/** The line a parser's message points at: Node's `[stdin]:N`, else Python's last `line N`. */
function lineOf(output: string): number | null {
  const node = /\[stdin\]:(\d+)/.exec(output);
  if (node) return Number(node[1]);
  const python = [...output.matchAll(/line (\d+)/g)].at(-1);
  return python ? Number(python[1]) : null;
}

/**
 * Syntax errors the TypeScript parser finds (a `.js` file as JSX when `jsx` is set). The
 * compiler is loaded at the first check, not at import: about a second that every process of
 * the service paid at start.
 */
async function typescriptErrors(rel: string, text: string, jsx: boolean): Promise<SyntaxReport> {
  const { default: ts } = await import("typescript");
  const fileName = jsx && !/\.[jt]sx$/.test(rel) ? `${rel}.jsx` : rel;
  const { diagnostics = [] } = ts.transpileModule(text, {
    fileName,
    reportDiagnostics: true,
    compilerOptions: { jsx: ts.JsxEmit.Preserve, noEmit: false },
  });
  const first = diagnostics.find((d) => d.category === ts.DiagnosticCategory.Error && d.file);
  if (!first) return { checker: "typescript parser", ok: true, message: "", line: null };
  const { line } = first.file!.getLineAndCharacterOfPosition(first.start ?? 0);
  return {
    checker: "typescript parser",
    ok: false,
    message: ts.flattenDiagnosticMessageText(first.messageText, "\n"),
    line: line + 1,
  };
}

function jsonErrors(text: string): SyntaxReport {
  try {
    JSON.parse(text);
    return { checker: "JSON.parse", ok: true, message: "", line: null };
  } catch (error) {
    const message = (error as Error).message;
    const at = /position (\d+)/.exec(message);
    const line = at ? text.slice(0, Number(at[1])).split("\n").length : null;
    return { checker: "JSON.parse", ok: false, message, line };
  }
}

/** The syntax checker over a working copy; `run` runs a command in its sandbox. */
export function createSyntaxChecker(run: SandboxRun): SyntaxChecker {
  return async (rel, text) => {
    const ext = path.posix.extname(rel).toLowerCase();
    const file = shellPath(rel);
    if (ext === ".json") return jsonErrors(text);
    if ([".ts", ".tsx", ".mts", ".cts"].includes(ext)) return typescriptErrors(rel, text, false);
    if (ext === ".js" || ext === ".mjs" || ext === ".cjs" || ext === ".jsx") {
      if (ext === ".jsx") return typescriptErrors(rel, text, true);
      // On stdin, as a module and as a script (a .js file may be either): Node parses the
      // file named on its command line by guesses that skip some errors.
      const kinds =
        ext === ".mjs" ? ["module"] : ext === ".cjs" ? ["commonjs"] : ["module", "commonjs"];
      const failures: string[] = [];
      for (const kind of kinds) {
        const result = await run(`node --input-type=${kind} --check < ${file}`);
        if (result.ok) return { checker: "node --check", ok: true, message: "", line: null };
        // Node missing from the sandbox: nothing to say.
        if (/not found|No such file/.test(result.output) && !/Error/.test(result.output))
          return null;
        failures.push(result.output);
      }
      // JSX (or Flow) in a .js file: Node cannot read it, the TypeScript parser can.
      if (/<[A-Za-z>]/.test(text) && (await typescriptErrors(rel, text, true)).ok)
        return { checker: "typescript parser", ok: true, message: "", line: null };
      const moduleSyntax = /^\s*(import|export)\b/m.test(text);
      const output = (moduleSyntax || failures.length === 1 ? failures[0] : failures[1])!;
      return {
        checker: "node --check",
        ok: false,
        message: trimMessage(output),
        line: lineOf(output),
      };
    }
    if (ext === ".py") {
      const result = await run(
        `python3 -c 'import sys; compile(sys.stdin.buffer.read(), sys.argv[1], "exec")' ${file} < ${file}`,
      );
      if (result.ok) return { checker: "python3 compile", ok: true, message: "", line: null };
      if (!/Error/.test(result.output)) return null;
      return {
        checker: "python3 compile",
        ok: false,
        message: trimMessage(result.output),
        line: lineOf(result.output),
      };
    }
    return null;
  };
}

/** Lines `from`..`to` of `text` (1-based, clamped), each with its number, for a tool result. */
export function numberedLines(text: string, from: number, to: number, max = 40): string {
  const lines = text.replace(/\r\n/g, "\n").split("\n");
  if (lines.at(-1) === "") lines.pop();
  const first = Math.max(1, from);
  const last = Math.min(lines.length, to, first + max - 1);
  const shown: string[] = [];
  for (let n = first; n <= last; n++) {
    const line = lines[n - 1]!;
    shown.push(`${n}: ${line.length > 300 ? `${line.slice(0, 300)}…` : line}`);
  }
  return shown.join("\n");
}
