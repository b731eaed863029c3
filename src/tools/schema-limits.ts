import type {
  JsonSchemaValidator,
  jsonSchemaValidator,
} from "@modelcontextprotocol/sdk/validation/types.js";

/*
 * Limits on a JSON Schema from outside (an MCP server's tool input schema: a repository's
 * stdio server or an HTTP one), checked before the service uses it. A schema of a few
 * kilobytes can fan out 2^N through `$ref`; converting it (zod's fromJSONSchema and
 * toJSONSchema, which inline every `$ref`) froze the event loop for seconds (issue #40). So
 * the service converts none: within these limits the tool's own schema is sent to the model
 * as it is (llm/tool-loop.ts, ToolSpec.inputJsonSchema) and its server checks the arguments;
 * past them the tool is refused with a log line.
 *
 * The checks are linear in the schema's size. The expansion is computed by walking the
 * `$ref` graph with memoization and a budget, never by building it: the walk stops as soon
 * as the budget is spent, so a 2^24 fan-out costs as much as a schema at the limit.
 */

/** What one schema may be. */
export interface SchemaLimits {
  /** Its JSON text, in bytes (about: escapes are not counted). */
  maxBytes: number;
  /** Objects and arrays nested in each other. */
  maxDepth: number;
  /** JSON values in it (objects, arrays, strings, numbers, …). */
  maxNodes: number;
  /** `$ref`s in it. */
  maxRefs: number;
  /** Schemas once every `$ref` is inlined (as the model is sent it); a cycle counts once. */
  maxExpandedNodes: number;
  /** Its JSON text once every `$ref` is inlined, in bytes. */
  maxExpandedBytes: number;
  /** Keys of one object (`properties`, `$defs`, …). */
  maxKeys: number;
  /** Values of one `enum`. */
  maxEnumValues: number;
  /** Characters of one string or key (descriptions, patterns, names). */
  maxStringLength: number;
}

/** The limits of one MCP tool's input schema: about 50 times what real servers list. */
export const TOOL_SCHEMA_LIMITS: SchemaLimits = Object.freeze({
  maxBytes: 64 * 1024,
  maxDepth: 32,
  maxNodes: 10_000,
  maxRefs: 500,
  maxExpandedNodes: 10_000,
  maxExpandedBytes: 256 * 1024,
  maxKeys: 500,
  maxEnumValues: 1_000,
  maxStringLength: 8 * 1024,
});

/**
 * All MCP tools of one model loop together, after expansion: every model call carries them
 * and the loop converts them in one go (llm/tool-loop.ts). More would not fit a model's
 * context window anyway (256 KiB of JSON is about 64,000 tokens).
 */
export const TOOLBOX_SCHEMA_LIMITS: Readonly<{
  maxExpandedNodes: number;
  maxExpandedBytes: number;
  /** Tools of one server looked at; the SDK has listed them all by then. */
  maxToolsPerServer: number;
}> = Object.freeze({
  maxExpandedNodes: 20_000,
  maxExpandedBytes: 1024 * 1024,
  maxToolsPerServer: 128,
});

/**
 * What a schema costs: its schemas once inlined, and the larger of its JSON and its inlined
 * JSON in bytes (the model is sent it as it is; a provider may inline it).
 */
export interface SchemaCost {
  nodes: number;
  bytes: number;
}

export type SchemaCheck = { ok: true; cost: SchemaCost } | { ok: false; reason: string };

/** Keywords whose value is a schema or an array of schemas (draft 7 and 2020-12). */
const SCHEMA_KEYWORDS = new Set([
  "items",
  "prefixItems",
  "additionalItems",
  "additionalProperties",
  "contains",
  "propertyNames",
  "not",
  "if",
  "then",
  "else",
  "allOf",
  "anyOf",
  "oneOf",
  "unevaluatedItems",
  "unevaluatedProperties",
  "contentSchema",
]);
/** Keywords whose value maps names to schemas. */
const SCHEMA_MAP_KEYWORDS = new Set([
  "properties",
  "patternProperties",
  "dependentSchemas",
  "dependencies",
]);
/** Definitions: converted only where a `$ref` reaches them. */
const DEFINITION_KEYWORDS = new Set(["$defs", "definitions"]);

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

const isObject = (value: unknown): value is JsonObject =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/**
 * Checks a JSON Schema against the limits: its size, depth, values, `$ref`s, keys per
 * object, enum sizes and string lengths, then the size of its `$ref` expansion. Linear in
 * the schema's size whatever it expands to; the reason is a phrase for a log line ("its
 * input schema …").
 */
