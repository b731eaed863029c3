import { afterEach, describe, expect, it } from "vitest";
import type { ModelMessage } from "ai";
import { z } from "zod";
import {
  contextWindowOf,
  DEFAULT_CONTEXT_TOKENS,
  estimateTokens,
  fitToBudget,
  inputBudget,
} from "../../src/llm/context-budget.js";
import { createModelClient, requireModel } from "../../src/llm/provider.js";
import { runToolLoop } from "../../src/llm/tool-loop.js";
import type { ExecutableTool, ToolSpec } from "../../src/llm/types.js";
import {
  startFakeModel,
  toolResults,
  type FakeModel,
  type FakeModelRequest,
} from "../helpers/fake-model.js";

let fake: FakeModel | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

describe("context windows", () => {
  it("come from the table, the override, or the default", () => {
    expect(contextWindowOf("anthropic", "claude-opus-5-5")).toBe(200_000);
    expect(contextWindowOf("openai", "gpt-5.6")).toBe(400_000);
    expect(contextWindowOf("openai", "gpt-4o-mini")).toBe(128_000);
    expect(contextWindowOf("openai-compatible", "qwen3-coder")).toBe(DEFAULT_CONTEXT_TOKENS);
    expect(contextWindowOf("anthropic", "claude-opus-5-5", 50_000)).toBe(50_000);
    // room for the answer and a safety margin for the rough estimate
    expect(inputBudget(200_000, 16_000)).toBeLessThan(200_000 - 16_000);
  });
});

describe("fitToBudget", () => {
  const call = (id: string, path: string): ModelMessage => ({
    role: "assistant",
    content: [{ type: "tool-call", toolCallId: id, toolName: "read_file", input: { path } }],
  });
  const result = (id: string, text: string): ModelMessage => ({
    role: "tool",
    content: [
      {
        type: "tool-result",
        toolCallId: id,
        toolName: "read_file",
        output: { type: "text", value: text },
      },
    ],
  });

  it("elides the oldest results first and keeps the task and the recent steps whole", () => {
    const task: ModelMessage = { role: "user", content: `Task: ${"t".repeat(2000)}` };
    const messages: ModelMessage[] = [task];
    for (let i = 0; i < 10; i++) {
      messages.push(call(`c${i}`, `src/f${i}.ts`), result(`c${i}`, `${i}`.repeat(8000)));
    }
    const before = messages.map((m) => JSON.stringify(m));
    const report = fitToBudget(messages, 500, 12_000);
    expect(report.tokens).toBeLessThanOrEqual(12_000);
    expect(report.elided).toBeGreaterThan(0);
    expect(messages[0]).toBe(task);
    // the last two steps are untouched
    expect(messages.slice(-4).map((m) => JSON.stringify(m))).toEqual(before.slice(-4));
    const first = JSON.stringify(messages[2]);
    expect(first).toContain("[elided: read_file src/f0.ts, 8,000 chars");
    // pairing of calls and results survives
    expect(messages).toHaveLength(21);
  });

  it("elides in chunks: below the budget nothing changes, so the prefix stays stable", () => {
    const messages: ModelMessage[] = [{ role: "user", content: "task" }];
    let changes = 0;
    for (let i = 0; i < 40; i++) {
      messages.push(call(`c${i}`, `f${i}`), result(`c${i}`, "x".repeat(4000)));
      if (fitToBudget(messages, 100, 10_000).elided > 0) changes++;
      expect(estimateTokens(messages) + 100).toBeLessThanOrEqual(10_000);
    }
    // 40 steps of ~1,000 tokens against a 10,000-token budget: a few chunked elisions
    expect(changes).toBeGreaterThan(0);
    expect(changes).toBeLessThanOrEqual(10);
  });
});

describe("a 60-step loop with 40,000-character results", () => {
  it("keeps every request under the budget and still finishes", async () => {
    const STEPS = 60;
    const CONTEXT = 64_000;
    const readTool: ExecutableTool<{ path: string }> = {
      name: "read_file",
      description: "Read a file.",
      input: z.strictObject({ path: z.string() }),
      async execute({ path }) {
        // distinct text per file, 40,000 characters
        return Array.from({ length: 800 }, (_, i) => `${path}:${i} ${"lorem ipsum ".repeat(3)}`)
          .join("\n")
          .padEnd(40_000, "#")
          .slice(0, 40_000);
      },
    };
    const finish: ToolSpec<{ summary: string }> = {
      name: "finish",
      description: "Done.",
      input: z.strictObject({ summary: z.string() }),
    };
    fake = await startFakeModel((request: FakeModelRequest) => {
      const turn = request.messages.filter((m) => m.role === "assistant").length;
      return turn < STEPS - 1
        ? { toolCalls: [{ name: "read_file", arguments: { path: `src/file${turn}.ts` } }] }
        : { toolCalls: [{ name: "finish", arguments: { summary: "read everything" } }] };
    });
    const client = requireModel(
      createModelClient({
        provider: "openai-compatible",
        baseUrl: fake.baseUrl,
        model: "fake-coder",
        stream: false,
        timeoutMs: 10_000,
        maxRetries: 0,
        contextTokens: CONTEXT,
      }),
    );
    const result = await runToolLoop({
      client,
      system: "You change repositories.",
      prompt: "<task>Read every file</task>\nApproved plan: 1. read them all",
      tools: [readTool],
      finishTools: [finish],
      maxSteps: STEPS,
      onUsage: async () => {},
    });
    expect(result).toMatchObject({ tool: "finish", steps: STEPS });
    expect(fake.requests).toHaveLength(STEPS);

    const budget = inputBudget(CONTEXT);
    // what went over the wire: messages and tools, as the provider counts them (JSON / 4)
    const sizes = fake.requests.map((r) =>
      estimateTokens({ messages: r.messages, tools: (r.body as { tools: unknown }).tools }),
    );
    for (const size of sizes) expect(size).toBeLessThanOrEqual(budget);
    const last = fake.requests.at(-1)!;
    // the task is kept whole, the latest results too, old ones are notes
    expect(JSON.stringify(last.messages)).toContain("<task>Read every file</task>");
    const results = toolResults(last);
    expect(results).toHaveLength(STEPS - 1);
    expect(results.at(-1)!.content).toHaveLength(40_000);
    expect(results[0]!.content).toMatch(/^\[elided: read_file src\/file0\.ts, 40,000 chars/);
    // without the budget the last request would hold 59 × 40,000 characters
    expect(sizes.at(-1)!).toBeLessThan((STEPS - 1) * 10_000);
    process.stdout.write(
      `long loop: budget ${budget} tokens; per-call estimated input tokens: ${sizes.join(" ")}\n`,
    );
  });
});
