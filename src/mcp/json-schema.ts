import { z, type ZodType } from "zod";

type JsonObject = Record<string, unknown> & { type: "object" };

/**
 * The JSON Schema of a zod object schema, as MCP wants a tool's `inputSchema` and
 * `outputSchema`: an object at the top. A schema named with `.meta({id})` (the REST door's
 * `Task`) comes out as a `$ref` into `$defs`; its definition is lifted to the top and kept in
 * `$defs` too, for any reference to it inside.
 */
export function objectJsonSchema(schema: ZodType, io: "input" | "output"): JsonObject {
  const json = z.toJSONSchema(schema, { io, unrepresentable: "any" }) as Record<string, unknown>;
  delete json.$schema;
  const ref = typeof json.$ref === "string" ? /^#\/\$defs\/(.+)$/.exec(json.$ref)?.[1] : undefined;
  const defs = (json.$defs ?? {}) as Record<string, Record<string, unknown>>;
  const root = ref ? { ...defs[ref], $defs: defs } : json;
  if (root.type !== "object") throw new Error("An MCP tool schema must be a JSON object schema.");
  return root as JsonObject;
}
