import { describe, expect, it } from "vitest";
import {
  isAllowedMcpUrl,
  limitRepositorySecrets,
  mcpToolName,
  parseMcpServers,
} from "../../src/tools/mcp-tools.js";

/* The rules of `mcp_servers:` and MCP_ALLOWED_URLS (docs/mcp.md, "MCP servers as the agent's tools"). */

describe("MCP_ALLOWED_URLS", () => {
  const allowed = ["https://docs.example.com/mcp", "http://127.0.0.1:8080"];
  it("matches the same origin at or below the entry's path", () => {
    expect(isAllowedMcpUrl("https://docs.example.com/mcp", allowed)).toBe(true);
    expect(isAllowedMcpUrl("https://docs.example.com/mcp/", allowed)).toBe(true);
    expect(isAllowedMcpUrl("https://docs.example.com/mcp/v2", allowed)).toBe(true);
    expect(isAllowedMcpUrl("http://127.0.0.1:8080/anything", allowed)).toBe(true);
  });
  it("refuses another origin, a sibling path, credentials and junk", () => {
    expect(isAllowedMcpUrl("https://docs.example.com/mcpx", allowed)).toBe(false);
    expect(isAllowedMcpUrl("https://docs.example.com/other", allowed)).toBe(false);
    expect(isAllowedMcpUrl("https://docs.example.com.evil.io/mcp", allowed)).toBe(false);
    expect(isAllowedMcpUrl("http://docs.example.com/mcp", allowed)).toBe(false);
    expect(isAllowedMcpUrl("http://127.0.0.1:8081/", allowed)).toBe(false);
    expect(isAllowedMcpUrl("https://u:p@docs.example.com/mcp", allowed)).toBe(false);
    expect(isAllowedMcpUrl("not a url", allowed)).toBe(false);
    expect(isAllowedMcpUrl("https://docs.example.com/mcp", [])).toBe(false);
  });
});

describe("MCP_ALLOWED_URLS against encoded paths", () => {
  const allowed = ["https://docs.example.com/mcp"];
  it("refuses paths a server could decode into one outside the allowed prefix", () => {
    for (const url of [
      "https://docs.example.com/mcp/..%2F..%2Fadmin",
      "https://docs.example.com/mcp/..%2fadmin",
      "https://docs.example.com/mcp/%2e%2e/admin",
      "https://docs.example.com/mcp/%2E%2E%2Fadmin",
      "https://docs.example.com/mcp/%252e%252e/admin",
      "https://docs.example.com/mcp/..%255Cadmin",
      "https://docs.example.com/mcp/..%5Cadmin",
      "https://docs.example.com/mcp\\..\\admin",
      "https://docs.example.com/mcp/..;/admin",
      "https://docs.example.com/mcp/%00/x",
      "https://docs.example.com/mcp/%zz",
      "https://docs.example.com/%6dcp/../admin",
    ])
      expect(isAllowedMcpUrl(url, allowed), url).toBe(false);
  });
  it("compares decoded paths, so an encoded letter is the letter", () => {
    expect(isAllowedMcpUrl("https://docs.example.com/%6Dcp/tools", allowed)).toBe(true);
    expect(isAllowedMcpUrl("https://docs.example.com/mcp/a%20b", allowed)).toBe(true);
    expect(isAllowedMcpUrl("https://docs.example.com/%6Dcpx", allowed)).toBe(false);
  });
});

describe("secrets a repository's mcp_servers may use", () => {
  const account = {
    tracker: { command: "npx", args: ["@acme/tracker"], env_secrets: ["TRACKER_TOKEN"] },
    docs: { url: "https://docs.example.com/mcp", header_secrets: { Authorization: "DOCS_AUTH" } },
  };
  it("allows only the secrets the account attached to its own server of that name", () => {
    const { servers, problems } = limitRepositorySecrets(
      {
        tracker: { command: "node", args: ["t.mjs"], env_secrets: ["TRACKER_TOKEN"] },
        glossary: { command: "node", args: ["g.mjs"] },
        thief: { command: "node", args: ["x.mjs"], env_secrets: ["TRACKER_TOKEN"] },
        docs: { url: "https://docs.example.com/mcp", header_secrets: { "X-Key": "DOCS_AUTH" } },
      },
      account,
      ".github/foreman.yml",
    );
    expect(Object.keys(servers).sort()).toEqual(["docs", "glossary", "tracker"]);
    expect(problems).toEqual([
      ".github/foreman.yml: MCP server thief asks for the account's secret TRACKER_TOKEN, which the account did not attach to its own server thief; this entry is left out.",
    ]);
  });
  it("refuses another server's secret, and an attached one carried to another URL", () => {
    const { servers, problems } = limitRepositorySecrets(
      {
        tracker: { command: "node", env_secrets: ["TRACKER_TOKEN", "DOCS_AUTH"] },
        docs: { url: "https://docs.example.com/mcp/other", header_secrets: { A: "DOCS_AUTH" } },
      },
      account,
      "f",
    );
    expect(servers).toEqual({});
    expect(problems[0]).toMatch(/MCP server tracker asks for the account's secret DOCS_AUTH,/);
    expect(problems[1]).toMatch(/MCP server docs would carry the account's secrets to another URL/);
  });
});

describe("mcp_servers in .github/foreman.yml", () => {
  it("keeps the valid entries and names the malformed ones", () => {
    const { servers, problems } = parseMcpServers(
      {
        verify: ["npm test"],
        mcp_servers: {
          docs: { url: "https://docs.example.com/mcp" },
          local: { command: "node", args: ["server.mjs"], env_secrets: ["TOKEN"] },
          typo: { comand: "node" },
          "bad name": { command: "node" },
          both: { command: "node", url: "https://x.example.com" },
        },
      },
      ".github/foreman.yml",
    );
    expect(Object.keys(servers).sort()).toEqual(["docs", "local"]);
    expect(problems).toHaveLength(3);
    expect(problems.join("\n")).toContain("mcp_servers.typo");
  });
  it("treats a missing or empty key as no servers, and a list as a mistake", () => {
    expect(parseMcpServers({ verify: [] }, "f")).toEqual({ servers: {}, problems: [] });
    expect(parseMcpServers({ mcp_servers: null }, "f")).toEqual({ servers: {}, problems: [] });
    expect(parseMcpServers({ mcp_servers: ["x"] }, "f").problems).toHaveLength(1);
  });
  it("names tools mcp__<server>__<tool>, within 64 characters", () => {
    expect(mcpToolName("docs", "search.pages")).toBe("mcp__docs__search_pages");
    expect(mcpToolName("docs", "x".repeat(100))).toHaveLength(64);
  });
});
