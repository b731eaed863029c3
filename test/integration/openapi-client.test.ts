import { mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import openapiTS, { astToString } from "openapi-typescript";
import ts from "typescript";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../helpers/server.js";

/**
 * The served OpenAPI document is usable by the client generators people use: `servers`,
 * named recursive schemas, and a typed client from openapi-typescript that type-checks.
 */
let server: TestServer;
let doc: Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
let dir: string;

beforeAll(async () => {
  server = await startTestServer();
  doc = (await server.api("GET", "/openapi.json")).body;
  dir = await mkdtemp(path.join(os.tmpdir(), "foreman-openapi-"));
});
afterAll(async () => {
  await server.stop();
  await rm(dir, { recursive: true, force: true });
});

/** Type-checks `file` (in `dir`) with the compiler API; answers the error messages. */
function typeCheck(file: string): string[] {
  const program = ts.createProgram([path.join(dir, file)], {
    strict: true,
    noEmit: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.ESNext,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    skipLibCheck: true,
    types: [],
    lib: ["lib.es2022.d.ts", "lib.dom.d.ts"],
  });
  return ts
    .getPreEmitDiagnostics(program)
    .map((d) => ts.flattenDiagnosticMessageText(d.messageText, "\n"));
}

describe("the OpenAPI document", () => {
  it("names the server the client reached and every reused schema", () => {
    expect(doc.servers).toEqual([{ url: server.url }]);
    const names = Object.keys(doc.components.schemas);
    expect(names.filter((n) => n.startsWith("__schema"))).toEqual([]);
    expect(names).toContain("JsonValue");
    // The body is a named component (CreateAutomationRequest), its webhook variant holds `match`.
    const body = doc.paths["/automations"].post.requestBody.content["application/json"].schema;
    const name = (body.$ref as string).split("/").pop()!;
    const match = doc.components.schemas[`${name}Webhook`];
    expect(JSON.stringify(match)).toContain('"$ref":"#/components/schemas/JsonValue"');
  });

  it("documents paging, Location, Idempotency-Key and RateLimit headers", () => {
    const list = doc.paths["/tasks"].get;
    expect(list.parameters.map((p: { name: string }) => p.name)).toEqual(
      expect.arrayContaining(["limit", "cursor", "before"]),
    );
    expect(Object.keys(list.responses["200"].headers)).toEqual(["Link", "X-Next-Cursor"]);
    const create = doc.paths["/tasks"].post;
    expect(create.parameters).toContainEqual(
      expect.objectContaining({ name: "Idempotency-Key", in: "header" }),
    );
    expect(create.responses["201"].headers).toHaveProperty("Location");
    expect(Object.keys(create.responses)).toEqual(expect.arrayContaining(["409", "422"]));
    expect(doc.paths["/keys"].get.responses["200"].headers).toHaveProperty("Link");
    const signup = doc.paths["/keys/generate"].post;
    expect(Object.keys(signup.responses["201"].headers)).toEqual(
      expect.arrayContaining(["RateLimit", "RateLimit-Policy", "Location"]),
    );
    expect(signup.responses["429"].headers).toHaveProperty("Retry-After");
    expect(
      doc.paths["/health-reports/{repo_id}/scan"].post.responses["202"].headers,
    ).toHaveProperty("Location");
  });

  it("generates a typed client with openapi-typescript that type-checks a call", async () => {
    const types = astToString(await openapiTS(doc as never));
    await writeFile(path.join(dir, "api.d.ts"), types);
    // The generated code imports nothing; the client file needs openapi-fetch's types.
    await symlink(path.resolve("node_modules"), path.join(dir, "node_modules"), "dir");
    await writeFile(
      path.join(dir, "client.ts"),
      `import createClient from "openapi-fetch";
import type { paths, components } from "./api";

type Created = paths["/tasks"]["post"]["responses"]["201"]["content"]["application/json"];
export const idOf = (task: Created): string => task.id;
type Keys = paths["/keys"]["get"]["responses"]["200"]["content"]["application/json"];
export const prefixes = (keys: Keys): string[] => keys.map((k) => k.prefix);
export const json: components["schemas"]["JsonValue"] = { a: [1, "b", null, { c: true }] };

const client = createClient<paths>({ baseUrl: "${server.url}" });
export async function create(): Promise<string | undefined> {
  const { data, error } = await client.POST("/tasks", {
    body: { workspace_id: "ws_1", repo_id: "acme/app", description: "Add a README" },
    params: { header: { "Idempotency-Key": "k1" } },
    headers: { "X-API-Key": "fmn_x" },
  });
  if (error) return error.error.code;
  return data.id;
}
`,
    );
    expect(typeCheck("client.ts")).toEqual([]);
    // The check can fail: a call that breaks the schema is an error.
    await writeFile(
      path.join(dir, "wrong.ts"),
      `import type { paths } from "./api";
type Created = paths["/tasks"]["post"]["responses"]["201"]["content"]["application/json"];
export const n = (task: Created): number => task.id;
`,
    );
    expect(typeCheck("wrong.ts").join("\n")).toMatch(/not assignable to type 'number'/);
  }, 120_000);
});
