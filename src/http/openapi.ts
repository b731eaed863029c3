import { z, type ZodType } from "zod";
import { isIdempotent, type AnyRoute } from "./route.js";
import { errorBody } from "./schemas.js";
import type { VendorEndpoint } from "../domain/integrations/endpoint.js";

type JsonSchema = Record<string, unknown>;

const ERROR_TEXT: Record<number, string> = {
  400: "Malformed body, query or path values (`invalid_json`, `validation_failed`)",
  401: "Missing, unknown or revoked API key (`unauthorized`)",
  403: "Valid key, action not allowed (`forbidden`)",
  404: "Unknown id, or one that belongs to another account (`not_found`)",
  409: "Conflicting state (`invalid_state`, `conflict`; also a request with the same Idempotency-Key still running)",
  413: "Body over 1 MiB (`payload_too_large`)",
  415: "Body is not JSON, or is compressed or in a charset other than UTF-8 (`unsupported_media_type`)",
  422: "The Idempotency-Key was used before with another request (`idempotency_key_reused`)",
  429: "Quota used up or rate exceeded (`monthly_limit_reached`, `rate_limited`)",
  405: "Method not allowed on this path (`method_not_allowed`)",
  410: "Existed, but is no longer kept (`gone`)",
  502: "A model provider or GitHub failed (`upstream_unavailable`)",
  503: "Not ready: the database does not answer (`not_ready`), or the GitHub App or the model a call needs is not configured (`upstream_unavailable`, the message names the variables to set), or the server's disk is nearly full and no task or scan is started (`insufficient_storage`, with Retry-After), or the database is away or too busy for a moment (`upstream_unavailable`, with Retry-After)",
};

function toSchema(
  schema: ZodType,
  io: "input" | "output",
  components: Record<string, JsonSchema>,
): JsonSchema {
  const json = z.toJSONSchema(schema, {
    target: "draft-2020-12",
    io,
    unrepresentable: "any",
    reused: "inline",
  }) as JsonSchema;
  const defs = (json.$defs ?? {}) as Record<string, JsonSchema>;
  delete json.$schema;
  delete json.$defs;
  // zod names a recursive schema without an id `__schemaN`, per call: two routes would
  // overwrite each other's. Every reused schema needs `.meta({ id })`.
  const unnamed = Object.keys(defs).filter((name) => name.startsWith("__schema"));
  if (unnamed.length > 0)
    throw new Error(`Unnamed recursive schema (${unnamed.join(", ")}): give it .meta({ id }).`);
  // A schema read as a request can differ from the same schema written as a response
  // (defaults make fields optional): that variant is named `<id>Input`.
  const names = new Map<string, string>();
  for (const [name, def] of Object.entries(defs)) {
    const known = components[name];
    const same = !known || JSON.stringify(known) === JSON.stringify(rewriteRefs(def, names));
    names.set(name, same || io === "output" ? name : `${name}Input`);
  }
  for (const [name, def] of Object.entries(defs)) {
    const target = names.get(name)!;
    const component = rewriteRefs(def, names) as JsonSchema;
    const known = components[target];
    if (known && JSON.stringify(known) !== JSON.stringify(component))
      throw new Error(`Two different schemas are named ${target}.`);
    components[target] = component;
  }
  return rewriteRefs(json, names) as JsonSchema;
}

function rewriteRefs(value: unknown, names: Map<string, string>): unknown {
  if (Array.isArray(value)) return value.map((v) => rewriteRefs(v, names));
  if (value && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      if (k === "$ref" && typeof v === "string" && v.startsWith("#/$defs/")) {
        const name = v.slice("#/$defs/".length);
        out[k] = `#/components/schemas/${names.get(name) ?? name}`;
      } else out[k] = rewriteRefs(v, names);
    }
    return out;
  }
  return value;
}

const PAGE_HEADERS = {
  Link: {
    description:
      'The next page, `<path?…&cursor=…>; rel="next"` (RFC 8288); absent on the last page.',
    schema: { type: "string" },
  },
  "X-Next-Cursor": {
    description: "The `cursor` of the next page; absent on the last page.",
    schema: { type: "string" },
  },
};

