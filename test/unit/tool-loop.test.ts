import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeAll, afterAll, describe, expect, it } from "vitest";
import { z } from "zod";
import {
  LlmNotConfiguredError,
  LlmProtocolError,
  LlmUpstreamError,
  NOT_CONFIGURED_MESSAGE,
} from "../../src/llm/errors.js";
import { costOf } from "../../src/llm/prices.js";
import {
  createModelClient,
  requireModel,
  type ModelSettings,
  type ReadyModelClient,
} from "../../src/llm/provider.js";
import { runToolLoop, type ToolLoopOptions } from "../../src/llm/tool-loop.js";
import type { ExecutableTool, PricedUsage, ToolSpec } from "../../src/llm/types.js";
import {
  callTool,
  lastToolResult,
  lastUserMessage,
  scripted,
  startFakeModel,
  toolResults,
  type FakeModel,
  type FakeReplyFunction,
} from "../helpers/fake-model.js";

const API_KEY = "sk-test-0123456789abcdefghijklmnop";

let dir: string;
let fake: FakeModel | undefined;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "foreman-tool-loop-"));
  await writeFile(path.join(dir, "README.md"), "# Demo\nA tiny project.\n");
  await writeFile(path.join(dir, "big.txt"), "x".repeat(100_000));
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

const readFileTool: ExecutableTool<{ path: string }> = {
  name: "read_file",
  description: "Read a file of the working copy.",
  input: z.strictObject({ path: z.string().min(1) }),
  async execute({ path: file }) {
    return readFile(path.join(dir, file), "utf8");
  },
};

const submitPlanTool: ToolSpec<{
  summary: string;
  steps: Array<{ title: string; files: string[] }>;
}> = {
  name: "submit_plan",
  description: "Submit the plan.",
  input: z.strictObject({
    summary: z.string().min(1),
    steps: z
      .array(z.strictObject({ title: z.string().min(1), files: z.array(z.string()).default([]) }))
      .min(1),
  }),
};

const validPlan = { summary: "Add a greeting", steps: [{ title: "Edit README.md" }] };

async function start(reply: FakeReplyFunction): Promise<FakeModel> {
  fake = await startFakeModel(reply);
  return fake;
}

function clientFor(server: FakeModel, overrides: Partial<ModelSettings> = {}): ReadyModelClient {
  return requireModel(
    createModelClient({
      provider: "openai-compatible",
      baseUrl: server.baseUrl,
      apiKey: API_KEY,
      model: "fake-coder",
      stream: false,
      timeoutMs: 10_000,
      maxRetries: 0,
      ...overrides,
    }),
  );
}

function loop(
  client: ReadyModelClient,
  overrides: Partial<ToolLoopOptions> = {},
): Promise<Awaited<ReturnType<typeof runToolLoop>>> {
  return runToolLoop({
    client,
    system: "You plan changes to a repository.",
    prompt: "Plan: add a greeting to the README.",
    tools: [readFileTool],
    finishTools: [submitPlanTool],
    maxSteps: 10,
    onUsage: async () => {},
    ...overrides,
  });
}

