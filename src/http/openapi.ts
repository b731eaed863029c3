import { z, type ZodType } from "zod";
import type { AnyRoute } from "./route.js";
import { errorBody } from "./schemas.js";

type JsonSchema = Record<string, unknown>;

const ERROR_TEXT: Record<number, string> = {
  400: "Malformed body, query or path values (`invalid_json`, `validation_failed`)",
  401: "Missing, unknown or revoked API key (`unauthorized`)",
  403: "Valid key, action not allowed (`forbidden`)",
  404: "Unknown id, or one that belongs to another account (`not_found`)",
  409: "Conflicting state (`invalid_state`, `conflict`)",
  413: "Body over 1 MiB (`payload_too_large`)",
  415: "Body is not JSON (`unsupported_media_type`)",
  429: "Quota used up or rate exceeded (`monthly_limit_reached`, `rate_limited`)",
  405: "Method not allowed on this path (`method_not_allowed`)",
  502: "A model provider or GitHub failed (`upstream_unavailable`)",
  503: "Not ready: the database does not answer (`not_ready`), or the GitHub App or the model a call needs is not configured (`upstream_unavailable`, the message names the variables to set)",
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
  for (const [name, def] of Object.entries(defs)) components[name] = rewriteRefs(def) as JsonSchema;
  return rewriteRefs(json) as JsonSchema;
}

function rewriteRefs(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(rewriteRefs);
  if (value && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      out[k] =
        k === "$ref" && typeof v === "string"
          ? v.replace("#/$defs/", "#/components/schemas/")
          : rewriteRefs(v);
    }
    return out;
  }
  return value;
}

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

/** The OpenAPI 3.1 document, generated from the same zod schemas that validate requests. */
export function buildOpenApi(
  routes: AnyRoute[],
  info: { version: string; serverUrl?: string },
): JsonSchema {
  const components: Record<string, JsonSchema> = {};
  const paths: Record<string, Record<string, unknown>> = {};
  const errorRef = { $ref: "#/components/schemas/Error" };
  toSchema(errorBody, "output", components); // registers the Error component
  for (const r of routes) {
    const path = r.path.replace(/:([A-Za-z_]+)/g, "{$1}");
    const responses: Record<string, unknown> = {};
    const successContent =
      r.status === 204 || !r.response.schema
        ? undefined
        : { "application/json": { schema: toSchema(r.response.schema, "output", components) } };
    responses[String(r.status)] = {
      description: r.response.description,
      ...(successContent ? { content: successContent } : {}),
    };
    const statuses = new Set<number>(r.errors ?? []);
    if (r.body || r.query || r.params) statuses.add(400);
    if (r.body) {
      statuses.add(413);
      statuses.add(415);
    }
    if (r.auth === "key" || r.auth === "optional-key") statuses.add(401);
    for (const status of [...statuses].sort()) {
      responses[String(status)] = {
        description: ERROR_TEXT[status] ?? "Error",
        content: { "application/json": { schema: errorRef } },
      };
    }
    const operation: Record<string, unknown> = {
      operationId: r.operationId,
      summary: r.summary,
      ...(r.description ? { description: r.description } : {}),
      tags: [r.tag],
      parameters: [
        ...parametersOf(r.params, "path", components),
        ...parametersOf(r.query, "query", components),
      ],
      responses,
      security:
        r.auth === "key" ? [{ apiKey: [] }] : r.auth === "optional-key" ? [{}, { apiKey: [] }] : [],
    };
    if (r.body) {
      operation.requestBody = {
        required: true,
        content: { "application/json": { schema: toSchema(r.body, "input", components) } },
      };
    }
    paths[path] ??= {};
    paths[path][r.method] = operation;
  }
  return {
    openapi: "3.1.0",
    jsonSchemaDialect: "https://json-schema.org/draft/2020-12/schema",
    info: {
      title: "Foreman API",
      version: info.version,
      description:
        "Self-hosted software-engineering tasks on GitHub and git repositories. Every path also answers with a trailing slash. Errors use the body `{error: {code, message, details?}}`.",
    },
    ...(info.serverUrl ? { servers: [{ url: info.serverUrl }] } : {}),
    components: {
      securitySchemes: { apiKey: { type: "apiKey", in: "header", name: "X-API-Key" } },
      schemas: components,
    },
    paths,
  };
}
