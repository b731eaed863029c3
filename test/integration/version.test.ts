import { readFile } from "node:fs/promises";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../helpers/server.js";

/*
 * One version number everywhere (issue 43): the package's, in the OpenAPI and AsyncAPI
 * documents and in the MCP door's server info, so a client sees the same number at each door.
 */

let server: TestServer;
let key: string;
let version: string;

beforeAll(async () => {
  version = (JSON.parse(await readFile("package.json", "utf8")) as { version: string }).version;
  server = await startTestServer();
  ({ key } = await server.signup());
});
afterAll(async () => {
  await server?.stop();
});

describe("the service's version", () => {
  it("is the package's in the OpenAPI and AsyncAPI documents", async () => {
    expect(version).toMatch(/^\d+\.\d+\.\d+$/);
    expect((await server.api("GET", "/openapi.json")).body.info.version).toBe(version);
    expect((await server.api("GET", "/asyncapi.json")).body.info.version).toBe(version);
  });

  it("is the package's in the MCP door's server info", async () => {
    const client = new Client({ name: "version-test", version: "0.0.0" });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), {
        requestInit: { headers: { "x-api-key": key } },
      }),
    );
    try {
      expect(client.getServerVersion()).toMatchObject({ name: "foreman", version });
    } finally {
      await client.close();
    }
  });
});