describe.each([
  { stream: false, mode: "generateText" },
  { stream: true, mode: "streamText" },
])("runToolLoop over HTTP ($mode)", ({ stream }) => {
  it("runs the read tools the model calls, then returns the finish tool's parsed input", async () => {
    const server = await start(
      scripted([
        {
          text: "Let me look at the README first.",
          toolCalls: [
            { name: "read_file", arguments: { path: "README.md" } },
            { name: "read_file", arguments: { path: "missing.md" } },
          ],
        },
        callTool("submit_plan", validPlan),
      ]),
    );
    const calls: string[] = [];
    const texts: string[] = [];
    const result = await loop(clientFor(server, { stream }), {
      onToolCall: (call) => calls.push(`${call.name} ${JSON.stringify(call.input)}`),
      onText: (text) => texts.push(text),
    });

    expect(result).toMatchObject({
      tool: "submit_plan",
      // parsed by the zod schema: the default for `files` is applied
      input: { summary: "Add a greeting", steps: [{ title: "Edit README.md", files: [] }] },
      steps: 2,
    });
    expect(calls).toEqual([
      'read_file {"path":"README.md"}',
      'read_file {"path":"missing.md"}',
      `submit_plan ${JSON.stringify(validPlan)}`,
    ]);
    expect(texts).toEqual(["Let me look at the README first."]);

    const [first, second] = server.requests;
    expect(first?.stream).toBe(stream);
    expect(first?.model).toBe("fake-coder");
    expect(first?.tools).toEqual(["read_file", "submit_plan"]);
    expect((first?.body as { tool_choice?: unknown }).tool_choice).toBe("required");
    expect(first?.messages[0]).toMatchObject({ role: "system" });
    const results = toolResults(second!);
    expect(results).toHaveLength(2);
    expect(results[0]?.content).toBe("# Demo\nA tiny project.\n");
    expect(results[1]?.content).toMatch(/read_file failed: ENOENT/);
    // the assistant's tool calls are replayed before their results
    const assistant = second?.messages.find((m) => m.role === "assistant");
    expect(assistant?.tool_calls?.map((c) => c.function.name)).toEqual(["read_file", "read_file"]);
  });

  it("tells the model what is wrong with invalid finish input and accepts the correction", async () => {
    const server = await start(
      scripted([
        callTool("submit_plan", { summary: "", steps: "edit the README" }),
        callTool("submit_plan", validPlan),
      ]),
    );
    const result = await loop(clientFor(server, { stream }));
    expect(result.steps).toBe(2);
    expect(result.input).toEqual({
      summary: "Add a greeting",
      steps: [{ title: "Edit README.md", files: [] }],
    });
    const feedback = lastToolResult(server.requests[1]!);
    expect(feedback).toContain("Invalid arguments for submit_plan");
    expect(feedback).toMatch(/- summary: .*>=1 characters/);
    expect(feedback).toMatch(/- steps: .*expected array/);
  });

  it("answers unknown tools and unparsable arguments, and refuses to finish in the same answer", async () => {
    const server = await start(
      scripted([
        {
          toolCalls: [
            { name: "delete_everything", arguments: {} },
            { name: "read_file", arguments: '{"path": "README.md"' },
            { name: "submit_plan", arguments: validPlan },
          ],
        },
        callTool("submit_plan", validPlan),
      ]),
    );
    const result = await loop(clientFor(server, { stream }));
    expect(result.steps).toBe(2);
    const [unknown, unparsable, early] = toolResults(server.requests[1]!);
    expect(unknown?.content).toBe(
      'There is no tool named "delete_everything". Available tools: read_file, submit_plan.',
    );
    expect(unparsable?.content).toContain("The arguments of read_file are not valid JSON");
    expect(early?.content).toContain("submit_plan was not accepted");
  });

  it("refuses to finish in the same answer as a tool that reported an Error: result", async () => {
    const server = await start(
      scripted([
        {
          toolCalls: [
            { name: "check_file", arguments: { path: "missing.md" } },
            { name: "submit_plan", arguments: validPlan },
          ],
        },
        callTool("submit_plan", validPlan),
      ]),
    );
    const checkFile: ExecutableTool<{ path: string }> = {
      name: "check_file",
      description: "Report on a file.",
      input: z.strictObject({ path: z.string() }),
      async execute({ path: file }) {
        return `Error: ${file} does not exist.`;
      },
    };
    const result = await loop(clientFor(server, { stream }), { tools: [checkFile] });
    expect(result.steps).toBe(2);
    const [read, early] = toolResults(server.requests[1]!);
    expect(read?.content).toMatch(/^Error: /);
    expect(early?.content).toContain("submit_plan was not accepted");
  });

  it("reminds the model to call the finish tool, then fails with LlmProtocolError", async () => {
    const server = await start(
      scripted([{ text: "I think the plan is…" }, { text: "Still thinking." }, { text: "Done!" }]),
    );
    const error = await loop(clientFor(server, { stream })).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LlmProtocolError);
    expect((error as Error).message).toBe(
      "The model answered without calling submit_plan after 2 reminders.",
    );
    expect(server.requests).toHaveLength(3);
    expect(lastUserMessage(server.requests[1]!)).toContain("call submit_plan");
  });

  it("sends an answer without a tool call back with the reminder, and counts its tokens", async () => {
    const server = await start(
      scripted([
        { text: "I think the plan is…", usage: { prompt_tokens: 1000, completion_tokens: 40 } },
        callTool("submit_plan", validPlan, {
          usage: { prompt_tokens: 1100, completion_tokens: 60 },
        }),
      ]),
    );
    const client = clientFor(server, { stream, prices: { inputPerMTok: 3, outputPerMTok: 15 } });
    const seen: PricedUsage[] = [];
    const texts: string[] = [];
    const result = await loop(client, {
      onUsage: async (usage) => {
        seen.push(usage);
      },
      onText: (text) => texts.push(text),
    });
    expect(result.steps).toBe(2);
    expect(texts).toEqual(["I think the plan is…"]);
    expect(seen[0]).toEqual(costOf({ inputTokens: 1000, outputTokens: 40 }, client.price));
    expect(result.usage).toMatchObject({ inputTokens: 2100, outputTokens: 100 });
    // The answer stays in the conversation, followed by the reminder.
    const [, assistant, reminder] = server.requests[1]!.messages.slice(-3);
    expect(assistant).toMatchObject({ role: "assistant", content: "I think the plan is…" });
    expect(reminder?.role).toBe("user");
    expect(reminder?.content).toContain("call submit_plan");
  });

  it("stops after maxSteps model calls", async () => {
    const server = await start(() => callTool("read_file", { path: "README.md" }));
    const error = await loop(clientFor(server, { stream }), { maxSteps: 3 }).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(LlmProtocolError);
    expect((error as Error).message).toBe("The model did not call submit_plan within 3 steps.");
    expect(server.requests).toHaveLength(3);
  });

  it("stops when onUsage throws and passes that error on unchanged", async () => {
    const server = await start(() => callTool("read_file", { path: "README.md" }));
    class BudgetReached extends Error {}
    const budget = new BudgetReached("budget used up");
    let calls = 0;
    const error = await loop(clientFor(server, { stream }), {
      onUsage: async () => {
        calls++;
        if (calls === 2) throw budget;
      },
    }).catch((e: unknown) => e);
    expect(error).toBe(budget);
    expect(server.requests).toHaveLength(2);
  });

  it("reports priced usage per call and sums it", async () => {
    const server = await start(
      scripted([
        callTool(
          "read_file",
          { path: "README.md" },
          { usage: { prompt_tokens: 1000, completion_tokens: 200 } },
        ),
        callTool("submit_plan", validPlan, {
          usage: { prompt_tokens: 2000, completion_tokens: 300 },
        }),
      ]),
    );
    const client = clientFor(server, { stream, prices: { inputPerMTok: 3, outputPerMTok: 15 } });
    const seen: PricedUsage[] = [];
    const result = await loop(client, {
      onUsage: async (usage) => {
        seen.push(usage);
      },
    });
    expect(seen).toEqual([
      costOf({ inputTokens: 1000, outputTokens: 200 }, client.price),
      costOf({ inputTokens: 2000, outputTokens: 300 }, client.price),
    ]);
    expect(seen[0]).toMatchObject({ priced: true });
    expect(seen[0]?.usd).toBeCloseTo(0.006, 10);
    expect(result.usage.inputTokens).toBe(3000);
    expect(result.usage.outputTokens).toBe(500);
    expect(result.usage.usd).toBeCloseTo((3000 * 3 + 500 * 15) / 1_000_000, 10);
    expect(result.usage.priced).toBe(true);
  });

  it("sends the key as a bearer token", async () => {
    const server = await start(scripted([callTool("submit_plan", validPlan)]));
    await loop(clientFor(server, { stream }));
    expect(server.requests[0]?.headers.authorization).toBe(`Bearer ${API_KEY}`);
  });

  it("turns a 503 into LlmUpstreamError", async () => {
    const server = await start(() => ({ status: 503, message: "The engine is overloaded." }));
    const error = await loop(clientFor(server, { stream })).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LlmUpstreamError);
    expect((error as Error).message).toBe(
      "The model provider answered 503 Service Unavailable: The engine is overloaded.",
    );
    expect(error).toMatchObject({ statusCode: 503, retryable: true });
  });

  it("turns a 401 into LlmUpstreamError without the key in the message", async () => {
    const server = await start(() => ({
      status: 401,
      message: `Incorrect API key provided: ${API_KEY}.`,
    }));
    const error = await loop(clientFor(server, { stream })).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LlmUpstreamError);
    const message = (error as Error).message;
    expect(message).toMatch(/^The model provider answered 401 Unauthorized: Incorrect API key/);
    expect(message).not.toContain(API_KEY);
    expect(message).not.toContain(API_KEY.slice(8));
    expect(error).toMatchObject({ statusCode: 401, retryable: false });
  });
});

