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
  if (where === "body" && value === undefined) {
    throw errors.validation([{ path: "body", message: "A JSON request body is required." }]);
  }
  const result = schema.safeParse(value);
  if (!result.success) throw errors.validation(zodProblems(result.error, where));
  return result.data;
}

/** Paths of keys that start with `$` (operator injection) anywhere in a parsed body. */
export function dollarKeys(
  value: unknown,
  prefix = "body",
  found: string[] = [],
  depth = 0,
): string[] {
  if (depth > 64 || found.length >= 20) return found;
  if (Array.isArray(value)) {
    value.forEach((v, i) => dollarKeys(v, `${prefix}.${i}`, found, depth + 1));
  } else if (value && typeof value === "object") {
    for (const [k, v] of Object.entries(value)) {
      if (k.startsWith("$")) found.push(`${prefix}.${k}`);
      dollarKeys(v, `${prefix}.${k}`, found, depth + 1);
    }
  }
  return found;
}
