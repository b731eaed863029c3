/*
 * Failures of the model layer. The pipeline maps them to task outcomes in one place; their
 * messages are written for the task's owner and never carry the provider key.
 */

export type LlmErrorCode = "llm_not_configured" | "llm_protocol" | "llm_upstream";

/** Base class, so callers can tell model-layer failures from everything else. */
export class LlmError extends Error {
  constructor(
    readonly code: LlmErrorCode,
    message: string,
  ) {
    super(message);
    this.name = "LlmError";
  }
}

export const NOT_CONFIGURED_MESSAGE =
  "No model is configured: set LLM_API_KEY (or ANTHROPIC_API_KEY / OPENAI_API_KEY), or LLM_BASE_URL for an OpenAI-compatible server, and optionally LLM_PROVIDER and LLM_MODEL.";

/** No provider or no key: the service runs, but anything that needs a model fails with this. */
export class LlmNotConfiguredError extends LlmError {
  constructor(message: string = NOT_CONFIGURED_MESSAGE) {
    super("llm_not_configured", message);
    this.name = "LlmNotConfiguredError";
  }
}

/** The model did not follow the tool protocol (no finish tool call within the limits). */
export class LlmProtocolError extends LlmError {
  constructor(message: string) {
    super("llm_protocol", message);
    this.name = "LlmProtocolError";
  }
}

/** The provider failed or could not be reached, after the SDK's own retries. */
export class LlmUpstreamError extends LlmError {
  constructor(
    message: string,
    /** HTTP status the provider answered with, when it answered at all. */
    readonly statusCode: number | undefined,
    /** True for failures that may pass on a later attempt (429, 5xx, network, timeout). */
    readonly retryable: boolean,
  ) {
    super("llm_upstream", message);
    this.name = "LlmUpstreamError";
  }
}
