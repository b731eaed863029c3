import type { ModelProvider, PricedUsage, Usage } from "./types.js";

/*
 * List prices in USD per million tokens, as published by the providers (checked November
 * 2026). Where a provider runs a temporary promotion the list price is kept, so budgets err
 * on the safe side. Models that are not listed are reported as unpriced; operators can set a
 * price in the model settings.
 *
 * Prompt-cache prices (src/llm/cache.ts), as multiples of the input price:
 * - Anthropic: reads 0.1×, writes 1.25× (5-minute cache), for every model
 *   (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching#pricing).
 * - OpenAI: reads at the "cached input" price of https://platform.openai.com/docs/pricing,
 *   which varies by family (gpt-5: 0.1×, gpt-4.1 and o3/o4-mini: 0.25×, gpt-4o and o1:
 *   0.5×, the -pro models: no discount); writing costs nothing extra.
 * - An operator's override: Anthropic's ratios for Anthropic, else the input price.
 */

/** Price of one model, USD per million tokens; `priced` is false when nothing is known. */
export interface ModelPrice {
  inputPerMTok: number;
  outputPerMTok: number;
  /** Input tokens read from the prompt cache. */
  cacheReadPerMTok: number;
  /** Input tokens written to the prompt cache. */
  cacheWritePerMTok: number;
  priced: boolean;
}

const ANTHROPIC_CACHE_READ = 0.1;
const ANTHROPIC_CACHE_WRITE = 1.25;
/** OpenAI's cached-input ratio by model id prefix (see the header); first match wins. */
const OPENAI_CACHE_READ: ReadonlyArray<readonly [prefix: string, ratio: number]> = [
  ["gpt-5-pro", 1],
  ["gpt-5.2-pro", 1],
  ["gpt-5.4-pro", 1],
  ["gpt-5.5-pro", 1],
  ["gpt-5", 0.1],
  ["gpt-4.1", 0.25],
  ["gpt-4o", 0.5],
  ["o3-pro", 1],
  ["o1-pro", 1],
  ["o3-mini", 0.5],
  ["o3", 0.25],
  ["o4-mini", 0.25],
  ["o1", 0.5],
];

/** An operator-configured price; it wins over the table. */
export interface PriceOverride {
  inputPerMTok: number;
  outputPerMTok: number;
}

type PriceRow = readonly [model: string, inputPerMTok: number, outputPerMTok: number];

const ANTHROPIC: readonly PriceRow[] = [
  ["claude-fable-5-1", 10, 50],
  ["claude-fable-5", 10, 50],
  ["claude-opus-5-5", 4, 20],
  ["claude-opus-5", 5, 25],
  ["claude-sonnet-5-5", 2, 10],
  ["claude-sonnet-5", 2, 10],
  ["claude-opus-4-8", 5, 25],
  ["claude-opus-4-7", 5, 25],
  ["claude-opus-4-6", 5, 25],
  ["claude-opus-4-5", 5, 25],
  ["claude-opus-4-1", 15, 75],
  ["claude-opus-4-0", 15, 75],
  ["claude-opus-4", 15, 75],
  ["claude-sonnet-4-6", 3, 15],
  ["claude-sonnet-4-5", 3, 15],
  ["claude-sonnet-4-0", 3, 15],
  ["claude-sonnet-4", 3, 15],
  ["claude-haiku-4-5", 1, 5],
  ["claude-3-7-sonnet", 3, 15],
  ["claude-3-5-haiku", 0.8, 4],
];

