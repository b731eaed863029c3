import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { integrationPlugins } from "../../src/integrations/registry.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

/*
 * The vendors' signed doors are in the served OpenAPI document, described from their
 * plugins' route specs: path values, signature headers, raw body media types, and the
 * answers a vendor can get.
 */
let server: TestServer;
let paths: Record<string, Record<string, Record<string, unknown>>>;

beforeAll(async () => {
  server = await startTestServer();
  paths = (await server.api("GET", "/openapi.json")).body.paths;
});
afterAll(async () => {
  await server.stop();
});

interface Parameter {
  name: string;
  in: string;
  required: boolean;
  schema: { enum?: string[] };
}

describe("vendor doors in /openapi.json", () => {
  it("documents every route of every registered vendor", () => {
    const documented = integrationPlugins().flatMap((plugin) =>
      plugin.routes.map((r) => r.path.replace(/:([A-Za-z_]+)/g, "{$1}")),
    );
    expect(documented.sort()).toEqual([
      "/integrations/slack/{endpoint}",
      "/integrations/{id}/jira/webhook",
      "/integrations/{id}/linear/webhook",
      "/integrations/{id}/slack/{endpoint}",
    ]);
    for (const path of documented) expect(paths[path]?.post, path).toBeDefined();
  });

  it("describes Slack's signed request: headers, endpoints, form and JSON bodies, no key", () => {
    const op = paths["/integrations/{id}/slack/{endpoint}"]!.post!;
    const params = op.parameters as Parameter[];
    expect(params.filter((p) => p.in === "header").map((p) => p.name)).toEqual([
      "X-Slack-Signature",
      "X-Slack-Request-Timestamp",
    ]);
    expect(params.find((p) => p.name === "endpoint")?.schema.enum).toEqual([
      "commands",
      "interactions",
      "events",
    ]);
    expect(Object.keys((op.requestBody as { content: object }).content)).toEqual([
      "application/x-www-form-urlencoded",
      "application/json",
    ]);
    expect(Object.keys(op.responses as object)).toEqual(["200", "400", "401", "404", "413"]);
    expect(op.security).toEqual([]);
  });

  it("describes the trackers' webhooks with their signature and delivery headers", () => {
    const header = (path: string) =>
      (paths[path]!.post!.parameters as Parameter[])
        .filter((p) => p.in === "header")
        .map((p) => p.name);
    expect(header("/integrations/{id}/linear/webhook")).toEqual([
      "Linear-Signature",
      "Linear-Delivery",
    ]);
    expect(header("/integrations/{id}/jira/webhook")).toEqual([
      "X-Hub-Signature",
      "X-Atlassian-Webhook-Identifier",
    ]);
  });
});