export function checkSchema(
  schema: unknown,
  limits: SchemaLimits = TOOL_SCHEMA_LIMITS,
): SchemaCheck {
  const raw = measureRaw(schema, limits);
  if (typeof raw === "string") return { ok: false, reason: raw };
  const cost = expansionCost(schema as Json, raw, limits);
  if (cost.nodes > limits.maxExpandedNodes)
    return {
      ok: false,
      reason: `expands to more than ${limits.maxExpandedNodes} schemas through $ref (limit ${limits.maxExpandedNodes})`,
    };
  if (cost.bytes > limits.maxExpandedBytes)
    return {
      ok: false,
      reason: `expands to more than ${kib(limits.maxExpandedBytes)} through $ref (limit ${kib(limits.maxExpandedBytes)})`,
    };
  // What a model call carries is the schema as it is, definitions nobody points at included.
  const sent = typeof schema === "object" && schema !== null ? (raw.get(schema) ?? 0) : 0;
  return { ok: true, cost: { nodes: cost.nodes, bytes: Math.max(cost.bytes, sent) } };
}

const kib = (bytes: number) => `${Math.round(bytes / 1024)} KiB`;

/** The raw walk's findings: each object's and array's JSON size, for the expansion. */
type RawSizes = Map<object, number>;

/** Walks the JSON once: a limit's phrase past one, else the size of every object. */
function measureRaw(schema: unknown, limits: SchemaLimits): RawSizes | string {
  const sizes: RawSizes = new Map();
  const seen = { nodes: 0, bytes: 0, refs: 0 };
  let problem: string | undefined;
  const fail = (reason: string) => {
    problem ??= reason;
    return 0;
  };
  const text = (value: string) =>
    value.length > limits.maxStringLength
      ? fail(
          `has a string longer than ${limits.maxStringLength} characters (limit ${limits.maxStringLength})`,
        )
      : value.length + 2;

  const walk = (value: unknown, depth: number): number => {
    if (problem) return 0;
    if (++seen.nodes > limits.maxNodes)
      return fail(`has more than ${limits.maxNodes} values (limit ${limits.maxNodes})`);
    if (seen.bytes > limits.maxBytes)
      return fail(`is larger than ${kib(limits.maxBytes)} (limit ${kib(limits.maxBytes)})`);
    if (typeof value !== "object" || value === null) {
      const size = typeof value === "string" ? text(value) : String(value).length;
      seen.bytes += size;
      return size;
    }
    if (depth >= limits.maxDepth)
      return fail(`nests deeper than ${limits.maxDepth} levels (limit ${limits.maxDepth})`);
    let size = 2;
    if (Array.isArray(value)) {
      for (const item of value) size += walk(item, depth + 1) + 1;
    } else {
      const entries = Object.entries(value);
      if (entries.length > limits.maxKeys)
        return fail(`has an object of more than ${limits.maxKeys} keys (limit ${limits.maxKeys})`);
      for (const [key, item] of entries) {
        if (key === "$ref" && typeof item === "string" && ++seen.refs > limits.maxRefs)
          return fail(`has more than ${limits.maxRefs} $refs (limit ${limits.maxRefs})`);
        if (key === "enum" && Array.isArray(item) && item.length > limits.maxEnumValues)
          return fail(
            `has an enum of more than ${limits.maxEnumValues} values (limit ${limits.maxEnumValues})`,
          );
        const keySize = text(key) + 1;
        seen.bytes += keySize;
        size += keySize + walk(item, depth + 1) + 1;
      }
    }
    sizes.set(value, size);
    return size;
  };
  walk(schema, 0);
  if (!problem && seen.bytes > limits.maxBytes)
    fail(`is larger than ${kib(limits.maxBytes)} (limit ${kib(limits.maxBytes)})`);
  return problem ?? sizes;
}

/** The schema a local `$ref` points at (`#`, `#/$defs/x`, any JSON pointer), if any. */
function resolveRef(root: Json, ref: string): Json | undefined {
  if (!ref.startsWith("#")) return undefined;
  let target: Json | undefined = root;
  for (const part of ref.slice(1).split("/").slice(1)) {
    let key: string;
    try {
      key = decodeURIComponent(part).replace(/~1/g, "/").replace(/~0/g, "~");
    } catch {
      return undefined;
    }
    if (Array.isArray(target)) target = target[Number(key)];
    else if (isObject(target) && Object.hasOwn(target, key)) target = target[key];
    else return undefined;
  }
  return target;
}

/** The subschemas a schema object holds in place (not through `$ref`, not its definitions). */
function* subschemas(node: JsonObject): Generator<Json> {
  for (const [key, value] of Object.entries(node)) {
    if (SCHEMA_KEYWORDS.has(key)) {
      if (Array.isArray(value)) yield* value;
      else yield value;
    } else if (SCHEMA_MAP_KEYWORDS.has(key) && isObject(value)) {
      for (const sub of Object.values(value))
        if (typeof sub !== "string" && !Array.isArray(sub)) yield sub;
    }
  }
}

