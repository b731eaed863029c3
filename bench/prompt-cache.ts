/*
 * Prompt caching: billed input cost of a scripted 30-step task with Anthropic's prompt
 * cache against the same task billed without it.
 *
 * The model is a local Anthropic Messages API (test/helpers/anthropic-fake.ts) that computes
 * cache reads and writes from the cache_control breakpoints it receives, as Anthropic
 * documents them. The task: 29 read_file calls whose results are 6,000-character files, then
 * finish, through runToolLoop with claude-sonnet-4-5's prices. "Without caching" is the same
 * requests with every input token billed at the input price. A second run holds the context
 * window to 48,000 tokens (LLM_CONTEXT_TOKENS) so old results are elided along the way
 * (src/llm/context-budget.ts), which must not wipe out the saving.
 */
import { z } from "zod";
import { priceFor } from "../src/llm/prices.js";
import { createModelClient, requireModel } from "../src/llm/provider.js";
import { runToolLoop } from "../src/llm/tool-loop.js";
import type { ExecutableTool, ToolSpec } from "../src/llm/types.js";
import { startAnthropicFake } from "../test/helpers/anthropic-fake.js";
import type { Benchmark, BenchReport, Check } from "./lib/harness.js";

export const TARGET_SAVING = 0.5;
const STEPS = 30;
const MODEL = "claude-sonnet-4-5";

interface Outcome {
  perCall: Array<{ input: number; read: number; write: number }>;
  withCache: number;
  without: number;
}

async function run(contextTokens: number | undefined): Promise<Outcome> {
  const fake = await startAnthropicFake((turn) =>
    turn < STEPS - 1
      ? { name: "read_file", input: { path: `src/module${turn}.ts` } }
      : { name: "finish", input: { summary: "done" } },
  );
  try {
    const readFile: ExecutableTool<{ path: string }> = {
      name: "read_file",
      description: "Read a file of the repository.",
      input: z.strictObject({ path: z.string() }),
      async execute({ path }) {
        return Array.from(
          { length: 120 },
          (_, i) =>
            `export function ${path.replace(/\W/g, "_")}_${i}(x: number) { return x + ${i}; }`,
        )
          .join("\n")
          .slice(0, 6_000);
      },
    };
    const finish: ToolSpec<{ summary: string }> = {
      name: "finish",
      description: "Call when the work is done.",
      input: z.strictObject({ summary: z.string() }),
    };
    const client = requireModel(
      createModelClient({
        provider: "anthropic",
        baseUrl: fake.baseUrl,
        apiKey: "sk-ant-bench-0000000000000000",
        model: MODEL,
        stream: false,
        timeoutMs: 30_000,
        maxRetries: 0,
        ...(contextTokens ? { contextTokens } : {}),
      }),
    );
    const result = await runToolLoop({
      client,
      system: `You are a senior software engineer implementing an approved plan.\n${"Keep to the repository's conventions. ".repeat(60)}`,
      prompt:
        "<task>Rename the helpers of src/module*.ts</task>\nApproved plan: 1. read each module",
      tools: [readFile],
      finishTools: [finish],
      maxSteps: STEPS,
      onUsage: async () => {},
    });
    if (result.steps !== STEPS) throw new Error(`the task took ${result.steps} steps`);
    const price = priceFor("anthropic", MODEL);
    const perCall = fake.requests.map((r) => ({
      input: r.usage.input_tokens,
      read: r.usage.cache_read_input_tokens,
      write: r.usage.cache_creation_input_tokens,
    }));
    const withCache =
      perCall.reduce(
        (usd, c) =>
          usd +
          c.input * price.inputPerMTok +
          c.read * price.cacheReadPerMTok +
          c.write * price.cacheWritePerMTok,
        0,
      ) / 1e6;
    const without =
      perCall.reduce((usd, c) => usd + (c.input + c.read + c.write) * price.inputPerMTok, 0) / 1e6;
    // The loop's own accounting must agree with the provider's bill.
    const billedInput = result.usage.usd - (result.usage.outputTokens * price.outputPerMTok) / 1e6;
    if (Math.abs(billedInput - withCache) > 1e-9) {
      throw new Error(`the loop priced ${billedInput} USD of input, the fake billed ${withCache}`);
    }
    return { perCall, withCache, without };
  } finally {
    await fake.close();
  }
}

export const promptCache: Benchmark = {
  name: "prompt-cache",
  description: "billed input cost of a 30-step task with Anthropic prompt caching vs without",
  async run(): Promise<BenchReport> {
    const checks: Check[] = [];
    const info: Record<string, unknown> = {};
    for (const [label, context] of [
      ["whole history", undefined],
      ["48k-token window (elision)", 48_000],
    ] as const) {
      const outcome = await run(context);
      const saving = 1 - outcome.withCache / outcome.without;
      const sum = (k: "input" | "read" | "write") => outcome.perCall.reduce((n, c) => n + c[k], 0);
      console.log(
        `  ${label}: input tokens uncached ${sum("input")}, cache reads ${sum("read")}, cache writes ${sum("write")}; ` +
          `billed input $${outcome.withCache.toFixed(4)} with caching vs $${outcome.without.toFixed(4)} without ` +
          `(${(saving * 100).toFixed(1)}% lower)`,
      );
      console.log(
        `    per call (uncached/read/write): ${outcome.perCall.map((c) => `${c.input}/${c.read}/${c.write}`).join(" ")}`,
      );
      checks.push({
        name: `input cost saved by caching, ${label}`,
        value: saving,
        target: TARGET_SAVING,
        pass: saving >= TARGET_SAVING,
        detail: `$${outcome.withCache.toFixed(4)} vs $${outcome.without.toFixed(4)} over ${STEPS} calls (${MODEL} prices)`,
      });
      info[label] = outcome;
    }
    return { subjects: [], checks, info };
  },
};