describe("runToolLoop", () => {
  it("fails with LlmNotConfiguredError when no model is configured", async () => {
    const client = createModelClient(undefined);
    expect(client.configured).toBe(false);
    expect(() => requireModel(client)).toThrow(LlmNotConfiguredError);
    const error = await runToolLoop({
      client,
      system: "s",
      prompt: "p",
      tools: [],
      finishTools: [submitPlanTool],
      maxSteps: 3,
      onUsage: async () => {},
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LlmNotConfiguredError);
    expect((error as Error).message).toBe(
      "No model is configured: set LLM_API_KEY (or ANTHROPIC_API_KEY / OPENAI_API_KEY), or LLM_BASE_URL for an OpenAI-compatible server, and optionally LLM_PROVIDER and LLM_MODEL.",
    );
    // a provider without its key is no better
    const keyless = createModelClient({
      provider: "anthropic",
      stream: true,
      timeoutMs: 1000,
      maxRetries: 0,
    });
    expect(keyless).toEqual({ configured: false, reason: NOT_CONFIGURED_MESSAGE });
  });

  it("uses each provider's default model and its list price", () => {
    const base = { apiKey: API_KEY, stream: true, timeoutMs: 1000, maxRetries: 0 };
    const anthropic = requireModel(createModelClient({ provider: "anthropic", ...base }));
    expect(anthropic.modelId).toBe("claude-opus-5-5");
    expect(anthropic.price).toEqual({
      inputPerMTok: 4,
      outputPerMTok: 20,
      cacheReadPerMTok: expect.closeTo(0.4, 12),
      cacheWritePerMTok: 5,
      priced: true,
    });
    const openai = requireModel(createModelClient({ provider: "openai", ...base }));
    expect(openai.modelId).toBe("gpt-5.6");
    expect(openai.price.priced).toBe(true);
    const local = requireModel(
      createModelClient({
        provider: "openai-compatible",
        baseUrl: "http://127.0.0.1:1/v1",
        ...base,
      }),
    );
    expect(local.modelId).toBe("local-model");
    expect(local.price).toMatchObject({ inputPerMTok: 0, outputPerMTok: 0, priced: false });
  });

  it("talks to OpenAI through Chat Completions", async () => {
    const server = await start(scripted([callTool("submit_plan", validPlan)]));
    const client = requireModel(
      createModelClient({
        provider: "openai",
        baseUrl: server.baseUrl,
        apiKey: API_KEY,
        model: "gpt-5.4",
        stream: true,
        timeoutMs: 10_000,
        maxRetries: 0,
      }),
    );
    const result = await loop(client);
    expect(result.tool).toBe("submit_plan");
    expect(server.requests[0]?.model).toBe("gpt-5.4");
    expect(server.requests[0]?.headers.authorization).toBe(`Bearer ${API_KEY}`);
    expect(result.usage.usd).toBeCloseTo((10 * 2.5 + 5 * 15) / 1_000_000, 12);
  });

  it("retries a 503 as often as maxRetries allows", async () => {
    const server = await start(
      scripted([
        { status: 503, message: "busy", headers: { "retry-after-ms": "1" } },
        callTool("submit_plan", validPlan),
      ]),
    );
    const result = await loop(clientFor(server, { maxRetries: 1 }));
    expect(result.tool).toBe("submit_plan");
    expect(server.requests).toHaveLength(2);
  });

  it("falls back to toolChoice auto when the server refuses required, and remembers it", async () => {
    const answers = scripted([
      { text: "Hello." },
      callTool("submit_plan", validPlan),
      callTool("submit_plan", validPlan),
    ]);
    const server = await start((request) => {
      const choice = (request.body as { tool_choice?: unknown }).tool_choice;
      if (choice === "required") {
        return { status: 400, message: "tool_choice 'required' is not supported by this server" };
      }
      return answers(request);
    });
    const client = clientFor(server);
    const first = await loop(client);
    // the refused call is not a step; the text-only answer is nudged
    expect(first.steps).toBe(2);
    const second = await loop(client);
    expect(second.steps).toBe(1);
    const choices = server.requests.map((r) => (r.body as { tool_choice?: unknown }).tool_choice);
    expect(choices).toEqual(["required", "auto", "auto", "auto"]);
  });

  it("reports a server it cannot reach", async () => {
    const server = await start(scripted([]));
    const client = clientFor(server);
    await server.close();
    fake = undefined;
    const error = await loop(client).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LlmUpstreamError);
    const host = new URL(server.baseUrl).host;
    expect((error as Error).message).toBe(
      `Could not reach the model provider at ${host}: ECONNREFUSED`,
    );
    expect(error).toMatchObject({ retryable: true });
  });

  it("gives up on a model call after timeoutMs", async () => {
    const server = await start(() => ({ hang: true }));
    const error = await loop(clientFor(server, { timeoutMs: 300 })).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LlmUpstreamError);
    expect((error as Error).message).toBe("The model provider did not answer within 300 ms.");
  });

  it.each([false, true])("stops at once when the signal aborts (stream: %s)", async (stream) => {
    const server = await start(() => ({ hang: true }));
    const controller = new AbortController();
    const reason = new Error("task cancelled");
    const pending = loop(clientFor(server, { stream }), { signal: controller.signal });
    while (server.requests.length === 0) await new Promise((r) => setImmediate(r));
    controller.abort(reason);
    await expect(pending).rejects.toBe(reason);
  });

  it("cuts very long tool results in the middle", async () => {
    const server = await start(
      scripted([callTool("read_file", { path: "big.txt" }), callTool("submit_plan", validPlan)]),
    );
    await loop(clientFor(server), { maxToolResultChars: 1000 });
    const result = lastToolResult(server.requests[1]!) ?? "";
    expect(result.length).toBeLessThan(1200);
    expect(result).toContain("99000 characters omitted");
    expect(result.startsWith("x".repeat(700))).toBe(true);
    expect(result.endsWith("x".repeat(300))).toBe(true);
  });
});

describe("a tool's own JSON Schema", () => {
  it("is sent to the model as it is, its $refs not inlined", async () => {
    const own = {
      type: "object",
      properties: { left: { $ref: "#/$defs/node" }, right: { $ref: "#/$defs/node" } },
      $defs: { node: { type: "object", properties: { name: { type: "string" } } } },
    };
    const lookup: ExecutableTool = {
      name: "mcp__docs__lookup",
      description: "An MCP server's tool.",
      input: z.record(z.string(), z.unknown()),
      inputJsonSchema: own,
      execute: async () => "found",
    };
    const server = await start(
      scripted([
        callTool("mcp__docs__lookup", { left: { name: "a" } }),
        callTool("submit_plan", validPlan),
      ]),
    );
    await loop(clientFor(server), { tools: [lookup] });
    const sent = (
      server.requests[0]!.body as {
        tools: Array<{ function: { name: string; parameters: unknown } }>;
      }
    ).tools.find((t) => t.function.name === "mcp__docs__lookup");
    expect(sent?.function.parameters).toEqual(own);
    expect(toolResults(server.requests[1]!).map((r) => r.content)).toEqual(["found"]);
  });
});