const OPENAI: readonly PriceRow[] = [
  ["gpt-5.6", 5, 30], // alias of gpt-5.6-sol
  ["gpt-5.6-sol", 5, 30],
  ["gpt-5.6-terra", 2.5, 15],
  ["gpt-5.6-luna", 1, 6],
  ["gpt-5.5", 5, 30],
  ["gpt-5.5-pro", 30, 180],
  ["gpt-5.4", 2.5, 15],
  ["gpt-5.4-pro", 30, 180],
  ["gpt-5.4-mini", 0.75, 4.5],
  ["gpt-5.4-nano", 0.2, 1.25],
  ["gpt-5.2", 1.75, 14],
  ["gpt-5.2-chat", 1.75, 14],
  ["gpt-5.2-pro", 21, 168],
  ["gpt-5.1", 1.25, 10],
  ["gpt-5.1-chat", 1.25, 10],
  ["gpt-5", 1.25, 10],
  ["gpt-5-chat", 1.25, 10],
  ["gpt-5-pro", 15, 120],
  ["gpt-5-mini", 0.25, 2],
  ["gpt-5-nano", 0.05, 0.4],
  ["gpt-4.1", 2, 8],
  ["gpt-4.1-mini", 0.4, 1.6],
  ["gpt-4.1-nano", 0.1, 0.4],
  ["gpt-4o", 2.5, 10],
  ["gpt-4o-mini", 0.15, 0.6],
  ["o4-mini", 1.1, 4.4],
  ["o3", 2, 8],
  ["o3-pro", 20, 80],
  ["o3-mini", 1.1, 4.4],
  ["o1", 15, 60],
  ["o1-pro", 150, 600],
  ["o1-mini", 1.1, 4.4],
];

const TABLES: Record<ModelProvider, readonly PriceRow[]> = {
  anthropic: ANTHROPIC,
  openai: OPENAI,
  // Local and third-party servers bill (or don't) on their own terms.
  "openai-compatible": [],
};

// What may follow a table entry: a dated snapshot or an alias tag, nothing else. A plain
// prefix match would price "gpt-5-pro" as "gpt-5" or "gpt-5.4-nano" as "gpt-5.4".
const SNAPSHOT_SUFFIX = /^-(?:\d{8}|\d{4}-\d{2}-\d{2}|latest|v\d+(?::\d+)?)$/;

function matches(model: string, entry: string): boolean {
  if (model === entry) return true;
  return model.startsWith(entry) && SNAPSHOT_SUFFIX.test(model.slice(entry.length));
}

/** The price of a model: the override if given, else the table, else unpriced (zero). */
export function priceFor(
  provider: ModelProvider,
  model: string,
  override?: PriceOverride,
): ModelPrice {
  if (override) {
    const anthropic = provider === "anthropic";
    return {
      inputPerMTok: override.inputPerMTok,
      outputPerMTok: override.outputPerMTok,
      cacheReadPerMTok: override.inputPerMTok * (anthropic ? ANTHROPIC_CACHE_READ : 1),
      cacheWritePerMTok: override.inputPerMTok * (anthropic ? ANTHROPIC_CACHE_WRITE : 1),
      priced: true,
    };
  }
  const id = model.trim().toLowerCase();
  const row = TABLES[provider].find(([entry]) => matches(id, entry));
  if (!row) {
    return {
      inputPerMTok: 0,
      outputPerMTok: 0,
      cacheReadPerMTok: 0,
      cacheWritePerMTok: 0,
      priced: false,
    };
  }
  const input = row[1];
  const read =
    provider === "anthropic"
      ? ANTHROPIC_CACHE_READ
      : (OPENAI_CACHE_READ.find(([prefix]) => id.startsWith(prefix))?.[1] ?? 1);
  const write = provider === "anthropic" ? ANTHROPIC_CACHE_WRITE : 1;
  return {
    inputPerMTok: input,
    outputPerMTok: row[2],
    cacheReadPerMTok: input * read,
    cacheWritePerMTok: input * write,
    priced: true,
  };
}

/**
 * The cost of one model call's tokens at a price: uncached input at the input price, cache
 * reads and writes at theirs (inputTokens includes both), output at the output price.
 */
export function costOf(usage: Usage, price: ModelPrice): PricedUsage {
  const cached = usage.cachedInputTokens ?? 0;
  const written = usage.cacheWriteTokens ?? 0;
  const uncached = Math.max(0, usage.inputTokens - cached - written);
  const usd =
    (uncached * price.inputPerMTok +
      cached * price.cacheReadPerMTok +
      written * price.cacheWritePerMTok +
      usage.outputTokens * price.outputPerMTok) /
    1_000_000;
  return {
    inputTokens: usage.inputTokens,
    outputTokens: usage.outputTokens,
    cachedInputTokens: cached,
    cacheWriteTokens: written,
    usd,
    priced: price.priced,
  };
}
