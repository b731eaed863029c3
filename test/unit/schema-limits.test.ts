import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  checkSchema,
  createSchemaBudget,
  TOOL_SCHEMA_LIMITS,
  toolInputJsonSchema,
} from "../../src/tools/schema-limits.js";

/*
 * The limits on an MCP tool's input schema (tools/schema-limits.ts, issue #40): hostile
 * shapes are refused with a phrase naming the limit, quickly whatever they would expand to,
 * and the schemas real servers list are kept.
 */

/** d0 a string, each d<i> an object whose two properties point at d<i-1>: 2^n when inlined. */
function refBomb(n: number, keyword: "$defs" | "definitions" = "$defs") {
  const defs: Record<string, unknown> = { d0: { type: "string" } };
  for (let i = 1; i <= n; i += 1)
    defs[`d${i}`] = {
      type: "object",
      properties: { a: { $ref: `#/${keyword}/d${i - 1}` }, b: { $ref: `#/${keyword}/d${i - 1}` } },
    };
  return { type: "object", properties: { tree: { $ref: `#/${keyword}/d${n}` } }, [keyword]: defs };
}

function nested(levels: number): Record<string, unknown> {
  let schema: Record<string, unknown> = { type: "string" };
  for (let i = 0; i < levels; i += 1) schema = { type: "object", properties: { x: schema } };
  return schema;
}

function refused(schema: unknown): string {
  const check = checkSchema(schema);
  if (check.ok) throw new Error(`kept: ${JSON.stringify(check.cost)}`);
  return check.reason;
}

