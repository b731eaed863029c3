import { createAnthropic } from "@ai-sdk/anthropic";
import { createOpenAI } from "@ai-sdk/openai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import type { LanguageModel } from "ai";
import { LlmNotConfiguredError, NOT_CONFIGURED_MESSAGE } from "./errors.js";
import { priceFor, type ModelPrice, type PriceOverride } from "./prices.js";
import type { ModelProvider } from "./types.js";

export { LlmNotConfiguredError } from "./errors.js";

/** How to reach the model, as assembled from the configuration (README.md, "Configuration"). */
export interface ModelSettings {
  provider: ModelProvider;
  /** Required for openai-compatible; for anthropic/openai it points at a proxy. */
  baseUrl?: string;
  apiKey?: string;
  /** Defaults to DEFAULT_MODELS[provider]. */
  model?: string;
  /** Stream responses (streamText) instead of waiting for the whole answer (generateText). */
  stream: boolean;
  /** Limit for one model call, retries included. */
  timeoutMs: number;
  /** Retries of one model call on 429, 5xx and network errors (the AI SDK's own retry). */
  maxRetries: number;
  /** Overrides the built-in price table (src/llm/prices.ts). */
  prices?: PriceOverride;
  /** Cap on tokens one answer may generate; unset leaves the provider's default. */
  maxOutputTokens?: number;
  /** The model's context window (LLM_CONTEXT_TOKENS); unset: src/llm/context-budget.ts. */
  contextTokens?: number;
}

/*
 * Defaults when LLM_MODEL is unset. Anthropic recommends Opus 5.5 for long-running agentic
 * coding and OpenAI recommends gpt-5.6 (an alias of gpt-5.6-sol) for API code generation.
 * An OpenAI-compatible server has no universal model id: "local-model" is accepted by
 * servers that host a single model (llama.cpp server, LM Studio); servers that host several
 * (Ollama, vLLM) need LLM_MODEL set to one of theirs.
 */
const DEFAULT_MODELS: Record<ModelProvider, string> = {
  anthropic: "claude-opus-5-5",
  openai: "gpt-5.6",
  "openai-compatible": "local-model",
};

/**
 * An AI SDK language model object of the current specification (LanguageModelV3): never the
 * gateway's bare string ids, and never a V2 model, which the SDK's middleware cannot wrap.
 */
export type SdkLanguageModel = Extract<LanguageModel, { specificationVersion: "v3" }>;

/** A usable model: everything the tool loop needs to call it and price its tokens. */
export interface ReadyModelClient {
  readonly configured: true;
  readonly provider: ModelProvider;
  /** The model id, e.g. "claude-opus-5-5" (the configured one or the provider's default). */
  readonly modelId: string;
  readonly stream: boolean;
  readonly price: ModelPrice;
  readonly settings: ModelSettings;
  /** The AI SDK object that talks to the provider. */
  readonly model: SdkLanguageModel;
}

/**
 * Stands in when no model is configured, so the service still starts (docs/operations.md,
 * "Workers, tasks and crashes").
 */
export interface MissingModelClient {
  readonly configured: false;
  /** Why nothing is usable: the message of the LlmNotConfiguredError thrown on use. */
  readonly reason: string;
}

export type ModelClient = ReadyModelClient | MissingModelClient;

/*
 * The AI SDK prints its warnings (e.g. "toolChoice 'required' is not supported by this
 * model") with console.warn, outside the structured log. They are informational for us:
 * the tool loop already copes with the cases they describe.
 */
globalThis.AI_SDK_LOG_WARNINGS ??= false;

/**
 * Builds the model client once at start. It never throws for a missing model: with no
 * settings (or no key) it returns a client whose first use throws LlmNotConfiguredError,
 * so the service starts and a task fails at PLANNING with a message naming the variables.
 */
export function createModelClient(settings: ModelSettings | undefined): ModelClient {
  if (!settings) return { configured: false, reason: NOT_CONFIGURED_MESSAGE };
  const needsKey = settings.provider !== "openai-compatible";
  if ((needsKey && !settings.apiKey) || (!needsKey && !settings.baseUrl)) {
    return { configured: false, reason: NOT_CONFIGURED_MESSAGE };
  }
  const modelId = settings.model?.trim() || DEFAULT_MODELS[settings.provider];
  return {
    configured: true,
    provider: settings.provider,
    modelId,
    stream: settings.stream,
    price: priceFor(settings.provider, modelId, settings.prices),
    settings,
    model: languageModel(settings, modelId),
  };
}

/** The ready client, or LlmNotConfiguredError: the check every model user starts with. */
export function requireModel(client: ModelClient): ReadyModelClient {
  if (!client.configured) throw new LlmNotConfiguredError(client.reason);
  return client;
}

function languageModel(settings: ModelSettings, modelId: string): SdkLanguageModel {
  const baseURL = settings.baseUrl?.replace(/\/+$/, "") || undefined;
  switch (settings.provider) {
    case "anthropic":
      return createAnthropic({ apiKey: settings.apiKey, baseURL })(modelId);
    case "openai":
      // Chat Completions rather than the Responses API (the SDK's default for openai):
      // we keep the whole conversation ourselves and resend it every step, which is what
      // Chat Completions is built for. The Responses API adds server-side state (stored
      // items, reasoning item references) that a replayed or trimmed history must match,
      // and Chat Completions is the same wire format as the openai-compatible path that
      // the tests exercise. The price: Responses-only models (the *-codex family) are
      // not available through this provider.
      return createOpenAI({ apiKey: settings.apiKey, baseURL }).chat(modelId);
    case "openai-compatible":
      return createOpenAICompatible({
        name: "openai-compatible",
        baseURL: baseURL ?? "",
        apiKey: settings.apiKey || undefined,
        // Sends stream_options.include_usage so streamed answers report their tokens.
        includeUsage: true,
      }).chatModel(modelId);
  }
}