/** The JSON size of a schema object without its subschemas and definitions. */
function ownBytes(node: JsonObject, sizes: RawSizes): number {
  let own = sizes.get(node) ?? 2;
  for (const [key, value] of Object.entries(node)) {
    if (SCHEMA_KEYWORDS.has(key) || SCHEMA_MAP_KEYWORDS.has(key) || DEFINITION_KEYWORDS.has(key))
      own -= typeof value === "object" && value !== null ? (sizes.get(value) ?? 0) : 0;
  }
  return Math.max(2, own);
}

interface Expansion extends SchemaCost {
  /** The shallowest place on the walk's path a `$ref` in this subtree went back to. */
  cutAt: number;
}

/**
 * What the schema costs with every `$ref` inlined (as a converter or a provider would build
 * it): a `$ref` back to a schema being expanded (a cycle) stays a reference. Memoized by
 * schema object wherever the result does not depend on the path that reached it; the walk
 * stops once the budget is spent (the result is then just over it), so it does at most
 * about `maxExpandedNodes` steps.
 */
function expansionCost(root: Json, sizes: RawSizes, limits: SchemaLimits): SchemaCost {
  const memo = new Map<object, SchemaCost>();
  const path = new Map<object, number>();
  const over = (cost: SchemaCost) =>
    cost.nodes > limits.maxExpandedNodes || cost.bytes > limits.maxExpandedBytes;

  const expand = (node: Json): Expansion => {
    if (!isObject(node)) return { nodes: 1, bytes: 5, cutAt: Infinity };
    const known = memo.get(node);
    if (known) return { ...known, cutAt: Infinity };
    const depth = path.size;
    path.set(node, depth);
    const below: Expansion = { nodes: 0, bytes: 0, cutAt: Infinity };
    const add = (part: Expansion) => {
      below.nodes += part.nodes;
      below.bytes += part.bytes;
      below.cutAt = Math.min(below.cutAt, part.cutAt);
    };
    const children = [...subschemas(node)];
    const ref = typeof node.$ref === "string" ? resolveRef(root, node.$ref) : undefined;
    if (ref !== undefined) children.push(ref);
    for (const child of children) {
      if (over(below)) break;
      const back = isObject(child) ? path.get(child) : undefined;
      if (back !== undefined) add({ nodes: 0, bytes: 0, cutAt: back });
      else add(expand(child));
    }
    path.delete(node);
    const cost = { nodes: 1 + below.nodes, bytes: ownBytes(node, sizes) + below.bytes };
    if (below.cutAt >= depth) memo.set(node, cost);
    return { ...cost, cutAt: below.cutAt };
  };
  const { nodes, bytes } = expand(root);
  return { nodes, bytes };
}

/**
 * The room left for the MCP tools of one model loop (TOOLBOX_SCHEMA_LIMITS); one per
 * toolbox, taken in the order the servers are named.
 */
export function createSchemaBudget(limits = TOOLBOX_SCHEMA_LIMITS) {
  const used: SchemaCost = { nodes: 0, bytes: 0 };
  return {
    /** Takes a tool's cost: a phrase for the log when it does not fit, else undefined. */
    take(cost: SchemaCost): string | undefined {
      if (used.nodes + cost.nodes > limits.maxExpandedNodes)
        return `would bring this task's MCP tools past ${limits.maxExpandedNodes} schemas together (limit ${limits.maxExpandedNodes})`;
      if (used.bytes + cost.bytes > limits.maxExpandedBytes)
        return `would bring this task's MCP tools past ${kib(limits.maxExpandedBytes)} together (limit ${kib(limits.maxExpandedBytes)})`;
      used.nodes += cost.nodes;
      used.bytes += cost.bytes;
      return undefined;
    },
  };
}

/**
 * The JSON Schema a checked tool's arguments are described to the model with: the server's
 * own, as other MCP clients send it (an object at the top, `properties` always there).
 */
export function toolInputJsonSchema(schema: unknown): Record<string, unknown> {
  const own = isObject(schema) ? schema : {};
  return { ...own, type: "object", properties: isObject(own.properties) ? own.properties : {} };
}

/**
 * For the MCP SDK's client (`jsonSchemaValidator`): output schemas are not compiled. The
 * default compiles each tool's output schema with ajv while listing tools, on the event loop
 * and before any limit here could refuse it; the service reads a result only as text for the
 * model, so a result's shape is the model's to judge.
 */
export const UNCHECKED_OUTPUT_SCHEMAS: jsonSchemaValidator = Object.freeze({
  getValidator<T>(): JsonSchemaValidator<T> {
    return (input) => ({ valid: true, data: input as T, errorMessage: undefined });
  },
});
