/*
 * How a check's command gets its runner's report without changing what it runs:
 * - pytest: PYTEST_ADDOPTS=--junitxml=<exchange>/pytest.xml (the command untouched);
 * - node:test: NODE_OPTIONS adds our reporter beside the usual one on stdout, only where
 *   the command (or the npm script it names) visibly runs `node --test` without choosing
 *   reporters itself (node refuses reporters without as many destinations);
 * - vitest, jest, mocha: reporter flags appended, only to a plain invocation of the runner
 *   or to `npm test`/`npm run X` whose script is one;
 * - go: `-json` after `go test` of a plain `go test` command (GOFLAGS=-json would also turn
 *   `go vet`'s findings into JSON with exit status 0, changing the verdict);
 * - cargo and unittest: nothing to add (their text is read).
 */
import { readText } from "../../workcopy/fs.js";

/** The variable naming the exchange folder to the command (sandbox/run.ts `exchange`). */
export const EXCHANGE_VAR = "FOREMAN_TEST_REPORT_DIR";
export const PYTEST_REPORT = "pytest.xml";

export type FlagRunner = "vitest" | "jest" | "mocha" | "go";

export interface Instrumentation {
  /** The command to run: the check's, or with a runner's report flags appended. */
  command: string;
  /** The runner whose flags were added, if any. */
  flags?: FlagRunner;
  /** True when node:test's reporter goes in NODE_OPTIONS. */
  nodeTest: boolean;
  /** True when go test's output is JSON (added by us: rendered back to text; or the check's). */
  goJson: boolean;
  /** True when the check's own go test is verbose (-v): every test's output is rendered. */
  goVerbose: boolean;
}

/** Characters that make a command more than one simple command (outside quotes). */
const COMPOUND = /[;&|<>`\n#]|\$\(/;

/** True when `command` is one simple command (no lists, pipes, redirections, substitutions). */
export function isSimpleCommand(command: string): boolean {
  const unquoted = command.replace(/'[^']*'|"(?:[^"\\$`]|\\.)*"/g, "Q");
  if (/['"\\]/.test(unquoted)) return false; // an unbalanced quote or an escape: unsure
  return !COMPOUND.test(unquoted);
}

const ENV_PREFIX = String.raw`(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*`;
const RUNNER_AT_START = new RegExp(
  String.raw`^\s*${ENV_PREFIX}(?:npx\s+(?:--no-install\s+|--yes\s+|-y\s+)?|(?:\./)?node_modules/\.bin/)?(vitest|jest|mocha)(?:\s|$)`,
);

/** The JavaScript runner a simple command invokes directly, if any. */
export function directRunner(command: string): "vitest" | "jest" | "mocha" | undefined {
  if (!isSimpleCommand(command)) return undefined;
  return RUNNER_AT_START.exec(command)?.[1] as "vitest" | "jest" | "mocha" | undefined;
}

const NPM_SCRIPT =
  /^\s*npm\s+(?:(?:-s|--silent)\s+)?(test|t|tst|run(?:-script)?\s+([\w:.-]+))(?:\s+(?:-s|--silent))?(\s+--(?:\s.*)?)?\s*$/;

const MAX_MANIFEST_BYTES = 1024 * 1024;

/** The script `npm test` / `npm run X` runs, from package.json in `cwd`; undefined when none. */
export async function npmScript(
  command: string,
  cwd: string,
): Promise<{ script: string; hasArgs: boolean } | undefined> {
  if (!isSimpleCommand(command)) return undefined;
  const m = NPM_SCRIPT.exec(command);
  if (!m) return undefined;
  const name = m[2] ?? "test";
  try {
    const text = await readText(cwd, "package.json", { maxBytes: MAX_MANIFEST_BYTES });
    const pkg = JSON.parse(text ?? "{}") as {
      scripts?: Record<string, unknown>;
    };
    const script = pkg.scripts?.[name];
    return typeof script === "string" ? { script, hasArgs: m[3] !== undefined } : undefined;
  } catch {
    return undefined;
  }
}

/** The flags that make a runner write its report into the exchange folder. */
function reportFlags(
  runner: "vitest" | "jest" | "mocha",
  mochaReporter: string,
  reports: Record<string, string>,
): string {
  const dir = `"$${EXCHANGE_VAR}"`;
  if (runner === "vitest")
    return `--reporter=default --reporter=json --outputFile.json=${dir}/${reports.vitest}`;
  if (runner === "jest") return `--json --outputFile=${dir}/${reports.jest}`;
  return `--reporter=${dir}/${mochaReporter}`;
}

/** True when a JavaScript runner's invocation already chooses its report (left alone). */
function choosesReporter(text: string): boolean {
  return /(^|\s)(--reporters?\b|--json\b|--outputFile\b|-R\s|--reporter-options?\b)/.test(text);
}

const NODE_TEST = /(^|[\s;&|(])node\s(?:[^;&|]*\s)?--test(?:\s|=|$)/;
const GO_TEST = /^(\s*go\s+test)(\s|$)/;

/**
 * How to run `command` in `cwd` (the working copy on the host) so its runner writes a
 * report: see the top of this file.
 */
export async function instrument(
  command: string,
  cwd: string,
  files: { mochaReporter: string; vitest: string; jest: string },
): Promise<Instrumentation> {
  const plain: Instrumentation = { command, nodeTest: false, goJson: false, goVerbose: false };
  const npm = await npmScript(command, cwd);
  const visible = npm ? `${command}\n${npm.script}` : command;
  plain.nodeTest = NODE_TEST.test(visible) && !/--test-reporter/.test(visible);

  const go = isSimpleCommand(command) ? GO_TEST.exec(command) : null;
  if (go) {
    const verbose = /(^|\s)-(test\.)?v(=true)?(\s|$)/.test(command);
    if (/(^|\s)-json(\s|$)/.test(command)) return { ...plain, goJson: true, goVerbose: true };
    // A test binary built (-c, -o) or a list of names (-list) is no test run to read.
    if (/(^|\s)-(c|o|list)(\s|=|$)/.test(command)) return plain;
    return {
      ...plain,
      command: command.replace(GO_TEST, "$1 -json$2"),
      flags: "go",
      goJson: true,
      goVerbose: verbose,
    };
  }
  const direct = directRunner(command);
  if (direct && !choosesReporter(command))
    return {
      ...plain,
      command: `${command} ${reportFlags(direct, files.mochaReporter, files)}`,
      flags: direct,
    };
  if (npm) {
    const runner = directRunner(npm.script);
    if (runner && !choosesReporter(npm.script) && !choosesReporter(command)) {
      const flags = reportFlags(runner, files.mochaReporter, files);
      return {
        ...plain,
        command: `${command.trimEnd()}${npm.hasArgs ? "" : " --"} ${flags}`,
        flags: runner,
      };
    }
  }
  return plain;
}

/** The first major version of Node whose test runner prints spec (not TAP) to a non-terminal. */
const SPEC_BY_DEFAULT = 23;

/** NODE_OPTIONS adding our reporter beside the one node:test would have used anyway. */
export function nodeOptions(reporter: string, nodeMajor: number): string {
  const usual = nodeMajor >= SPEC_BY_DEFAULT ? "spec" : "tap";
  return [
    `--test-reporter=${usual}`,
    "--test-reporter-destination=stdout",
    `--test-reporter=${reporter}`,
    // stderr, not /dev/null: from Node 22 a file destination is fsync-ed at the end, which
    // /dev/null refuses (EINVAL, an unhandled error that failed the run); ours writes nothing.
    "--test-reporter-destination=stderr",
  ].join(" ");
}
