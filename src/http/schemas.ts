import { z } from "zod";

/** Shared building blocks of the request and response schemas. */
export const timestamp = z.iso.datetime().describe("ISO 8601 UTC timestamp");
export const opaqueId = z
  .string()
  .min(1)
  .max(100)
  .regex(/^[A-Za-z0-9_.:-]+$/, "must be an opaque id without slashes");
export const label = (max: number) => z.string().trim().min(1).max(max);

export const errorBody = z
  .object({
    error: z.object({
      code: z.string().describe("stable snake_case code"),
      message: z.string().describe("human-readable sentence"),
      details: z.unknown().optional(),
    }),
  })
  .meta({ id: "Error" });

export const noContent = z.undefined();

export type JsonValue = string | number | boolean | null | JsonValue[] | { [k: string]: JsonValue };

/**
 * Any JSON value. Named (`JsonValue` in the OpenAPI components): a recursive schema without
 * an id is emitted as `__schema0`, a name that collides between routes and breaks generators.
 */
export const jsonValue: z.ZodType<JsonValue> = z
  .lazy(() =>
    z.union([
      z.string(),
      z.number(),
      z.boolean(),
      z.null(),
      z.array(jsonValue),
      z.record(z.string(), jsonValue),
    ]),
  )
  .meta({ id: "JsonValue", description: "any JSON value" });