describe("checkSchema", () => {
  it("refuses a schema nested too deep, and keeps one within the depth", () => {
    expect(refused(nested(40))).toBe("nests deeper than 32 levels (limit 32)");
    expect(checkSchema(nested(10)).ok).toBe(true);
  });

  it("refuses an object with too many keys, an enum too long, a string too long", () => {
    const wide = {
      type: "object",
      properties: Object.fromEntries(Array.from({ length: 501 }, (_, i) => [`p${i}`, {}])),
    };
    expect(refused(wide)).toBe("has an object of more than 500 keys (limit 500)");
    const colours = Array.from({ length: 1001 }, (_, i) => `c${i}`);
    expect(refused({ type: "object", properties: { c: { enum: colours } } })).toBe(
      "has an enum of more than 1000 values (limit 1000)",
    );
    const essay = { type: "object", description: "x".repeat(9000) };
    expect(refused(essay)).toBe("has a string longer than 8192 characters (limit 8192)");
    const longKey = { type: "object", properties: { ["k".repeat(9000)]: {} } };
    expect(refused(longKey)).toMatch(/^has a string longer than 8192/);
  });

  it("refuses a schema too large, of too many values or too many $refs", () => {
    const big = {
      type: "object",
      properties: Object.fromEntries(
        Array.from({ length: 100 }, (_, i) => [`p${i}`, { description: "d".repeat(700) }]),
      ),
    };
    expect(refused(big)).toBe("is larger than 64 KiB (limit 64 KiB)");
    const many = { type: "object", examples: Array.from({ length: 10_001 }, () => 0) };
    expect(refused(many)).toBe("has more than 10000 values (limit 10000)");
    const refs = {
      type: "object",
      allOf: Array.from({ length: 501 }, () => ({ $ref: "#/$defs/s" })),
      $defs: { s: { type: "string" } },
    };
    expect(refused(refs)).toBe("has more than 500 $refs (limit 500)");
  });

  it("refuses a $ref bomb at once, without building what it expands to", () => {
    for (const n of [14, 24, 200]) {
      const started = performance.now();
      expect(refused(refBomb(n))).toBe(
        "expands to more than 10000 schemas through $ref (limit 10000)",
      );
      // A 2^200 expansion would never end; the walk stops at the budget.
      expect(performance.now() - started).toBeLessThan(1000);
    }
    expect(refused(refBomb(24, "definitions"))).toMatch(/^expands to more than 10000 schemas/);
    // A few fan-outs of a big schema: few nodes, too many bytes once inlined.
    const wide = refBomb(6);
    (wide.$defs as Record<string, unknown>).d0 = { type: "string", description: "w".repeat(8000) };
    expect(refused(wide)).toBe("expands to more than 256 KiB through $ref (limit 256 KiB)");
    // Inlined up to the limit, it is kept, with what it costs.
    // The top, its `tree` and 2^(n+2) - 3 below d<n>: 2^13 - 1 for n = 11, 2^14 - 1 for 12.
    expect(checkSchema(refBomb(11))).toMatchObject({ ok: true, cost: { nodes: 2 ** 13 - 1 } });
    expect(refused(refBomb(12))).toMatch(/^expands to more than 10000 schemas/);
  });

  it("counts definitions nobody points at in the bytes a model call carries", () => {
    const unused = Object.fromEntries(
      Array.from({ length: 40 }, (_, i) => [`u${i}`, { description: "u".repeat(1000) }]),
    );
    const check = checkSchema({ type: "object", properties: {}, $defs: unused });
    expect(check.ok && check.cost.nodes).toBe(1);
    expect(check.ok && check.cost.bytes).toBeGreaterThan(40 * 1000);
  });

  it("follows any local JSON pointer, and leaves a $ref it cannot resolve as one node", () => {
    const pointer = {
      type: "object",
      properties: {
        a: {
          type: "object",
          properties: { l: { $ref: "#/properties/b" }, r: { $ref: "#/properties/b" } },
        },
        b: {
          type: "object",
          properties: { l: { $ref: "#/properties/c" }, r: { $ref: "#/properties/c" } },
        },
        c: { type: "string" },
      },
    };
    // The top, a (1 + 2 × ($ref + b)), b (1 + 2 × ($ref + c)), c.
    expect(checkSchema(pointer)).toMatchObject({ ok: true, cost: { nodes: 1 + 13 + 5 + 1 } });
    const dangling = { type: "object", properties: { x: { $ref: "https://example.com/s.json" } } };
    expect(checkSchema(dangling)).toMatchObject({ ok: true, cost: { nodes: 2 } });
  });

  it("counts a cycle once: recursive schemas are kept, a fan-out inside a cycle is not", () => {
    const tree = {
      type: "object",
      properties: { root: { $ref: "#/$defs/node" } },
      $defs: {
        node: {
          type: "object",
          properties: {
            name: { type: "string" },
            children: { type: "array", items: { $ref: "#/$defs/node" } },
          },
        },
      },
    };
    expect(checkSchema(tree)).toMatchObject({ ok: true, cost: { nodes: 6 } });
    const self = { type: "object", properties: { next: { $ref: "#" } } };
    expect(checkSchema(self)).toMatchObject({ ok: true, cost: { nodes: 2 } });
    const mutual = {
      $ref: "#/$defs/a",
      $defs: { a: { anyOf: [{ $ref: "#/$defs/b" }] }, b: { anyOf: [{ $ref: "#/$defs/a" }] } },
    };
    expect(checkSchema(mutual).ok).toBe(true);
    // The bomb closed into a cycle (d0 points back at the top): still 2^24 inside it.
    const cyclic = refBomb(24);
    (cyclic.$defs as Record<string, unknown>).d0 = { $ref: "#/$defs/d24" };
    expect(refused(cyclic)).toMatch(/^expands to more than 10000 schemas through \$ref/);
  });

  it("keeps the schemas real MCP servers list", async () => {
    // The SDK's own server, as most servers are written: zod shapes, listed as JSON Schema.
    const server = new McpServer({ name: "real", version: "1.0.0" });
    const edit = z.object({ oldText: z.string(), newText: z.string() });
    server.registerTool(
      "edit_file",
      {
        description: "Edit a file by replacing text.",
        inputSchema: { path: z.string(), edits: z.array(edit), dryRun: z.boolean().default(false) },
      },
      () => ({ content: [] }),
    );
    server.registerTool(
      "create_pull_request",
      {
        description: "Open a pull request.",
        inputSchema: {
          owner: z.string().describe("Repository owner"),
          repo: z.string().describe("Repository name"),
          title: z.string(),
          body: z.string().optional(),
          head: z.string(),
          base: z.string(),
          draft: z.boolean().optional(),
          labels: z.array(z.string()).max(100).optional(),
          state: z.enum(["open", "closed", "all"]).optional(),
        },
      },
      () => ({ content: [] }),
    );
    type Filter = { field?: string; equals?: string; and?: Filter[]; or?: Filter[] };
    const filter: z.ZodType<Filter> = z.lazy(() =>
      z.object({
        field: z.string().optional(),
        equals: z.string().optional(),
        and: z.array(filter).optional(),
        or: z.array(filter).optional(),
      }),
    );
    server.registerTool(
      "query",
      { description: "Query rows.", inputSchema: { filter, limit: z.number().int().max(1000) } },
      () => ({ content: [] }),
    );
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await server.connect(serverSide);
    const client = new Client({ name: "test", version: "1.0.0" });
    await client.connect(clientSide);
    const { tools } = await client.listTools();
    await client.close();
    expect(tools.map((t) => t.name)).toEqual(["edit_file", "create_pull_request", "query"]);
    for (const tool of tools) expect(checkSchema(tool.inputSchema)).toMatchObject({ ok: true });

    // A hand-written draft-07 schema with shared definitions (rich text used in many places).
    const richText = { type: "array", items: { $ref: "#/definitions/text" }, maxItems: 100 };
    const page = {
      $schema: "http://json-schema.org/draft-07/schema#",
      type: "object",
      properties: Object.fromEntries(
        Array.from({ length: 40 }, (_, i) => [`block${i}`, { $ref: "#/definitions/block" }]),
      ),
      definitions: {
        text: {
          type: "object",
          properties: {
            content: { type: "string", maxLength: 2000 },
            link: { type: ["string", "null"], format: "uri" },
            annotations: {
              type: "object",
              properties: Object.fromEntries(
                ["bold", "italic", "code", "strikethrough", "underline"].map((k) => [
                  k,
                  { type: "boolean" },
                ]),
              ),
            },
          },
          required: ["content"],
        },
        block: {
          type: "object",
          properties: { heading: richText, paragraph: richText, quote: richText },
        },
      },
    };
    expect(checkSchema(page)).toMatchObject({ ok: true });
  });

  it("takes other limits for other uses", () => {
    const limits = { ...TOOL_SCHEMA_LIMITS, maxExpandedNodes: 100 };
    expect(checkSchema(refBomb(4), limits)).toMatchObject({ ok: true });
    expect(checkSchema(refBomb(5), limits)).toMatchObject({
      ok: false,
      reason: "expands to more than 100 schemas through $ref (limit 100)",
    });
  });
});

describe("createSchemaBudget", () => {
  it("takes tools until their schemas together would pass the toolbox's limit", () => {
    const budget = createSchemaBudget({
      maxExpandedNodes: 100,
      maxExpandedBytes: 10_000,
      maxToolsPerServer: 10,
    });
    expect(budget.take({ nodes: 60, bytes: 1000 })).toBeUndefined();
    expect(budget.take({ nodes: 60, bytes: 1000 })).toBe(
      "would bring this task's MCP tools past 100 schemas together (limit 100)",
    );
    expect(budget.take({ nodes: 40, bytes: 1000 })).toBeUndefined();
    expect(budget.take({ nodes: 0, bytes: 9000 })).toMatch(/past 10 KiB together/);
  });
});

describe("toolInputJsonSchema", () => {
  it("sends the server's schema as it is, an object with properties at the top", () => {
    const own = { type: "object", properties: { a: { $ref: "#/$defs/x" } }, $defs: { x: {} } };
    expect(toolInputJsonSchema(own)).toEqual(own);
    expect(toolInputJsonSchema({ type: "object" })).toEqual({ type: "object", properties: {} });
    expect(toolInputJsonSchema(undefined)).toEqual({ type: "object", properties: {} });
  });
});
