import type { ZodType } from "zod";

/*
 * The model tool protocol (docs/architecture.md, "Model tool protocol") as the pipeline sees
 * it. Providers differ in wire format (OpenAI and Anthropic tool calling); everything above
 * src/llm speaks only these types.
 */

/** A tool the model may call: its contract name, what it does, and its argument schema. */
export interface ToolSpec<T = unknown> {
  name: string;
  description: string;
  input: ZodType<T>;
  /**
   * The argument schema the model is sent, when the tool came with a JSON Schema of its own
   * (an MCP server's, checked by tools/schema-limits.ts): sent as it is rather than
   * converted from `input`, whose conversion inlines every `$ref` on the event loop.
   */
  inputJsonSchema?: Record<string, unknown>;
}

/** A tool the pipeline can execute on the model's behalf (read_file, search_code, …). */
export interface ExecutableTool<T = unknown> extends ToolSpec<T> {
  /** Runs the call; the returned text goes back to the model as the tool result. */
  execute(input: T): Promise<string>;
}

/** Tokens one model call used. */
export interface Usage {
  /** The whole prompt, cached or not. */
  inputTokens: number;
  outputTokens: number;
  /** Part of inputTokens read from the provider's prompt cache (billed at a discount). */
  cachedInputTokens?: number;
  /** Part of inputTokens written to the prompt cache (Anthropic bills these at a premium). */
  cacheWriteTokens?: number;
}

/** Tokens and price of one model call, as reported to the budget. */
export interface PricedUsage extends Usage {
  usd: number;
  /** False when the model is not in the price table and no price was configured. */
  priced: boolean;
}

/**
 * The model API families the service can talk to (`LLM_PROVIDER` in README.md,
 * "Configuration").
 */
export type ModelProvider = "anthropic" | "openai" | "openai-compatible";

/**
 * One model call as the model saw it, for the task's trajectory (domain/tasks/trajectories.ts):
 * the request after context bounding, the answer, and what each tool call gave back.
 */
export interface ModelCallRecord {
  /** 1 for the loop's first call. */
  step: number;
  at: Date;
  model: string;
  /** The request's messages, the system prompt first. */
  messages: unknown[];
  response: {
    text: string;
    tool_calls: Array<{ id: string; name: string; input: unknown }>;
  };
  tool_results: Array<{ tool_call_id: string; name: string; output: string; is_error: boolean }>;
  usage: PricedUsage;
  /** The model call's wall time. */
  ms: number;
}
