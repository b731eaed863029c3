/*
 * JUnit XML (pytest's --junitxml, and any runner writing the same): <testcase> elements with
 * <failure>, <error> or <skipped> inside, read with a tokenizer for this one vocabulary
 * (no XML library is installed; a report is the runner's own, never the repository's file).
 */
import { firstLines, result } from "./text.js";
import type { TestResult, TestStatus } from "./types.js";

const ENTITIES: Record<string, string> = { lt: "<", gt: ">", amp: "&", quot: '"', apos: "'" };

/** Text with XML's entities and character references decoded. */
export function decodeXml(text: string): string {
  return text.replace(/&(#x[0-9a-f]+|#\d+|lt|gt|amp|quot|apos);/gi, (whole, name: string) => {
    if (name[0] === "#") {
      const code =
        name[1] === "x" || name[1] === "X"
          ? Number.parseInt(name.slice(2), 16)
          : Number.parseInt(name.slice(1), 10);
      return Number.isFinite(code) && code <= 0x10ffff ? String.fromCodePoint(code) : whole;
    }
    return ENTITIES[name.toLowerCase()] ?? whole;
  });
}

/** The attributes of a start tag's inside (`name="x" file='y'`). */
function attributes(inside: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const m of inside.matchAll(/([\w:.-]+)\s*=\s*("([^"]*)"|'([^']*)')/g))
    out[m[1]!] = decodeXml(m[3] ?? m[4] ?? "");
  return out;
}

/** One <testcase> as read. */
export interface JunitCase {
  name: string;
  classname: string;
  file?: string;
  status: TestStatus;
  message?: string;
  /** The failure's body (a traceback), then the case's captured output. */
  output: string;
}

interface OpenCase extends JunitCase {
  /** Inside <failure>/<error>/<skipped>/<system-out>/<system-err>: where text goes. */
  text: string | null;
}

const TAG =
  /<!\[CDATA\[([\s\S]*?)\]\]>|<!--[\s\S]*?-->|<\?[\s\S]*?\?>|<(\/?)([\w:.-]+)([^>]*?)(\/?)>/g;

function open(c: OpenCase, name: string, attrs: Record<string, string>): void {
  if (name === "failure" || name === "error") {
    c.status = "failed";
    c.message ??= attrs.message ?? attrs.type;
    c.text = "";
  } else if (name === "skipped") {
    if (c.status !== "failed") c.status = "skipped";
    c.message ??= attrs.message;
    c.text = "";
  } else if (name === "system-out" || name === "system-err") c.text = "";
}

/** The test cases of a JUnit XML report, in document order. */
export function parseJunitCases(xml: string): JunitCase[] {
  const cases: JunitCase[] = [];
  let current: OpenCase | null = null;
  let last = 0;
  for (const m of xml.matchAll(TAG)) {
    const before = xml.slice(last, m.index);
    last = m.index + m[0].length;
    if (current?.text !== null && current?.text !== undefined) {
      current.text += decodeXml(before) + (m[1] ?? "");
    }
    if (m[1] !== undefined || !m[3]) continue;
    const [closing, name, inside, selfClosing] = [m[2] === "/", m[3], m[4] ?? "", m[5] === "/"];
    if (name === "testcase" && !closing) {
      const attrs = attributes(inside);
      current = {
        name: attrs.name ?? "",
        classname: attrs.classname ?? "",
        ...(attrs.file ? { file: attrs.file } : {}),
        status: "passed",
        output: "",
        text: null,
      };
      if (selfClosing) {
        cases.push(finish(current));
        current = null;
      }
    } else if (name === "testcase" && closing && current) {
      cases.push(finish(current));
      current = null;
    } else if (current && !closing) {
      open(current, name, attributes(inside));
      if (selfClosing) current.text = null;
    } else if (current && closing && current.text !== null) {
      if (current.text.trim() !== "") current.output += `${current.text.trim()}\n`;
      current.text = null;
    }
  }
  return cases;
}

function finish(c: OpenCase): JunitCase {
  const { text: _text, ...rest } = c;
  if (rest.status === "failed" && !rest.message) rest.message = firstLines(rest.output);
  return rest;
}

/** JunitCases as results, their ids made by `id`. */
export function junitResults(cases: JunitCase[], id: (c: JunitCase) => string): TestResult[] {
  return cases.map((c) =>
    result(id(c), c.status, { message: c.message, output: c.output, file: c.file }),
  );
}
