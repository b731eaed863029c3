import type { ZodError, ZodType } from "zod";
import { errors, type FieldProblem } from "../../errors.js";

export function zodProblems(error: ZodError, where: string): FieldProblem[] {
  return error.issues.map((issue) => ({
    path: [where, ...issue.path.map(String)].join("."),
    message: issue.message,
  }));
}

/** Validates one part of a request with its zod schema; failures become 400 `validation_failed`. */
export function parseInput<T>(
  schema: ZodType<T>,
  value: unknown,
  where: "body" | "query" | "path",
): T {
  // An optional body (e.g. reject's `{reason}`) may be left out altogether.
  if (where === "body" && value === undefined && !schema.safeParse(undefined).success) {
    throw errors.validation([{ path: "body", message: "A JSON request body is required." }]);
  }
  const result = schema.safeParse(value);
  if (!result.success) throw errors.validation(zodProblems(result.error, where));
  return result.data;
}

/**
 * Paths of keys for which `isBad` holds, anywhere in a parsed JSON value (at most 20).
 * Iterative, without a depth limit: a key nested deeper than any fixed limit must not pass
 * unseen (the 1 MiB body limit bounds the work).
 */
function keysWhere(value: unknown, prefix: string, isBad: (key: string) => boolean): string[] {
  const found: string[] = [];
  const stack: Array<[unknown, string]> = [[value, prefix]];
  while (stack.length > 0 && found.length < 20) {
    const [current, at] = stack.pop()!;
    if (Array.isArray(current)) {
      current.forEach((v, i) => stack.push([v, `${at}.${i}`]));
    } else if (current && typeof current === "object") {
      // JSON.parse makes "__proto__" an own key; Object.keys lists it.
      for (const key of Object.keys(current)) {
        if (isBad(key)) found.push(`${at}.${key}`);
        stack.push([(current as Record<string, unknown>)[key], `${at}.${key}`]);
      }
    }
  }
  return found;
}

/** Paths of keys that start with `$` (operator injection) anywhere in a parsed body. */
export function dollarKeys(value: unknown, prefix = "body"): string[] {
  return keysWhere(value, prefix, (key) => key.startsWith("$"));
}

const PROTOTYPE_KEYS = new Set(["__proto__", "constructor", "prototype"]);

/**
 * Paths of `$`-keys and of `__proto__`/`constructor`/`prototype` keys anywhere in a parsed
 * body part. Object schemas silently drop a `__proto__` key (assigning it sets the
 * prototype), so a rule keyed by it would vanish instead of being refused.
 */
export function reservedKeys(value: unknown, prefix: string): string[] {
  return keysWhere(value, prefix, (key) => key.startsWith("$") || PROTOTYPE_KEYS.has(key));
}
