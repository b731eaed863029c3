import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { DiagnosticSeverity, Parser as AsyncApiParser } from "@asyncapi/parser";
import { Ajv } from "ajv";
import addFormats from "ajv-formats";
import openapiTS, { astToString } from "openapi-typescript";
import ts from "typescript";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { createGitRepo } from "../helpers/git-repo.js";
import { openTaskStream } from "../helpers/ws.js";

/*
 * Clients generate cleanly from the served documents (issue 31): a TypeScript client
 * (openapi-typescript + openapi-fetch) and a Go client (oapi-codegen, built once from the Go
 * module proxy into a cache folder) compile a short scenario with no hand edits, and the Go
 * one runs it against this server; the AsyncAPI document describes the events the
 * WebSocket really sends.
 */

const run = promisify(execFile);
const OAPI_CODEGEN = "github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen";
// v2.5.1 and older stop at OpenAPI 3.1's `type: "null"` (nullable fields); 2.8 reads it.
const OAPI_CODEGEN_VERSION = "v2.8.2";

let server: TestServer;
let doc: Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
let dir: string;

beforeAll(async () => {
  server = await startTestServer();
  doc = (await server.api("GET", "/openapi.json")).body;
  dir = await mkdtemp(path.join(os.tmpdir(), "foreman-clients-"));
});
afterAll(async () => {
  await server?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** The Go toolchain: GOROOT's go on PATH or /usr/local/go; undefined when there is none. */
function findGo(): string | undefined {
  for (const candidate of [
    ...(process.env.PATH ?? "").split(path.delimiter).map((p) => path.join(p, "go")),
    "/usr/local/go/bin/go",
  ])
    if (candidate && existsSync(candidate)) return candidate;
  return undefined;
}

describe("the OpenAPI document for generators", () => {
  it("names every request body and writes free-form JSON as any value", () => {
    const bodies: string[] = [];
    for (const [p, ops] of Object.entries(doc.paths as Record<string, Record<string, typeof doc>>))
      for (const [method, op] of Object.entries(ops))
        for (const [type, content] of Object.entries(
          (op.requestBody?.content ?? {}) as Record<string, { schema: Record<string, unknown> }>,
        ))
          if (typeof content.schema.$ref !== "string") bodies.push(`${method} ${p} ${type}`);
    expect(bodies).toEqual([]);
    expect(doc.paths["/tasks"].post.requestBody.content["application/json"].schema).toEqual({
      $ref: "#/components/schemas/CreateTaskRequest",
    });
    expect(doc.components.schemas.CreateAutomationRequest.oneOf).toEqual([
      { $ref: "#/components/schemas/CreateAutomationRequestCron" },
      { $ref: "#/components/schemas/CreateAutomationRequestWebhook" },
      { $ref: "#/components/schemas/CreateAutomationRequestCiFailure" },
    ]);
    expect(doc.components.schemas.JsonValue).toEqual({ description: "any JSON value" });
    // The vendors' signed event endpoints are listed.
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining([
        "/integrations/slack/{endpoint}",
        "/integrations/{id}/linear/webhook",
        "/integrations/{id}/jira/webhook",
      ]),
    );
  });

  it("generates a TypeScript client whose scenario type-checks", async () => {
    const tsDir = path.join(dir, "ts");
    await mkdir(tsDir);
    await writeFile(path.join(tsDir, "api.d.ts"), astToString(await openapiTS(doc as never)));
    await symlink(path.resolve("node_modules"), path.join(tsDir, "node_modules"), "dir");
    await writeFile(
      path.join(tsDir, "scenario.ts"),
      `import createClient from "openapi-fetch";
import type { paths } from "./api";

const client = createClient<paths>({ baseUrl: "${server.url}" });
export async function scenario(key: string): Promise<string[]> {
  const headers = { "X-API-Key": key };
  const task = await client.POST("/tasks", {
    body: { workspace_id: "ws_1", repo_id: "acme/app", description: "Add a README" },
    params: { header: { "Idempotency-Key": "k1" } },
    headers,
  });
  const automation = await client.POST("/automations", {
    body: {
      repo_id: "acme/app",
      trigger_type: "webhook",
      trigger_config: { match: { action: ["opened", "edited"], "pull_request.number": 4, draft: false } },
      task_template: "Look at {{payload.pull_request.title}}",
    },
    params: { header: {} },
    headers,
  });
  const ready = await client.GET("/readyz");
  return [task.data?.id ?? task.error!.error.code, automation.data?.id ?? "", ready.data?.status ?? ""];
}
`,
    );
    const program = ts.createProgram([path.join(tsDir, "scenario.ts")], {
      strict: true,
      noEmit: true,
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.ESNext,
      moduleResolution: ts.ModuleResolutionKind.Bundler,
      skipLibCheck: true,
      types: [],
      lib: ["lib.es2022.d.ts", "lib.dom.d.ts"],
    });
    const problems = ts
      .getPreEmitDiagnostics(program)
      .map((d) => ts.flattenDiagnosticMessageText(d.messageText, "\n"));
    expect(problems).toEqual([]);
  }, 120_000);

  const go = findGo();
  it.skipIf(!go)(
    `generates a Go client with oapi-codegen that builds, vets and runs a scenario${go ? "" : " (skipped: no Go toolchain on PATH or in /usr/local/go)"}`,
    async () => {
      const env = { ...process.env, GOTOOLCHAIN: "local", GOFLAGS: "-mod=mod" };
      const cache = path.join(
        process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), ".cache"),
        "foreman-go-tools",
        OAPI_CODEGEN_VERSION,
      );
      const generator = path.join(cache, "bin", "oapi-codegen");
      if (!existsSync(generator))
        await run(go!, ["install", `${OAPI_CODEGEN}@${OAPI_CODEGEN_VERSION}`], {
          env: { ...env, GOBIN: path.join(cache, "bin") },
          cwd: dir,
        });
      const goDir = path.join(dir, "go");
      await mkdir(path.join(goDir, "foreman"), { recursive: true });
      await writeFile(path.join(goDir, "openapi.json"), JSON.stringify(doc));
      await writeFile(
        path.join(goDir, "oapi-codegen.yaml"),
        "package: foreman\ngenerate:\n  client: true\n  models: true\noutput: foreman/client.gen.go\n",
      );
      await run(generator, ["-config", "oapi-codegen.yaml", "openapi.json"], { cwd: goDir, env });
      await writeFile(path.join(goDir, "go.mod"), "module scenario\n\ngo 1.22\n");
      await writeFile(
        path.join(goDir, "main.go"),
        `package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"

	"scenario/foreman"
)

func main() {
	ctx := context.Background()
	client, err := foreman.NewClientWithResponses(os.Args[1])
	if err != nil {
		panic(err)
	}
	ready, err := client.ReadyzWithResponse(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("readyz", ready.StatusCode())
	created, err := client.GenerateKeyWithResponse(ctx, &foreman.GenerateKeyParams{}, foreman.GenerateKeyRequest{Name: "go client"})
	if err != nil {
		panic(err)
	}
	fmt.Println("generateKey", created.StatusCode())
	key := created.JSON201.Key
	withKey := func(_ context.Context, req *http.Request) error {
		req.Header.Set("X-API-Key", key)
		return nil
	}
	webhook := foreman.CreateAutomationRequestWebhook{
		RepoId:       "acme/app",
		TaskTemplate: "Look at {{payload.pull_request.title}}",
		TriggerType:  foreman.CreateAutomationRequestWebhookTriggerTypeWebhook,
	}
	webhook.TriggerConfig.Match = &map[string]foreman.JsonValue{"action": []string{"opened"}, "draft": false}
	var body foreman.CreateAutomationRequest
	if err := body.FromCreateAutomationRequestWebhook(webhook); err != nil {
		panic(err)
	}
	sent, _ := json.Marshal(body)
	fmt.Println("body", string(sent))
	automation, err := client.CreateAutomationWithResponse(ctx, &foreman.CreateAutomationParams{}, body, withKey)
	if err != nil {
		panic(err)
	}
	fmt.Println("createAutomation", automation.StatusCode(), string(automation.Body))
}
`,
      );
      await run(go!, ["mod", "tidy"], { cwd: goDir, env });
      await run(go!, ["vet", "./..."], { cwd: goDir, env });
      await run(go!, ["build", "-o", "scenario", "."], { cwd: goDir, env });
      const { stdout } = await run(path.join(goDir, "scenario"), [server.url], { env });
      const lines = stdout.trim().split("\n");
      expect(lines[0]).toBe("readyz 200");
      expect(lines[1]).toBe("generateKey 201");
      // The typed union marshals to the body given (it sent `{}` when the body was inline).
      expect(JSON.parse(lines[2]!.slice("body ".length))).toMatchObject({
        trigger_type: "webhook",
        trigger_config: { match: { action: ["opened"], draft: false } },
      });
      // The server read it: the answer is about the repository, not a missing trigger_type.
      expect(lines[3]).toMatch(/^createAutomation \d{3} /);
      expect(lines[3]).not.toMatch(/trigger_type/);
    },
    600_000,
  );
});

