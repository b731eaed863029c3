import { z, type ZodType } from "zod";
import { taskEventMessages, type TaskEventName } from "../domain/tasks/event-schema.js";

type JsonSchema = Record<string, unknown>;

/**
 * JSON Schema draft-07 (AsyncAPI 3's default schema format) of a zod schema; schemas with an
 * id (`PlanStep`) become components and are referenced.
 */
function toSchema(schema: ZodType, components: Record<string, JsonSchema>): JsonSchema {
  const json = z.toJSONSchema(schema, {
    target: "draft-7",
    io: "output",
    unrepresentable: "any",
    reused: "inline",
  }) as JsonSchema;
  const defs = (json.definitions ?? {}) as Record<string, JsonSchema>;
  delete json.$schema;
  delete json.definitions;
  const rewrite = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(rewrite);
    if (value && typeof value === "object") {
      return Object.fromEntries(
        Object.entries(value).map(([k, v]) => [
          k,
          k === "$ref" && typeof v === "string"
            ? v.replace("#/definitions/", "#/components/schemas/")
            : rewrite(v),
        ]),
      );
    }
    return value;
  };
  for (const [name, def] of Object.entries(defs)) {
    // Events may gain fields: a client must ignore those it does not know.
    if (def.additionalProperties === false) delete def.additionalProperties;
    components[name] = rewrite(def) as JsonSchema;
  }
  return rewrite(json) as JsonSchema;
}

const idOf = (schema: ZodType): string => (schema.meta() as { id: string }).id;

/**
 * The AsyncAPI 3 document of the task WebSocket (`GET /asyncapi.json`; docs/api.md,
 * "WebSocket /tasks/{id}/ws"), generated from the zod schemas the event log's types come
 * from (domain/tasks/event-schema.ts).
 */
export function buildAsyncApi(info: { version: string; serverUrl?: string }): JsonSchema {
  const schemas: Record<string, JsonSchema> = {};
  const messages: Record<string, JsonSchema> = {};
  const channelMessages: Record<string, JsonSchema> = {};
  for (const [name, schema] of Object.entries(taskEventMessages) as [TaskEventName, ZodType][]) {
    const id = idOf(schema);
    // A schema with an id comes back as a reference to the component it registered.
    const json = toSchema(schema, schemas);
    if (typeof json.$ref !== "string") schemas[id] = json;
    messages[id] = {
      name,
      title: `${name} event`,
      summary: schema.description ?? name,
      contentType: "application/json",
      payload: { $ref: `#/components/schemas/${id}` },
    };
    channelMessages[name] = { $ref: `#/components/messages/${id}` };
  }
  const server = info.serverUrl ? new URL(info.serverUrl) : undefined;
  return {
    asyncapi: "3.0.0",
    info: {
      title: "Foreman task events",
      version: info.version,
      description:
        "The WebSocket of one task: after the upgrade the server sends every stored event of the task with a `seq` above `since` (all without it), in order, then each new event as it is stored, one JSON text message each: `{event_type, ...payload, seq, ts}`. It closes with 1000 after `done` or `error`, 1001 when the process shuts down, 1008 when the key is revoked, 1013 for a slow reader (reconnect with the `?since=` its reason names). Messages from the client are ignored. The upgrade is refused with the API's JSON error body: 401 without a valid key, 404 for an unknown task or another account's, 400 for a bad `since`.",
    },
    ...(server
      ? {
          servers: {
            api: {
              host: server.host,
              protocol: server.protocol === "https:" ? "wss" : "ws",
              description: "The API's own host and port.",
              security: [
                { $ref: "#/components/securitySchemes/apiKey" },
                { $ref: "#/components/securitySchemes/apiKeySubprotocol" },
              ],
            },
          },
        }
      : {}),
    channels: {
      taskEvents: {
        address: "/tasks/{id}/ws",
        title: "Events of one task",
        parameters: { id: { description: "The task's id." } },
        messages: channelMessages,
        bindings: {
          ws: {
            method: "GET",
            query: {
              type: "object",
              properties: {
                since: {
                  type: "integer",
                  minimum: 0,
                  description:
                    "Send only events with a greater `seq` (the last one the client saw): a reconnect misses nothing and sees nothing twice.",
                },
              },
            },
            bindingVersion: "0.1.0",
          },
        },
      },
    },
    operations: {
      receiveTaskEvents: {
        action: "receive",
        channel: { $ref: "#/channels/taskEvents" },
        summary: "The task's events, replayed then live, until it ends.",
        messages: Object.keys(channelMessages).map((name) => ({
          $ref: `#/channels/taskEvents/messages/${name}`,
        })),
      },
    },
    components: {
      schemas,
      messages,
      securitySchemes: {
        apiKey: { type: "httpApiKey", name: "X-API-Key", in: "header" },
        apiKeySubprotocol: {
          type: "httpApiKey",
          name: "Sec-WebSocket-Protocol",
          in: "header",
          description:
            "For browsers, which cannot set headers: the subprotocol `api-key.<key>` (`new WebSocket(url, ['api-key.' + key])`); the server selects it.",
        },
      },
    },
  };
}