const RATE_LIMIT_HEADERS = {
  "RateLimit-Policy": {
    description: 'The limit, e.g. `"signup";q=10;w=3600` (draft-ietf-httpapi-ratelimit-headers).',
    schema: { type: "string" },
  },
  RateLimit: {
    description: 'What is left of it, e.g. `"signup";r=3;t=42` (remaining, seconds to reset).',
    schema: { type: "string" },
  },
};

const IDEMPOTENCY_KEY = {
  name: "Idempotency-Key",
  in: "header",
  required: false,
  description:
    "1–255 printable ASCII characters. A repeat with the same key and the same request within 24 h answers the first answer again (header `Idempotent-Replayed: true`) without doing it twice; with another request, 422.",
  schema: { type: "string", minLength: 1, maxLength: 255 },
};

function parametersOf(
  schema: ZodType | undefined,
  location: "query" | "path",
  components: Record<string, JsonSchema>,
) {
  if (!schema) return [];
  const json = toSchema(schema, "input", components);
  const props = (json.properties ?? {}) as Record<string, JsonSchema>;
  const required = new Set((json.required as string[] | undefined) ?? []);
  return Object.entries(props).map(([name, s]) => ({
    name,
    in: location,
    required: location === "path" || required.has(name),
    schema: s,
    ...(typeof s.description === "string" ? { description: s.description } : {}),
  }));
}

const VENDOR_ERRORS: Record<number, string> = {
  400: "The signed body is not what this endpoint reads (`invalid_json`, `validation_failed`; details list each field)",
  401: "Missing or invalid signature, a signed time outside the vendor's replay window, or an unknown integration (`unauthorized`)",
  404: "No such endpoint (`not_found`)",
  413: "Body over 1 MiB (`payload_too_large`)",
};

/**
 * A vendor's signed endpoint (integrations/plugin.ts): no API key, the raw body as the
 * vendor sends it, its signature and delivery headers, 200 or an error body.
 */
function vendorOperation(v: VendorEndpoint, errorRef: JsonSchema): Record<string, unknown> {
  const responses: Record<string, unknown> = {
    "200": { description: v.ok, content: { "application/json": { schema: {} } } },
  };
  for (const [status, text] of Object.entries(VENDOR_ERRORS))
    responses[status] = {
      description: text,
      content: { "application/json": { schema: errorRef } },
    };
  return {
    operationId: v.operationId,
    summary: v.summary,
    description: v.description,
    tags: ["integrations"],
    parameters: [
      ...Object.entries(v.params).map(([name, p]) => ({
        name,
        in: "path",
        required: true,
        description: p.description,
        schema: p.values ? { type: "string", enum: [...p.values] } : { type: "string" },
      })),
      ...Object.entries(v.headers).map(([name, { description, required }]) => ({
        name,
        in: "header",
        required,
        description,
        schema: { type: "string" },
      })),
    ],
    requestBody: {
      required: true,
      description:
        "The vendor's signed body, read raw: the signature is checked over its exact bytes before anything in it is read.",
      content: Object.fromEntries(
        v.contentTypes.map((type) => [type, { schema: ref("VendorSignedBody") }]),
      ),
    },
    responses,
    security: [],
  };
}

const pascal = (text: string) =>
  text
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean)
    .map((w) => w[0]!.toUpperCase() + w.slice(1))
    .join("");

function ref(name: string): JsonSchema {
  return { $ref: `#/components/schemas/${name}` };
}

/**
 * A request component's property defaults, moved into its description ("Default: `true`."):
 * generators read `default` on a named schema as "always present" (openapi-typescript makes
 * such a property required outside inline request bodies), so a body that leaves it out,
 * as the API allows, would not compile.
 */
