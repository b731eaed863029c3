import { createHmac, timingSafeEqual } from "node:crypto";
import { isDeepStrictEqual } from "node:util";
import picomatch from "picomatch";

/*
 * The pure rules of automations (docs/api.md, "Automations"): dot-paths into trigger data,
 * `match` of webhook payloads, `{{dot.path}}` templates, webhook signatures and CI-failure
 * globs. No I/O here, so each rule is tested on its own
 * (test/unit/automation-templates.test.ts).
 */

/** A dot-path: non-empty segments without whitespace, braces or dots, joined by dots. */
export const DOT_PATH = /^[^.\s{}]+(\.[^.\s{}]+)*$/;

/** What a dot-path reaches: `found` false when a segment is missing. */
export type PathValue = { found: true; value: unknown } | { found: false };

/**
 * Follows `path` through objects (own keys only, so `__proto__` and `constructor` are just
 * missing) and arrays (a segment of digits is an index).
 */
export function readPath(root: unknown, path: string): PathValue {
  let current: unknown = root;
  for (const segment of path.split(".")) {
    if (Array.isArray(current)) {
      if (!/^(0|[1-9][0-9]*)$/.test(segment)) return { found: false };
      const index = Number(segment);
      if (index >= current.length) return { found: false };
      current = current[index];
    } else if (current !== null && typeof current === "object") {
      if (!Object.hasOwn(current, segment)) return { found: false };
      current = (current as Record<string, unknown>)[segment];
    } else {
      return { found: false };
    }
  }
  return { found: true, value: current };
}

/**
 * True when every entry of `match` holds for the payload: the value at the dot-path equals
 * the expected value, or one of them when the expected value is an array. A missing path
 * never matches. An empty `match` matches every payload.
 */
export function matchesPayload(
  match: ReadonlyArray<{ path: string; expected: unknown }>,
  payload: unknown,
): boolean {
  return match.every(({ path, expected }) => {
    const at = readPath(payload, path);
    if (!at.found) return false;
    const candidates = Array.isArray(expected) ? expected : [expected];
    // Both sides are JSON.parse results (the stored match and the posted body): Node's
    // strict deep equality is JSON equality for them, key order ignored, types strict.
    return candidates.some((candidate) => isDeepStrictEqual(at.value, candidate));
  });
}

/** A value as template text: strings as they are, objects and arrays as JSON, null as "". */
export function toText(value: unknown): string {
  if (value === undefined || value === null) return "";
  if (typeof value === "string") return value;
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  try {
    return JSON.stringify(value) ?? "";
  } catch {
    return "";
  }
}

const PLACEHOLDER = /\{\{\s*([^{}\s]+)\s*\}\}/g;

/**
 * Replaces each `{{dot.path}}` (spaces inside the braces allowed) with the text of that path
 * in `vars`; a missing path gives "". One pass: inserted text is never read as a template.
 */
export function renderTemplate(template: string, vars: Record<string, unknown>): string {
  return template.replace(PLACEHOLDER, (_whole, path: string) => {
    if (!DOT_PATH.test(path)) return "";
    const at = readPath(vars, path);
    return at.found ? toText(at.value) : "";
  });
}

/** `sha256=<hex>` of the HMAC-SHA256 of `rawBody` with `secret`, as GitHub signs deliveries. */
export function signBody(secret: string, rawBody: string): string {
  return `sha256=${createHmac("sha256", secret).update(rawBody, "utf8").digest("hex")}`;
}

/** Checks an `X-Hub-Signature-256` header against the raw body, in constant time. */
export function verifySignature(
  secret: string,
  rawBody: string,
  header: string | undefined,
): boolean {
  if (!header) return false;
  const expected = Buffer.from(signBody(secret, rawBody), "utf8");
  const given = Buffer.from(header.trim(), "utf8");
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/**
 * True when `value` matches the glob (picomatch, `{a,b}` and `[abc]` as usual). For branch
 * names `*` stays within a `/`-separated segment and `**` crosses them, as in GitHub's branch
 * filters; with `anyChars` (workflow names, which are free text) `*` matches any characters.
 * No pattern matches everything.
 */
export function globMatches(
  pattern: string | null | undefined,
  value: string,
  options: { anyChars?: boolean } = {},
): boolean {
  if (pattern === undefined || pattern === null || pattern === "") return true;
  return picomatch(pattern, { dot: true, bash: options.anyChars ?? false })(value);
}

/** Whether picomatch can compile the pattern (a glob that throws is a validation error). */
export function isValidGlob(pattern: string): boolean {
  try {
    picomatch.makeRe(pattern, { dot: true });
    return true;
  } catch {
    return false;
  }
}
