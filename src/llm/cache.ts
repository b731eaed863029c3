import type { ModelMessage, SystemModelMessage } from "ai";
import type { ModelProvider, Usage } from "./types.js";

/*
 * Prompt caching. Every step of the tool loop re-sends the whole conversation, so all but
 * the newest messages were already sent in the step before.
 *
 * Anthropic caches only up to explicit breakpoints (`cache_control` on a block; at most 4
 * per request) and reads a cached prefix at 0.1× the input price, writes it at 1.25×
 * (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching). The breakpoints:
 *   1. the system prompt: caches the tools and the system prompt, which come first;
 *   2. the end of the history as the previous step sent it: this step reads it back;
 *   3. the end of this step's history: the next step reads it.
 * The system prompt goes in as a system message because only messages carry provider
 * options in the AI SDK.
 *
 * OpenAI caches prompt prefixes of 1,024 tokens or more by itself
 * (https://platform.openai.com/docs/guides/prompt-caching); nothing to mark, only the
 * cached tokens to count. Either way the prefix must stay byte-stable between steps, which
 * is why context-budget.ts elides old results in chunks rather than a little every step.
 */

const EPHEMERAL = { anthropic: { cacheControl: { type: "ephemeral" } } } as const;

export interface CachedRequest {
  /** The system prompt as a separate parameter, when not moved into `messages`. */
  system: string | undefined;
  messages: ModelMessage[];
}

/**
 * The request's system prompt and messages with cache breakpoints for the provider.
 * `previousLength`: how many messages the previous call of the same loop sent (0 for the
 * first call). The stored history is not changed: marked messages are copies.
 */
export function withCacheBreakpoints(
  provider: ModelProvider,
  system: string,
  messages: readonly ModelMessage[],
  previousLength: number,
): CachedRequest {
  if (provider !== "anthropic") return { system, messages: [...messages] };
  const marked = new Set<number>([messages.length - 1]);
  if (previousLength > 0 && previousLength < messages.length) marked.add(previousLength - 1);
  const systemMessage: SystemModelMessage = {
    role: "system",
    content: system,
    providerOptions: EPHEMERAL,
  };
  return {
    system: undefined,
    messages: [
      systemMessage,
      ...messages.map((m, i) => (marked.has(i) ? { ...m, providerOptions: EPHEMERAL } : m)),
    ],
  };
}

/** What the AI SDK reports about one call's tokens (v5 fields, and v6's details if present). */
export interface SdkUsage {
  inputTokens?: number | undefined;
  outputTokens?: number | undefined;
  cachedInputTokens?: number | undefined;
  inputTokenDetails?: {
    noCacheTokens?: number | undefined;
    cacheReadTokens?: number | undefined;
    cacheWriteTokens?: number | undefined;
  };
}

/**
 * One call's usage with cached, cache-write and uncached input apart; `inputTokens` is
 * always the whole prompt. Anthropic reports `input_tokens` without the cache reads and
 * writes (the AI SDK 5 passes it on as inputTokens, the write count only in the provider
 * metadata); OpenAI reports the whole prompt with the cached part inside it.
 */
export function usageOf(
  provider: ModelProvider,
  usage: SdkUsage,
  providerMetadata: Record<string, Record<string, unknown> | undefined> | undefined,
): Usage {
  const output = usage.outputTokens ?? 0;
  const details = usage.inputTokenDetails;
  if (details !== undefined && usage.inputTokens !== undefined) {
    return {
      inputTokens: usage.inputTokens,
      outputTokens: output,
      cachedInputTokens: details.cacheReadTokens ?? 0,
      cacheWriteTokens: details.cacheWriteTokens ?? 0,
    };
  }
  const cached = usage.cachedInputTokens ?? 0;
  if (provider === "anthropic") {
    const raw = providerMetadata?.anthropic?.cacheCreationInputTokens;
    const written = typeof raw === "number" ? raw : 0;
    return {
      inputTokens: (usage.inputTokens ?? 0) + cached + written,
      outputTokens: output,
      cachedInputTokens: cached,
      cacheWriteTokens: written,
    };
  }
  return {
    inputTokens: usage.inputTokens ?? 0,
    outputTokens: output,
    cachedInputTokens: cached,
    cacheWriteTokens: 0,
  };
}