function defaultsToText(schema: JsonSchema): JsonSchema {
  const props = schema.properties as Record<string, JsonSchema> | undefined;
  if (!props) return schema;
  const out: Record<string, JsonSchema> = {};
  for (const [name, prop] of Object.entries(props)) {
    if (!("default" in prop)) {
      out[name] = prop;
      continue;
    }
    const { default: value, ...rest } = prop;
    const text = `Default: \`${JSON.stringify(value)}\`.`;
    out[name] = {
      ...rest,
      description: typeof rest.description === "string" ? `${rest.description}. ${text}` : text,
    };
  }
  return { ...schema, properties: out };
}

function register(components: Record<string, JsonSchema>, name: string, schema: JsonSchema) {
  const known = components[name];
  if (known && JSON.stringify(known) !== JSON.stringify(schema))
    throw new Error(`Two different schemas are named ${name}.`);
  components[name] = schema;
}

/**
 * Every request body is a named component (`<OperationId>Request`, or the zod schema's own
 * id): client generators give an inline body no type of its own, and oapi-codegen's type of
 * an inline `oneOf` loses its JSON marshalling (it sent `{}`). The variants of a `oneOf`
 * that differ by a constant (`trigger_type: "cron"`) are named after it too
 * (`CreateAutomationRequestCron`).
 */
function namedBody(
  operationId: string,
  schema: JsonSchema,
  components: Record<string, JsonSchema>,
): JsonSchema {
  if (typeof schema.$ref === "string") return schema;
  const name = `${pascal(operationId)}Request`;
  const variants = (schema.oneOf ?? schema.anyOf) as JsonSchema[] | undefined;
  if (variants) {
    const key = schema.oneOf ? "oneOf" : "anyOf";
    schema = {
      ...schema,
      [key]: variants.map((variant) => {
        const props = (variant.properties ?? {}) as Record<string, JsonSchema>;
        const constant = Object.values(props).find((p) => typeof p.const === "string")?.const;
        if (typeof variant.$ref === "string" || typeof constant !== "string") return variant;
        register(components, `${name}${pascal(constant)}`, defaultsToText(variant));
        return ref(`${name}${pascal(constant)}`);
      }),
    };
  }
  register(components, name, defaultsToText(schema));
  return ref(name);
}

/** A route's success answer: its status, headers and content. */
function successResponse(
  r: AnyRoute,
  components: Record<string, JsonSchema>,
): Record<string, unknown> {
  const responses: Record<string, unknown> = {};
  const successContent =
    r.status === 204 || !r.response.schema
      ? undefined
      : {
          [r.response.contentType ?? "application/json"]: {
            schema: toSchema(r.response.schema, "output", components),
          },
        };
  const successHeaders: Record<string, unknown> = {
    ...(r.location
      ? {
          Location: {
            description:
              r.status === 202 ? "Where to follow the queued work" : "The created resource",
            schema: { type: "string" },
          },
        }
      : {}),
    ...(r.page ? PAGE_HEADERS : {}),
    ...(r.rateLimited ? RATE_LIMIT_HEADERS : {}),
    ...(isIdempotent(r)
      ? {
          "Idempotent-Replayed": {
            description: "`true` on the stored answer to a repeated Idempotency-Key",
            schema: { type: "string", enum: ["true"] },
          },
        }
      : {}),
  };
  responses[String(r.status)] = {
    description: r.response.description,
    ...(Object.keys(successHeaders).length > 0 ? { headers: successHeaders } : {}),
    ...(successContent ? { content: successContent } : {}),
  };
  return responses;
}

/** A route's error answers: the statuses it declares and those its checks imply. */
function errorResponses(r: AnyRoute, errorRef: JsonSchema): Record<string, unknown> {
  const responses: Record<string, unknown> = {};
  const statuses = new Set<number>(r.errors ?? []);
  if (isIdempotent(r)) {
    statuses.add(409);
    statuses.add(422);
  }
  if (r.body || r.query || r.params) statuses.add(400);
  if (r.body) {
    statuses.add(413);
    statuses.add(415);
  }
  if (r.auth === "key" || r.auth === "optional-key") statuses.add(401);
  for (const status of [...statuses].sort()) {
    const headers =
      status === 429
        ? {
            "Retry-After": { description: "Seconds to wait", schema: { type: "integer" } },
            ...(r.rateLimited ? RATE_LIMIT_HEADERS : {}),
          }
        : undefined;
    responses[String(status)] = {
      description: ERROR_TEXT[status] ?? "Error",
      ...(headers ? { headers } : {}),
      content: { "application/json": { schema: errorRef } },
    };
  }
  return responses;
}

