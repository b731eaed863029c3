import { git } from "./git.js";
import { isSourceFile, isTestFile } from "./ecosystems.js";
import type { MinedCase } from "./types.js";

export interface MineOptions {
  /** Most cases returned (newest first). */
  max?: number;
  since?: string;
  until?: string;
  /** The revision to walk back from (default HEAD). */
  rev?: string;
  /** The text of the issue a message closes, when one can be read (backtest/issues.ts). */
  issueText?: (message: string) => Promise<{ issue: number; text: string } | null>;
}

/**
 * Commits of `repo` (a local clone) that change at least one test file and one non-test
 * source file, newest first, merges left out (docs/operations.md, "Backtest").
 */
export async function mineCases(
  repo: string,
  name: string,
  options: MineOptions = {},
): Promise<MinedCase[]> {
  const args = [
    "log",
    "--no-merges",
    "--format=%x1e%H%x00%P%x00%aI%x00%B",
    "--name-status",
    "--no-renames",
  ];
  if (options.since) args.push(`--since=${options.since}`);
  if (options.until) args.push(`--until=${options.until}`);
  args.push(options.rev ?? "HEAD", "--");
  const out = await git(repo, args, 512 * 1024 * 1024);
  const cases: MinedCase[] = [];
  for (const record of out.split("\x1e")) {
    if (!record.trim()) continue;
    const [commit, parents, date, rest] = record.split("\x00") as [string, string, string, string];
    const parent = parents.split(" ")[0];
    if (!parent) continue; // the root commit has nothing to start from
    // The body, then a blank line, then one "M\tpath" line per file.
    const lines = rest.split("\n");
    const files: string[] = [];
    const body: string[] = [];
    for (const line of lines) {
      const m = /^[AMDT]\t(.+)$/.exec(line);
      if (m) files.push(m[1]!);
      else if (files.length === 0) body.push(line);
    }
    const tests = files.filter(isTestFile);
    const sources = files.filter((f) => !isTestFile(f) && isSourceFile(f));
    if (tests.length === 0 || sources.length === 0) continue;
    const message = body.join("\n").trim();
    cases.push({
      id: commit.slice(0, 12),
      repo: name,
      commit,
      parent,
      date,
      message,
      leaky_message: false,
      test_files: tests,
      source_files: sources,
    });
    if (options.max !== undefined && cases.length >= options.max) break;
  }
  for (const c of cases) {
    const linked = options.issueText ? await options.issueText(c.message) : null;
    if (linked) {
      c.commit_message = c.message;
      c.message = linked.text;
      c.issue = linked.issue;
    }
    c.leaky_message = await leaks(repo, c);
  }
  return cases;
}

/**
 * A message gives the fix away when it quotes a changed line of the source (a line of the
 * diff of at least 12 characters, whitespace aside) or carries a diff of its own.
 */
async function leaks(repo: string, c: MinedCase): Promise<boolean> {
  if (/^(diff --git|@@ |\+\+\+ )/m.test(c.message)) return true;
  const diff = await git(repo, [
    "diff",
    "--no-color",
    "-U0",
    c.parent,
    c.commit,
    "--",
    ...c.source_files,
  ]);
  const message = c.message.replace(/\s+/g, " ");
  for (const line of diff.split("\n")) {
    if (!/^[+-][^+-]/.test(line)) continue;
    const code = line.slice(1).replace(/\s+/g, " ").trim();
    if (code.length >= 12 && message.includes(code)) return true;
  }
  return false;
}
