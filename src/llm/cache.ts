import type { LanguageModelUsage, ModelMessage, SystemModelMessage } from "ai";
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

/** What the AI SDK reports about one call's tokens (the fields of its LanguageModelUsage we read). */
export type SdkUsage = Pick<
  LanguageModelUsage,
  "inputTokens" | "outputTokens" | "inputTokenDetails"
>;

/**
 * One call's usage with cached, cache-write and uncached input apart; `inputTokens` is
 * always the whole prompt. The AI SDK 6 reports it so for every provider: Anthropic's
 * `input_tokens` (which leaves out the cache reads and writes) plus both, and OpenAI's
 * `prompt_tokens` (which holds the cached part) as they are.
 */
export function usageOf(usage: SdkUsage): Usage {
  const details = usage.inputTokenDetails;
  return {
    inputTokens: usage.inputTokens ?? 0,
    outputTokens: usage.outputTokens ?? 0,
    cachedInputTokens: details.cacheReadTokens ?? 0,
    cacheWriteTokens: details.cacheWriteTokens ?? 0,
  };
}

/** Token counts as a provider's model returns them to the SDK (LanguageModelV3Usage). */
export interface ProviderUsage {
  inputTokens: {
    total: number | undefined;
    noCache: number | undefined;
    cacheRead: number | undefined;
    cacheWrite: number | undefined;
  };
  outputTokens: { total: number | undefined };
}

/** The SDK's reading of a provider's counts, for a call whose result the SDK did not return. */
export function providerUsageOf(usage: ProviderUsage): SdkUsage {
  return {
    inputTokens: usage.inputTokens.total,
    outputTokens: usage.outputTokens.total,
    inputTokenDetails: {
      noCacheTokens: usage.inputTokens.noCache,
      cacheReadTokens: usage.inputTokens.cacheRead,
      cacheWriteTokens: usage.inputTokens.cacheWrite,
    },
  };
}