describe("the AsyncAPI document", () => {
  it("describes every event the WebSocket sends, with their fields", async () => {
    const res = await server.api("GET", "/asyncapi.json");
    expect(res.status).toBe(200);
    const api = res.body;
    expect(api.asyncapi).toBe("3.0.0");
    expect(api.channels.taskEvents.address).toBe("/tasks/{id}/ws");
    expect(api.servers.api).toMatchObject({ protocol: "ws", host: new URL(server.url).host });
    expect(Object.keys(api.channels.taskEvents.messages).sort()).toEqual(
      ["diff", "done", "error", "log", "phase", "plan"].sort(),
    );
    const done = api.components.schemas.TaskEventDone;
    expect(done.properties.pr_url.type).toEqual(["string", "null"]);
    expect(done.properties.pr_url.description).toMatch(/plain git workspace/);
    expect(done.required).toEqual(expect.arrayContaining(["event_type", "pr_url", "seq", "ts"]));
    expect(api.components.schemas.TaskEventPlan.properties.plan.items).toEqual({
      $ref: "#/components/schemas/PlanStep",
    });

    // A real event, read over the WebSocket, matches its message's payload schema.
    const ajv = new Ajv({ strict: false });
    addFormats.default(ajv);
    for (const [id, schema] of Object.entries(api.components.schemas as Record<string, object>))
      ajv.addSchema(schema, `#/components/schemas/${id}`);
    const repo = await createGitRepo({ "README.md": "# app\n" });
    try {
      const { key } = await server.signup();
      const ws = await server.api("POST", "/workspaces", {
        key,
        body: { name: "local", repos: [{ name: "acme/app", clone_url: repo.dir }] },
      });
      expect(ws.status).toBe(201);
      const created = await server.api("POST", "/tasks", {
        key,
        body: {
          workspace_id: ws.body.id,
          repo_id: ws.body.repos[0].id,
          description: "Add a README",
        },
      });
      expect(created.status).toBe(201);
      const stream = await openTaskStream(server.url, created.body.id, key);
      // No workers here: the task waits queued; cancelling it ends it with an error event.
      expect((await server.api("POST", `/tasks/${created.body.id}/cancel`, { key })).status).toBe(
        200,
      );
      const ended = await stream.waitFor((e) => e.event_type === "error");
      const first = stream.events[0]!;
      stream.close();
      expect(first).toMatchObject({ event_type: "phase", phase: "QUEUED", seq: 1 });
      for (const event of [first, ended]) {
        const name = `TaskEvent${event.event_type[0]!.toUpperCase()}${event.event_type.slice(1)}`;
        const validate = ajv.getSchema(`#/components/schemas/${name}`)!;
        expect(validate(event), JSON.stringify(validate.errors)).toBe(true);
      }
      const validate = ajv.getSchema("#/components/schemas/TaskEventPhase")!;
      expect(validate({ ...first, phase: "NOT_A_PHASE" })).toBe(false);
    } finally {
      await repo.remove();
    }
  });

  // The official parser (@asyncapi/parser: the AsyncAPI 3 JSON Schema plus the Spectral
  // rules that AsyncAPI Studio and the CLI's `validate` run) reads the served document with
  // no error and no warning, and sees the six events; a broken reference is an error to it.
  it("parses with the official AsyncAPI parser without errors or warnings", async () => {
    const text = await (await fetch(`${server.url}/asyncapi.json`)).text();
    const parser = new AsyncApiParser();
    const severe = (diagnostics: { severity: number }[]) =>
      diagnostics.filter(
        (d) => d.severity === DiagnosticSeverity.Error || d.severity === DiagnosticSeverity.Warning,
      );
    const { document, diagnostics } = await parser.parse(text);
    expect(severe(diagnostics), JSON.stringify(severe(diagnostics), null, 1)).toEqual([]);
    expect(document?.version()).toBe("3.0.0");
    expect(
      document!
        .allMessages()
        .all()
        .map((m) => m.name())
        .sort(),
    ).toEqual(["diff", "done", "error", "log", "phase", "plan"]);
    expect(document!.operations().all()[0]!.action()).toBe("receive");

    const broken = JSON.parse(text);
    delete broken.components.schemas.PlanStep;
    const second = await parser.parse(JSON.stringify(broken));
    expect(second.document).toBeUndefined();
    expect(
      second.diagnostics.filter((d) => d.severity === DiagnosticSeverity.Error).length,
    ).toBeGreaterThan(0);
  }, 60_000);
});
