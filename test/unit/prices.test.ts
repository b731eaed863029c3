import { describe, expect, it } from "vitest";
import { costOf, priceFor } from "../../src/llm/prices.js";

describe("priceFor", () => {
  it("prices known models, their dated snapshots and aliases", () => {
    expect(priceFor("anthropic", "claude-sonnet-4-5")).toEqual({
      inputPerMTok: 3,
      outputPerMTok: 15,
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
    expect(priceFor("openai", "gpt-5.4-turbo-preview")).toEqual({
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
      priced: false,
    });
    expect(
      priceFor("openai-compatible", "qwen3-coder", { inputPerMTok: 0.5, outputPerMTok: 1 }),
    ).toEqual({ inputPerMTok: 0.5, outputPerMTok: 1, priced: true });
    expect(
      priceFor("anthropic", "claude-sonnet-4-5", { inputPerMTok: 1, outputPerMTok: 2 }),
    ).toEqual({ inputPerMTok: 1, outputPerMTok: 2, priced: true });
  });
});

describe("costOf", () => {
  it("charges input and output tokens at their own rates", () => {
    const price = priceFor("anthropic", "claude-sonnet-4-5");
    expect(costOf({ inputTokens: 1_000_000, outputTokens: 1_000_000 }, price)).toEqual({
      inputTokens: 1_000_000,
      outputTokens: 1_000_000,
      usd: 18,
      priced: true,
    });
    const small = costOf({ inputTokens: 1200, outputTokens: 300 }, price);
    expect(small.usd).toBeCloseTo(0.0036 + 0.0045, 12);
  });

  it("costs nothing and says so for an unpriced model", () => {
    expect(
      costOf({ inputTokens: 5000, outputTokens: 5000 }, priceFor("openai-compatible", "x")),
    ).toEqual({ inputTokens: 5000, outputTokens: 5000, usd: 0, priced: false });
  });
});