/** One route's OpenAPI operation. */
function routeOperation(
  r: AnyRoute,
  components: Record<string, JsonSchema>,
  errorRef: JsonSchema,
): Record<string, unknown> {
  const responses = { ...successResponse(r, components), ...errorResponses(r, errorRef) };
  const operation: Record<string, unknown> = {
    operationId: r.operationId,
    summary: r.summary,
    ...(r.description ? { description: r.description } : {}),
    tags: [r.tag],
    parameters: [
      ...parametersOf(r.params, "path", components),
      ...parametersOf(r.query, "query", components),
      ...(isIdempotent(r) ? [IDEMPOTENCY_KEY] : []),
    ],
    responses,
    security:
      r.auth === "key" ? [{ apiKey: [] }] : r.auth === "optional-key" ? [{}, { apiKey: [] }] : [],
  };
  if (r.body) {
    operation.requestBody = {
      // An optional body (e.g. reject's `{reason}`) may be left out altogether.
      required: !r.body.safeParse(undefined).success,
      content: {
        "application/json": {
          schema: namedBody(r.operationId, toSchema(r.body, "input", components), components),
        },
      },
    };
  }
  return operation;
}

/** The OpenAPI 3.1 document, generated from the same zod schemas that validate requests. */
export function buildOpenApi(
  routes: AnyRoute[],
  info: { version: string; serverUrl?: string },
  vendorRoutes: readonly VendorEndpoint[] = [],
): JsonSchema {
  const components: Record<string, JsonSchema> = {};
  const paths: Record<string, Record<string, unknown>> = {};
  const errorRef = { $ref: "#/components/schemas/Error" };
  toSchema(errorBody, "output", components); // registers the Error component
  // Responses first: a schema's response form keeps the plain name, a differing request
  // form becomes `<id>Input` whatever the route order.
  for (const r of routes) if (r.response.schema) toSchema(r.response.schema, "output", components);
  for (const r of routes) {
    const path = r.path.replace(/:([A-Za-z_]+)/g, "{$1}");
    paths[path] ??= {};
    paths[path][r.method] = routeOperation(r, components, errorRef);
  }
  for (const v of vendorRoutes) {
    const path = v.path.replace(/:([A-Za-z_]+)/g, "{$1}");
    paths[path] ??= {};
    paths[path][v.method] = vendorOperation(v, errorRef);
  }
  // Free-form JSON: `{}` (any value) instead of the recursive union zod writes for it, which
  // generators turn into recursive types that do not compile (openapi-typescript's map) or
  // lose (oapi-codegen). The component keeps its name, so references to it stay.
  // Request forms of reused schemas too (`<id>Input`, see toSchema).
  for (const [name, schema] of Object.entries(components))
    if (name.endsWith("Input")) components[name] = defaultsToText(schema);
  if (vendorRoutes.length > 0)
    components.VendorSignedBody = {
      description: "A vendor's event, as the vendor sends and signs it (any JSON or form body)",
    };
  if (components.JsonValue) components.JsonValue = { description: "any JSON value" };
  return {
    openapi: "3.1.0",
    jsonSchemaDialect: "https://json-schema.org/draft/2020-12/schema",
    info: {
      title: "Foreman API",
      version: info.version,
      description:
        "Self-hosted software-engineering tasks on GitHub and git repositories. Every path also answers with a trailing slash. Errors use the body `{error: {code, message, details?}}`. The same operations are offered to coding assistants as Model Context Protocol tools at `/mcp` (Streamable HTTP, same API key; docs/mcp.md), outside this document.",
    },
    ...(info.serverUrl ? { servers: [{ url: info.serverUrl }] } : {}),
    components: {
      securitySchemes: { apiKey: { type: "apiKey", in: "header", name: "X-API-Key" } },
      schemas: components,
    },
    paths,
  };
}
