import { describe, expect, it } from "vitest";
import { costOf, priceFor } from "../../src/llm/prices.js";

describe("priceFor", () => {
  it("prices known models, their dated snapshots and aliases", () => {
    expect(priceFor("anthropic", "claude-sonnet-4-5")).toEqual({
      inputPerMTok: 3,
      outputPerMTok: 15,
      cacheReadPerMTok: expect.closeTo(0.3, 12),
      cacheWritePerMTok: 3.75,
      priced: true,
    });
    expect(priceFor("anthropic", "claude-sonnet-4-5-20250929").inputPerMTok).toBe(3);
    expect(priceFor("anthropic", "claude-opus-4-20250514").inputPerMTok).toBe(15);
    expect(priceFor("anthropic", "claude-opus-4-5-20251101").inputPerMTok).toBe(5);
    expect(priceFor("anthropic", "claude-haiku-4-5").outputPerMTok).toBe(5);
    expect(priceFor("anthropic", "claude-3-7-sonnet-latest").inputPerMTok).toBe(3);
    expect(priceFor("openai", "gpt-4o-2024-08-06").inputPerMTok).toBe(2.5);
    expect(priceFor("openai", "GPT-4.1-mini").inputPerMTok).toBe(0.4);
    expect(priceFor("openai", "gpt-5-chat-latest").outputPerMTok).toBe(10);
    expect(priceFor("openai", "o3").outputPerMTok).toBe(8);
  });

  it("does not price a variant as its cheaper base model", () => {
    expect(priceFor("openai", "gpt-5-pro").inputPerMTok).toBe(15);
    expect(priceFor("openai", "gpt-5-mini").inputPerMTok).toBe(0.25);
    expect(priceFor("openai", "gpt-5.4-nano").inputPerMTok).toBe(0.2);
    expect(priceFor("openai", "o3-pro").inputPerMTok).toBe(20);
    // an unknown variant is unpriced rather than guessed from a prefix
    expect(priceFor("openai", "gpt-5.4-turbo-preview")).toMatchObject({
      inputPerMTok: 0,
      outputPerMTok: 0,
      priced: false,
    });
    expect(priceFor("anthropic", "claude-opus-4-9").priced).toBe(false);
  });

  it("leaves OpenAI-compatible and unknown models unpriced unless overridden", () => {
    expect(priceFor("openai-compatible", "gpt-4o").priced).toBe(false);
    expect(priceFor("openai-compatible", "qwen3-coder")).toEqual({
      inputPerMTok: 0,
      outputPerMTok: 0,
      cacheReadPerMTok: 0,
      cacheWritePerMTok: 0,
      priced: false,
    });
    // an override prices cached tokens like others, except at Anthropic's fixed ratios
    expect(
      priceFor("openai-compatible", "qwen3-coder", { inputPerMTok: 0.5, outputPerMTok: 1 }),
    ).toEqual({
      inputPerMTok: 0.5,
      outputPerMTok: 1,
      cacheReadPerMTok: 0.5,
      cacheWritePerMTok: 0.5,
      priced: true,
    });
    expect(
      priceFor("anthropic", "claude-sonnet-4-5", { inputPerMTok: 1, outputPerMTok: 2 }),
    ).toEqual({
      inputPerMTok: 1,
      outputPerMTok: 2,
      cacheReadPerMTok: 0.1,
      cacheWritePerMTok: 1.25,
      priced: true,
    });
  });

  it("prices cached input by each provider's published ratio", () => {
    expect(priceFor("anthropic", "claude-opus-5-5")).toMatchObject({
      cacheReadPerMTok: expect.closeTo(0.4, 12),
      cacheWritePerMTok: 5,
    });
    expect(priceFor("openai", "gpt-5").cacheReadPerMTok).toBeCloseTo(0.125, 12);
    expect(priceFor("openai", "gpt-4.1").cacheReadPerMTok).toBeCloseTo(0.5, 12);
    expect(priceFor("openai", "gpt-4o").cacheReadPerMTok).toBeCloseTo(1.25, 12);
    expect(priceFor("openai", "o4-mini").cacheReadPerMTok).toBeCloseTo(0.275, 12);
    // no cached-input discount for the pro models, no write premium at OpenAI
    expect(priceFor("openai", "gpt-5-pro").cacheReadPerMTok).toBe(15);
    expect(priceFor("openai", "gpt-5").cacheWritePerMTok).toBe(1.25);
  });
});

describe("costOf", () => {
  it("charges input and output tokens at their own rates", () => {
    const price = priceFor("anthropic", "claude-sonnet-4-5");
    expect(costOf({ inputTokens: 1_000_000, outputTokens: 1_000_000 }, price)).toEqual({
      inputTokens: 1_000_000,
      outputTokens: 1_000_000,
      cachedInputTokens: 0,
      cacheWriteTokens: 0,
      usd: 18,
      priced: true,
    });
    const small = costOf({ inputTokens: 1200, outputTokens: 300 }, price);
    expect(small.usd).toBeCloseTo(0.0036 + 0.0045, 12);
  });

  it("charges cache reads and writes apart from the uncached input", () => {
    const price = priceFor("anthropic", "claude-sonnet-4-5");
    // 1M prompt tokens: 600k read from the cache, 300k written, 100k uncached
    const cost = costOf(
      {
        inputTokens: 1_000_000,
        outputTokens: 0,
        cachedInputTokens: 600_000,
        cacheWriteTokens: 300_000,
      },
      price,
    );
    expect(cost.usd).toBeCloseTo(0.6 * 0.3 + 0.3 * 3.75 + 0.1 * 3, 12);
    expect(cost).toMatchObject({ cachedInputTokens: 600_000, cacheWriteTokens: 300_000 });
  });

  it("costs nothing and says so for an unpriced model", () => {
    expect(
      costOf({ inputTokens: 5000, outputTokens: 5000 }, priceFor("openai-compatible", "x")),
    ).toEqual({
      inputTokens: 5000,
      outputTokens: 5000,
      cachedInputTokens: 0,
      cacheWriteTokens: 0,
      usd: 0,
      priced: false,
    });
  });
});
