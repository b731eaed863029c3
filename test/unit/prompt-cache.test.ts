import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { providerUsageOf, usageOf } from "../../src/llm/cache.js";
import { costOf, priceFor } from "../../src/llm/prices.js";
import { createModelClient, requireModel } from "../../src/llm/provider.js";
import { runToolLoop } from "../../src/llm/tool-loop.js";
import type { ExecutableTool, ToolSpec } from "../../src/llm/types.js";
import { startAnthropicFake, type AnthropicFake } from "../helpers/anthropic-fake.js";

let fake: AnthropicFake | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

const readTool: ExecutableTool<{ path: string }> = {
  name: "read_file",
  description: "Read a file.",
  input: z.strictObject({ path: z.string() }),
  async execute({ path }) {
    return `${path}\n${"const answer = 42;\n".repeat(300)}`;
  },
};
const finish: ToolSpec<{ summary: string }> = {
  name: "finish",
  description: "Done.",
  input: z.strictObject({ summary: z.string() }),
};

describe("Anthropic prompt caching", () => {
  it("marks the system prompt and the history, and prices reads and writes apart", async () => {
    fake = await startAnthropicFake((turn) =>
      turn < 5
        ? { name: "read_file", input: { path: `f${turn}.ts` } }
        : { name: "finish", input: { summary: "ok" } },
    );
    const client = requireModel(
      createModelClient({
        provider: "anthropic",
        baseUrl: fake.baseUrl,
        apiKey: "sk-ant-test-000000000000000000",
        model: "claude-sonnet-4-5",
        stream: false,
        timeoutMs: 10_000,
        maxRetries: 0,
      }),
    );
    const seen: Array<{ cached: number; written: number }> = [];
    const result = await runToolLoop({
      client,
      system: `You implement plans. ${"Follow the conventions. ".repeat(300)}`,
      prompt: "<task>read the files</task>",
      tools: [readTool],
      finishTools: [finish],
      maxSteps: 10,
      onUsage: async (u) => {
        seen.push({ cached: u.cachedInputTokens ?? 0, written: u.cacheWriteTokens ?? 0 });
      },
    });
    expect(result.steps).toBe(6);
    for (const request of fake.requests) {
      const system = request.body.system as Array<{ cache_control?: unknown }>;
      expect(system.at(-1)!.cache_control).toEqual({ type: "ephemeral" });
      expect(request.breakpoints).toBeGreaterThanOrEqual(2);
      expect(request.breakpoints).toBeLessThanOrEqual(4);
    }
    // from the second call on, the previous call's prompt is read from the cache
    for (const [i, request] of fake.requests.entries()) {
      if (i > 0) expect(request.usage.cache_read_input_tokens).toBeGreaterThan(0);
      expect(seen[i]).toEqual({
        cached: request.usage.cache_read_input_tokens,
        written: request.usage.cache_creation_input_tokens,
      });
    }
    const prompt = fake.requests.reduce(
      (n, r) =>
        n +
        r.usage.input_tokens +
        r.usage.cache_read_input_tokens +
        r.usage.cache_creation_input_tokens,
      0,
    );
    // inputTokens is the whole prompt; the cached part is billed at 0.1×, so less than that
    expect(result.usage.inputTokens).toBe(prompt);
    const price = priceFor("anthropic", "claude-sonnet-4-5");
    const uncachedUsd =
      (prompt * price.inputPerMTok + result.usage.outputTokens * price.outputPerMTok) / 1e6;
    expect(result.usage.usd).toBeLessThan(uncachedUsd * 0.8);
  });

  it("counts the cache of an answer without a tool call, and sends its thinking back", async () => {
    const thinking = { thinking: "The file is read; the summary is next.", signature: "sig-1" };
    fake = await startAnthropicFake((turn) =>
      turn === 0
        ? { name: "read_file", input: { path: "f0.ts" } }
        : turn === 1
          ? { text: "Reading done.", thinking }
          : { name: "finish", input: { summary: "ok" } },
    );
    const client = requireModel(
      createModelClient({
        provider: "anthropic",
        baseUrl: fake.baseUrl,
        apiKey: "sk-ant-test-000000000000000000",
        model: "claude-sonnet-4-5",
        stream: false,
        timeoutMs: 10_000,
        maxRetries: 0,
      }),
    );
    const seen: Array<{ input: number; cached: number; written: number }> = [];
    const result = await runToolLoop({
      client,
      system: `You implement plans. ${"Follow the conventions. ".repeat(300)}`,
      prompt: "<task>read the file</task>",
      tools: [readTool],
      finishTools: [finish],
      maxSteps: 10,
      onUsage: async (u) => {
        seen.push({
          input: u.inputTokens,
          cached: u.cachedInputTokens ?? 0,
          written: u.cacheWriteTokens ?? 0,
        });
      },
    });
    expect(result.steps).toBe(3);
    expect(seen).toEqual(
      fake.requests.map(({ usage }) => ({
        input:
          usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens,
        cached: usage.cache_read_input_tokens,
        written: usage.cache_creation_input_tokens,
      })),
    );
    expect(seen[1]!.cached).toBeGreaterThan(0);
    // The answer goes back as it came (the thinking block with its signature), then the reminder.
    const messages = fake.requests[2]!.body.messages as Array<{ role: string; content: unknown }>;
    const [answer, reminder] = messages.slice(-2);
    expect(answer?.role).toBe("assistant");
    expect(answer?.content).toEqual([
      { type: "thinking", ...thinking },
      expect.objectContaining({ type: "text", text: "Reading done." }),
    ]);
    expect(JSON.stringify(reminder)).toContain("call finish");
  });
});

describe("usageOf", () => {
  // The AI SDK 6 adds Anthropic's cache reads and writes to its input tokens itself (the
  // first test above checks it over HTTP); these take its usage as it reports it.
  it("keeps Anthropic's cache reads and writes apart within the whole prompt", () => {
    expect(
      usageOf({
        inputTokens: 1000,
        outputTokens: 5,
        inputTokenDetails: { noCacheTokens: 10, cacheReadTokens: 900, cacheWriteTokens: 90 },
      }),
    ).toEqual({ inputTokens: 1000, outputTokens: 5, cachedInputTokens: 900, cacheWriteTokens: 90 });
  });

  it("takes OpenAI's cached tokens as part of the prompt", () => {
    const usage = usageOf({
      inputTokens: 2000,
      outputTokens: 100,
      inputTokenDetails: { noCacheTokens: 464, cacheReadTokens: 1536, cacheWriteTokens: undefined },
    });
    expect(usage).toEqual({
      inputTokens: 2000,
      outputTokens: 100,
      cachedInputTokens: 1536,
      cacheWriteTokens: 0,
    });
    // gpt-5: cached input at $0.125 instead of $1.25 per million
    expect(costOf(usage, priceFor("openai", "gpt-5")).usd).toBeCloseTo(
      (464 * 1.25 + 1536 * 0.125 + 100 * 10) / 1e6,
      12,
    );
  });

  it("reads a provider's own counts as the SDK does", () => {
    const usage = providerUsageOf({
      inputTokens: { total: 1000, noCache: 10, cacheRead: 900, cacheWrite: 90 },
      outputTokens: { total: 5 },
    });
    expect(usageOf(usage)).toEqual({
      inputTokens: 1000,
      outputTokens: 5,
      cachedInputTokens: 900,
      cacheWriteTokens: 90,
    });
  });
});
