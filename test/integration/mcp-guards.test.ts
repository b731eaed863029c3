import http from "node:http";
import type net from "node:net";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openMcpTools, type McpServers } from "../../src/tools/mcp-tools.js";
import { SecretScope, withSecretScope } from "../../src/util/redact.js";
import { createGitRepo, type GitFixture } from "../helpers/git-repo.js";

/*
 * The red team's probes of MCP servers (issue #40, findings 5 and 6), against the real
 * transports: an HTTP server on 127.0.0.1 that redirects from the allowed path to another
 * path of the same origin, an encoded path that climbs out of the allowed prefix, and a
 * stdio server in the real sandbox that prints its secret, encoded, to stderr and exits.
 */

const SECRET = "Bearer mcp-header-secret-7c1d";

let server: http.Server;
let base: string;
/** Requests that reached a path outside /mcp, with their Authorization header. */
const outside: { url: string; authorization: string | undefined }[] = [];
let repo: GitFixture;

/** Answers one request as a stateless MCP server with one tool, echo. */
function serveEcho(req: http.IncomingMessage, res: http.ServerResponse): void {
  const mcp = new McpServer({ name: "echo", version: "1.0.0" });
  mcp.registerTool("echo", { description: "Echo." }, () => ({
    content: [{ type: "text", text: "echo" }],
  }));
  const transport = new StreamableHTTPServerTransport({
    sessionIdGenerator: undefined,
    enableJsonResponse: true,
  });
  res.on("close", () => void mcp.close());
  void mcp.connect(transport).then(() => transport.handleRequest(req, res));
}

beforeAll(async () => {
  server = http.createServer((req, res) => {
    const url = req.url ?? "/";
    if (url.startsWith("/mcp/redirect")) {
      res.writeHead(307, { location: "/admin/mcp" }).end();
      return;
    }
    if (url !== "/mcp/ok") outside.push({ url, authorization: req.headers.authorization });
    serveEcho(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
  repo = await createGitRepo({ "README.md": "guards\n" });
});

afterAll(async () => {
  server?.close();
  await repo?.remove();
});

async function open(servers: McpServers, secrets: Record<string, string>) {
  const lines: string[] = [];
  const toolbox = await openMcpTools({
    servers,
    secrets,
    cwd: repo.dir,
    allowedUrls: [`${base}/mcp`],
    readOnly: false,
    startTimeoutMs: 20_000,
    callTimeoutMs: 20_000,
    log: (line) => lines.push(line),
  });
  await toolbox.close();
  return { tools: toolbox.tools.map((t) => t.name), lines };
}

describe("MCP servers over HTTP", () => {
  it("follows no redirect, even to the same origin, and sends the secret header nowhere else", async () => {
    const { tools, lines } = await open(
      { docs: { url: `${base}/mcp/redirect`, header_secrets: { Authorization: "DOCS" } } },
      { DOCS: SECRET },
    );
    expect(tools).toEqual([]);
    expect(lines.join("\n")).toMatch(
      /MCP server docs did not start \(.*redirect \(HTTP 307\); redirects are not followed/,
    );
    expect(outside).toEqual([]);
    expect(lines.join("\n")).not.toContain("mcp-header-secret");
  });

  it("uses an allowed path (the guard lets the real transport work)", async () => {
    const { tools } = await open(
      { docs: { url: `${base}/mcp/ok`, header_secrets: { Authorization: "DOCS" } } },
      { DOCS: SECRET },
    );
    expect(tools).toEqual(["mcp__docs__echo"]);
  });

  it("never contacts a path that decodes outside the allowed prefix", async () => {
    for (const path of ["/mcp/..%2F..%2Fadmin", "/mcp/%2e%2e/admin", "/mcp/%252e%252e/admin"]) {
      const { tools, lines } = await open(
        { docs: { url: `${base}${path}`, header_secrets: { Authorization: "DOCS" } } },
        { DOCS: SECRET },
      );
      expect(tools, path).toEqual([]);
      expect(lines.join("\n"), path).toMatch(/is not in MCP_ALLOWED_URLS/);
    }
    expect(outside).toEqual([]);
  });
});

describe("a stdio MCP server's stderr", () => {
  it("reaches the task log with the task's secrets redacted, also encoded", async () => {
    const value = "stderr-secret-Value-42";
    const print = [
      "const v = process.env.TOKEN;",
      "console.error('raw', v);",
      "console.error('b64', Buffer.from('user:' + v).toString('base64'));",
      "console.error('hex', Buffer.from(v).toString('hex'));",
      "console.error('url', encodeURIComponent(v + '/x'));",
      "console.error('rev', [...v].reverse().join(''));",
      "process.exit(3);",
    ].join(" ");
    const scope = new SecretScope("account-a", [value]);
    const { lines } = await withSecretScope(scope, () =>
      open(
        { leaky: { command: "node", args: ["-e", print], env_secrets: ["TOKEN"] } },
        { TOKEN: value },
      ),
    );
    const log = lines.join("\n");
    expect(log).toMatch(/MCP server leaky did not start .*its stderr ends: raw \[REDACTED\]/);
    for (const form of [
      value,
      Buffer.from(value).toString("hex"),
      Buffer.from(`user:${value}`).toString("base64").slice(8, 30),
      [...value].reverse().join(""),
      "Value-42",
    ])
      expect(log, form).not.toContain(form);
    expect(log).toContain("b64 dXNlcjp");
  });
});
