import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { agentModel, roleOf, type Script } from "../helpers/agent-model.js";
import {
  fakeModelEnv,
  lastToolResult,
  startFakeModel,
  toolResults,
  type FakeModel,
} from "../helpers/fake-model.js";
import { createGitRepo, type GitFixture } from "../helpers/git-repo.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { openTaskStream } from "../helpers/ws.js";

/*
 * MCP servers as the agent's tools (docs/mcp.md, "MCP servers as the agent's tools"): a
 * repository's .github/foreman.yml names a stdio server committed in it
 * (fixtures/mcp/probe-server.mjs). Planning sees only its read-only tool; implementing calls its
 * other tool, whose result reaches the model, and shows the server ran inside the sandbox: the
 * working copy readable, a host file outside it and the host's loopback not. An HTTP server in
 * MCP_ALLOWED_URLS is used (the SDK's own server), one outside it is never contacted, a server that
 * cannot start fails nothing, and the account's setting adds servers and write-only secrets.
 */

const SECRET_TEXT = "HOST-SECRET-OUTSIDE-THE-WORKING-COPY";

let repo: GitFixture;
let model: FakeModel;
let server: TestServer;
let key: string;
let workspaceId: string;
let outside: string;
let loopback: net.Server;
let loopbackHits = 0;
let remote: http.Server;
let remoteHits = 0;
let allowed: http.Server;
let allowedHits = 0;

/** The tool implementing calls first; the second test switches it to the account's server. */
let probeTool = "mcp__probe__probe";

const script: Script = {
  plan: (_request, n) =>
    n === 0
      ? [
          { name: "mcp__glossary__lookup", arguments: { term: "widget" } },
          { name: "mcp__allowed__echo", arguments: { text: "hi" } },
        ]
      : [
          {
            name: "submit_plan",
            arguments: {
              summary: "Record the probe.",
              steps: [
                { title: "Write probe.txt", description: "The probe.", files: ["probe.txt"] },
              ],
            },
          },
        ],
  implement: (request, n) => {
    if (n === 0) return [{ name: probeTool, arguments: {} }];
    if (n === 1)
      return [
        {
          name: "write_file",
          arguments: { path: "probe.txt", content: `${lastToolResult(request) ?? "none"}\n` },
        },
      ];
    return [{ name: "finish", arguments: { summary: "Recorded." } }];
  },
  review: () => [
    { name: "submit_review", arguments: { verdict: "approve", summary: "Fine.", comments: [] } },
  ],
};

beforeAll(async () => {
  const scratch = await mkdtemp(path.join(os.tmpdir(), "foreman-mcp-outside-"));
  outside = path.join(scratch, "secret.txt");
  await writeFile(outside, SECRET_TEXT);
  loopback = net.createServer((socket) => {
    loopbackHits += 1;
    socket.destroy();
  });
  await new Promise<void>((resolve) => loopback.listen(0, "127.0.0.1", resolve));
  remote = http.createServer((_req, res) => {
    remoteHits += 1;
    res.writeHead(500).end();
  });
  await new Promise<void>((resolve) => remote.listen(0, "127.0.0.1", resolve));
  // An HTTP MCP server the operator allowed (stateless Streamable HTTP, the SDK's own server).
  allowed = http.createServer((req, res) => {
    allowedHits += 1;
    const mcp = new McpServer({ name: "allowed", version: "1.0.0" });
    mcp.registerTool(
      "echo",
      {
        description: "Echo a text.",
        inputSchema: { text: z.string() },
        annotations: { readOnlyHint: true },
      },
      ({ text }) => ({ content: [{ type: "text", text: `echo: ${text}` }] }),
    );
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: true,
    });
    res.on("close", () => void mcp.close());
    void mcp.connect(transport).then(() => transport.handleRequest(req, res));
  });
  await new Promise<void>((resolve) => allowed.listen(0, "127.0.0.1", resolve));
  const allowedUrl = `http://127.0.0.1:${(allowed.address() as net.AddressInfo).port}/mcp`;
  const loopbackPort = (loopback.address() as net.AddressInfo).port;
  const remotePort = (remote.address() as net.AddressInfo).port;
  const probe = await readFile(path.resolve("fixtures/mcp/probe-server.mjs"), "utf8");
  repo = await createGitRepo({
    "README.md": "hello from the working copy\n",
    "tools/probe-mcp.mjs": probe,
    ".github/foreman.yml": [
      "verify: []",
      "mcp_servers:",
      "  probe:",
      "    command: node",
      `    args: [tools/probe-mcp.mjs, ${JSON.stringify(outside)}, "${loopbackPort}"]`,
      "  glossary:",
      "    command: node",
      "    args: [tools/probe-mcp.mjs]",
      "  broken:",
      "    command: node",
      "    args: [tools/missing.mjs]",
      "  remote:",
      `    url: http://127.0.0.1:${remotePort}/mcp`,
      "  allowed:",
      `    url: ${allowedUrl}`,
      "",
    ].join("\n"),
  });
  model = await startFakeModel(agentModel(script));
  server = await startTestServer({
    workers: true,
    env: {
      ...fakeModelEnv(model, "sk-mcp-tools-test-key-0123456789abcdef"),
      EVENT_POLL_MS: "50",
      MCP_ALLOWED_URLS: `https://docs.example.com/mcp,${allowedUrl}`,
    },
  });
  ({ key } = await server.signup());
  const ws = await server.api("POST", "/workspaces", {
    key,
    body: { name: "local", repos: [{ name: "acme/probe", clone_url: repo.dir }] },
  });
  expect(ws.status).toBe(201);
  workspaceId = ws.body.id;
}, 60_000);

