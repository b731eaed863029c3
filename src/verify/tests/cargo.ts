/*
 * cargo test: stable Rust has no machine-readable test report, so libtest's text is read:
 * `test path::name ... ok|FAILED|ignored` per test, the `---- path::name stdout ----`
 * sections for what a failed test printed (its panic message).
 */
import { mergeById, result } from "./text.js";
import type { TestResult, TestStatus } from "./types.js";

const LINE = /^test (\S+(?: - \S+)*?) \.\.\. (ok|FAILED|ignored(?:, .*)?|bench:.*)$/;
const SECTION = /^---- (\S+) stdout ----$/;
const CRATE = /^\s*Running (?:unittests )?(\S+)/;

/** libtest results, ids `module::name` (doc tests: `src/lib.rs - f (line 3)`). */
export function readCargoOutput(output: string): TestResult[] {
  const lines = output.split("\n");
  const statuses: Array<[string, TestStatus]> = [];
  const sections = new Map<string, string[]>();
  let section: string[] | undefined;
  for (const raw of lines) {
    const line = raw.trimEnd();
    const test = LINE.exec(line);
    if (test && !line.startsWith("test result:")) {
      const word = test[2]!;
      statuses.push([
        test[1]!,
        word === "FAILED" ? "failed" : word.startsWith("ignored") ? "skipped" : "passed",
      ]);
      section = undefined;
      continue;
    }
    const head = SECTION.exec(line);
    if (head) {
      section = [];
      sections.set(head[1]!, section);
      continue;
    }
    if (/^(failures:|test result:|\s*Running |\s*Doc-tests )/.test(line) || CRATE.test(line)) {
      section = undefined;
      continue;
    }
    section?.push(raw);
  }
  return mergeById(
    statuses.map(([id, status]) => {
      const body = sections.get(id)?.join("\n");
      return result(id, status, { message: panicMessage(body), output: body });
    }),
  );
}

/** The panic's message of a failed test's section (`thread '…' panicked at …:\nmessage`). */
function panicMessage(body: string | undefined): string | undefined {
  if (!body) return undefined;
  const m = /panicked at [^\n]*:\n([\s\S]*?)(?:\nnote: |$)/.exec(body);
  return (m?.[1] ?? body).trim();
}
