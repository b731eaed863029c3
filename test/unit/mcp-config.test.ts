import { describe, expect, it } from "vitest";
import { isAllowedMcpUrl, mcpToolName, parseMcpServers } from "../../src/tools/mcp-tools.js";

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