afterAll(async () => {
  await server?.stop();
  await model?.close();
  await repo?.remove();
  loopback?.close();
  remote?.close();
  allowed?.close();
  if (outside) await rm(path.dirname(outside), { recursive: true, force: true });
});

describe("MCP servers as the agent's tools", () => {
  it("offers a repository's stdio server inside the sandbox, read-only while planning", async () => {
    const created = await server.api("POST", "/tasks", {
      key,
      body: {
        workspace_id: workspaceId,
        repo_id: "acme/probe",
        description: "Probe the MCP server",
        auto_approve: true,
      },
    });
    expect(created.status).toBe(201);
    const stream = await openTaskStream(server.url, created.body.id, key);
    const end = await stream.waitFor(
      (e) => e.event_type === "done" || e.event_type === "error",
      180_000,
    );
    expect(
      end.event_type,
      JSON.stringify(stream.events.filter((e) => e.event_type === "log")),
    ).toBe("done");

    const planning = model.requests.filter((r) => roleOf(r) === "plan");
    expect(planning[0]!.tools).toContain("mcp__glossary__lookup");
    expect(planning[0]!.tools).toContain("mcp__probe__lookup");
    expect(planning[0]!.tools).not.toContain("mcp__probe__probe");
    expect(planning[0]!.tools).toContain("mcp__allowed__echo");
    expect(toolResults(planning[1]!).map((r) => r.content)).toEqual([
      "widget: GLOSSARY-DEFINITION",
      "echo: hi",
    ]);
    expect(allowedHits).toBeGreaterThan(0);

    const implementing = model.requests.filter((r) => roleOf(r) === "implement");
    expect(implementing[0]!.tools).toEqual(
      expect.arrayContaining(["mcp__probe__probe", "mcp__probe__lookup", "write_file"]),
    );
    const result = lastToolResult(implementing[1]!)!;
    expect(result).toMatch(/^PROBE /);
    const report = JSON.parse(result.slice("PROBE ".length)) as Record<string, string>;
    expect(report.cwd).toBe("/workspace");
    expect(report.inside).toBe("hello from the working copy");
    expect(report.outside).toMatch(/^refused \(ENOENT\)/);
    expect(report.loopback).toMatch(/^refused/);
    expect(JSON.stringify(model.requests)).not.toContain(SECRET_TEXT);
    expect(loopbackHits).toBe(0);

    const logs = stream.events.filter((e) => e.event_type === "log").map((e) => String(e.message));
    expect(
      logs.some((l) =>
        /MCP server probe started: 1 tool \(mcp__probe__lookup\); 1 not read-only/.test(l),
      ),
    ).toBe(true);
    expect(logs.some((l) => /MCP server probe started: 2 tools/.test(l))).toBe(true);
    expect(logs.some((l) => /mcp__probe__probe: ok/.test(l))).toBe(true);
    expect(
      logs.some((l) => /MCP server broken did not start .*the task goes on without it/.test(l)),
    ).toBe(true);
    expect(logs.some((l) => /MCP server remote: .* is not in MCP_ALLOWED_URLS/.test(l))).toBe(true);
    expect(remoteHits).toBe(0);
    stream.close();
  }, 240_000);

  it("adds the account's servers with write-only secrets that never reach the model", async () => {
    const token = "probe-token-value-5f1c9e7a2b";
    const patched = await server.api("PATCH", "/settings/mcp-servers", {
      key,
      body: {
        servers: {
          acct: { command: "node", args: ["tools/probe-mcp.mjs"], env_secrets: ["PROBE_TOKEN"] },
        },
        secrets: { PROBE_TOKEN: token },
      },
    });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ secrets: ["PROBE_TOKEN"] });
    expect(JSON.stringify(patched.body)).not.toContain(token);
    const read = await server.api("GET", "/settings/mcp-servers", { key });
    expect(read.body.servers.acct.env_secrets).toEqual(["PROBE_TOKEN"]);
    expect(JSON.stringify(read.body)).not.toContain(token);
    const bad = await server.api("PATCH", "/settings/mcp-servers", {
      key,
      body: { servers: { "no spaces": { command: "x" } } },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe("validation_failed");
    const other = await server.signup("other");
    const theirs = await server.api("GET", "/settings/mcp-servers", { key: other.key });
    expect(theirs.body).toEqual({ servers: {}, secrets: [], updated_at: null });

    probeTool = "mcp__acct__probe";
    const before = model.requests.length;
    const created = await server.api("POST", "/tasks", {
      key,
      body: {
        workspace_id: workspaceId,
        repo_id: "acme/probe",
        description: "Probe the account's MCP server",
        auto_approve: true,
      },
    });
    expect(created.status).toBe(201);
    const stream = await openTaskStream(server.url, created.body.id, key);
    const end = await stream.waitFor(
      (e) => e.event_type === "done" || e.event_type === "error",
      180_000,
    );
    expect(end.event_type).toBe("done");
    const implementing = model.requests.slice(before).filter((r) => roleOf(r) === "implement");
    const result = lastToolResult(implementing[1]!)!;
    const report = JSON.parse(result.slice("PROBE ".length)) as Record<string, string>;
    // The server got the secret; what it answered was scrubbed before the model saw it.
    expect(report.token).toBe("[REDACTED]");
    expect(JSON.stringify(model.requests)).not.toContain(token);
    expect(JSON.stringify(stream.events)).not.toContain(token);
    stream.close();
  }, 240_000);
});
