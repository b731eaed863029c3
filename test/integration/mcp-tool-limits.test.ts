import { mkdtemp, rm } from "node:fs/promises";
import http from "node:http";
import type net from "node:net";
import os from "node:os";
import path from "node:path";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import {
  CallToolRequestSchema,
  ListToolsRequestSchema,
  type Tool,
} from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openMcpTools } from "../../src/tools/mcp-tools.js";

/*
 * The limits on MCP servers' tools beyond one schema (tools/schema-limits.ts): a server's
 * first 128 tools are looked at, all tools of one model loop share one budget (the servers
 * named first keep theirs), and a kept tool goes to the model with the server's own schema,
 * its arguments passed to the server as they are. Real MCP servers over Streamable HTTP
 * (the SDK's own server), one per path.
 */

/** d0 a string, each d<i> an object whose two properties point at d<i-1>: 2^(n+2) - 1 schemas. */
function refTree(n: number): Tool["inputSchema"] {
  const defs: Record<string, object> = { d0: { type: "string" } };
  for (let i = 1; i <= n; i += 1)
    defs[`d${i}`] = {
      type: "object",
      properties: { a: { $ref: `#/$defs/d${i - 1}` }, b: { $ref: `#/$defs/d${i - 1}` } },
    };
  return { type: "object", properties: { tree: { $ref: `#/$defs/d${n}` } }, $defs: defs };
}

const SERVERS: Record<string, Tool[]> = {
  many: Array.from({ length: 130 }, (_, i) => ({
    name: `t${i}`,
    inputSchema: { type: "object", properties: { n: { type: "number" } } },
  })),
  // 8,191 schemas each once inlined: two fit the loop's 20,000 beside `many`, a third does not.
  wide: [0, 1, 2].map((i) => ({ name: `w${i}`, inputSchema: refTree(11) })),
};

let httpServer: http.Server;
let base: string;
let cwd: string;
const calls: unknown[] = [];

beforeAll(async () => {
  cwd = await mkdtemp(path.join(os.tmpdir(), "foreman-mcp-limits-"));
  httpServer = http.createServer((req, res) => {
    const tools = SERVERS[(req.url ?? "").replace(/^\/mcp\//, "")] ?? [];
    const server = new Server(
      { name: "limits", version: "1.0.0" },
      { capabilities: { tools: {} } },
    );
    server.setRequestHandler(ListToolsRequestSchema, () => ({ tools }));
    server.setRequestHandler(CallToolRequestSchema, (request) => {
      calls.push(request.params);
      return { content: [{ type: "text", text: "done" }] };
    });
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: true,
    });
    res.on("close", () => void server.close());
    void server.connect(transport).then(() => transport.handleRequest(req, res));
  });
  await new Promise<void>((resolve) => httpServer.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(httpServer.address() as net.AddressInfo).port}/mcp`;
});

afterAll(async () => {
  await new Promise((resolve) => httpServer?.close(resolve));
  if (cwd) await rm(cwd, { recursive: true, force: true });
});

describe("MCP tools within limits", () => {
  it("looks at 128 tools a server, and shares one budget among the servers in order", async () => {
    const logs: string[] = [];
    const toolbox = await openMcpTools({
      servers: { many: { url: `${base}/many` }, wide: { url: `${base}/wide` } },
      secrets: {},
      cwd,
      allowedUrls: [base],
      readOnly: false,
      startTimeoutMs: 20_000,
      callTimeoutMs: 20_000,
      log: (line) => logs.push(line),
    });
    try {
      const names = toolbox.tools.map((t) => t.name);
      expect(names.filter((n) => n.startsWith("mcp__many__"))).toHaveLength(128);
      expect(names).not.toContain("mcp__many__t128");
      expect(names.filter((n) => n.startsWith("mcp__wide__"))).toEqual([
        "mcp__wide__w0",
        "mcp__wide__w1",
      ]);
      expect(logs).toContain(
        "MCP server many: 2 tools after the first 128 left out (limit 128 tools a server).",
      );
      expect(logs).toContain(
        "MCP tool mcp__wide__w2 left out: its input schema would bring this task's MCP tools past 20000 schemas together (limit 20000).",
      );

      // The model is sent the server's own schema; the server gets the arguments as they are.
      const w0 = toolbox.tools.find((t) => t.name === "mcp__wide__w0")!;
      expect(w0.inputJsonSchema).toEqual(SERVERS.wide![0]!.inputSchema);
      expect(w0.input.safeParse({ tree: { a: "x", extra: 1 } }).success).toBe(true);
      expect(w0.input.safeParse("not an object").success).toBe(false);
      expect(await w0.execute({ tree: { a: "x", extra: 1 } })).toBe("done");
      expect(calls).toEqual([{ name: "w0", arguments: { tree: { a: "x", extra: 1 } } }]);
    } finally {
      await toolbox.close();
    }
  }, 60_000);
});
