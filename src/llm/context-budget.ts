import type { ModelMessage, ToolResultPart } from "ai";
import type { ModelProvider } from "./types.js";

/*
 * Keeps every model call of the tool loop within the model's context window. The history
 * grows by a tool result per step (up to 40,000 characters each, 60 steps): left alone it
 * overruns any window. When a call would exceed the budget, the oldest tool results are
 * replaced by a one-line note ("[elided: read_file src/x.ts, 12,000 chars …]") and the
 * oldest large tool-call arguments (write_file contents) are shortened; the first message
 * (the task and, when implementing, the plan) and the most recent steps stay whole.
 *
 * Elision happens in chunks: once over the budget, enough is elided to get down to
 * LOW_WATER of it, then nothing changes for several steps. A provider's prompt cache
 * (src/llm/cache.ts) matches the request's unchanged prefix, so eliding a little every step
 * would move the first changed byte forward each time and invalidate the cache every call.
 */

/** Context windows in tokens, by model id prefix; the first match wins. */
const WINDOWS: ReadonlyArray<readonly [prefix: string, tokens: number]> = [
  // https://docs.anthropic.com/en/docs/about-claude/models/overview: 200k for every current
  // model (1M for some only with a beta header this service does not send).
  ["claude-", 200_000],
  // https://platform.openai.com/docs/models: gpt-5 family 400k, gpt-4.1 ~1M, gpt-4o 128k,
  // o-series 200k.
  ["gpt-5", 400_000],
  ["gpt-4.1", 1_047_576],
  ["gpt-4o", 128_000],
  ["o1-mini", 128_000],
  ["o1", 200_000],
  ["o3", 200_000],
  ["o4", 200_000],
];

/** For unknown models (local servers included): a common size, overridable by setting. */
export const DEFAULT_CONTEXT_TOKENS = 128_000;

/** Share of the window the request may fill: the estimate is rough, and answers need room. */
const SAFETY = 0.85;
/** Room kept for the answer when no output cap is configured. */
const DEFAULT_OUTPUT_RESERVE = 8_192;
/** After eliding, the history is down to this share of the budget (see the header). */
export const LOW_WATER = 0.5;
/** Steps at the end of the history that are never elided (a step: answer + its results). */
const RECENT_STEPS = 2;
/** A single tool result may fill at most this share of the budget. */
const MAX_RESULT_SHARE = 0.25;
/** Tool-call arguments longer than this (in old steps) are shortened. */
const LONG_ARGUMENT = 400;

/** The context window of a model: the override, else the table, else the default. */
export function contextWindowOf(
  provider: ModelProvider,
  modelId: string,
  override?: number,
): number {
  if (override !== undefined && override > 0) return override;
  if (provider === "openai-compatible") return DEFAULT_CONTEXT_TOKENS;
  const id = modelId.trim().toLowerCase();
  return WINDOWS.find(([prefix]) => id.startsWith(prefix))?.[1] ?? DEFAULT_CONTEXT_TOKENS;
}

/** Input tokens one request may use, given the window and the answer's reserve. */
export function inputBudget(window: number, maxOutputTokens?: number): number {
  const reserve = Math.min(maxOutputTokens ?? DEFAULT_OUTPUT_RESERVE, Math.floor(window / 4));
  return Math.max(1_000, Math.floor((window - reserve) * SAFETY));
}

/*
 * Tokens of a piece of the request, estimated from its JSON size: about 4 characters per
 * token for English and code with BPE tokenizers (OpenAI's and Anthropic's rule of thumb),
 * counted on the JSON so quoting and structure are included. Cheap enough to run per step.
 */
export function estimateTokens(value: unknown): number {
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return Math.ceil((text?.length ?? 0) / 4);
}

/** Largest tool result, in characters, worth adding to a history of this budget. */
export function maxResultChars(budgetTokens: number): number {
  return Math.floor(budgetTokens * MAX_RESULT_SHARE * 4);
}

export interface FitReport {
  /** Estimated tokens of the request after fitting. */
  tokens: number;
  /** Tool results and arguments elided by this call. */
  elided: number;
}

/**
 * Elides old parts of `messages` in place until system + tools + messages fit in `budget`
 * tokens (see the header). `fixedTokens` is the estimate of the system prompt and tools.
 */
export function fitToBudget(
  messages: ModelMessage[],
  fixedTokens: number,
  budget: number,
): FitReport {
  const sizes = messages.map((m) => estimateTokens(m));
  let total = fixedTokens + sizes.reduce((a, b) => a + b, 0);
  if (total <= budget) return { tokens: total, elided: 0 };
  const target = Math.floor(budget * LOW_WATER);
  const calls = toolCallsById(messages);
  let elided = 0;
  const shrink = (i: number): void => {
    const changed = elideMessage(messages[i]!, calls);
    if (changed === 0) return;
    elided += changed;
    const size = estimateTokens(messages[i]!);
    total += size - sizes[i]!;
    sizes[i] = size;
  };
  // Oldest first, never the first message, and never the recent steps while older ones remain.
  const recentFrom = recentStart(messages);
  for (let i = 1; i < recentFrom && total > target; i++) shrink(i);
  // Still too big (a few huge recent results): the recent ones too, all but the last message.
  for (let i = Math.max(1, recentFrom); i < messages.length - 1 && total > budget; i++) shrink(i);
  return { tokens: total, elided };
}

/** Index of the first message of the last RECENT_STEPS steps (assistant messages start them). */
function recentStart(messages: ModelMessage[]): number {
  let seen = 0;
  for (let i = messages.length - 1; i > 0; i--) {
    if (messages[i]!.role === "assistant" && ++seen === RECENT_STEPS) return i;
  }
  return 1;
}

function toolCallsById(messages: ModelMessage[]): Map<string, { name: string; input: unknown }> {
  const calls = new Map<string, { name: string; input: unknown }>();
  for (const m of messages) {
    if (m.role !== "assistant" || typeof m.content === "string") continue;
    for (const part of m.content) {
      if (part.type === "tool-call") {
        calls.set(part.toolCallId, { name: part.toolName, input: part.input });
      }
    }
  }
  return calls;
}

const ELIDED = "[elided:";

/** Elides what can be elided in one message; returns how many parts changed. */
function elideMessage(
  message: ModelMessage,
  calls: Map<string, { name: string; input: unknown }>,
): number {
  let changed = 0;
  if (message.role === "tool") {
    message.content = message.content.map((part) => {
      if (part.type !== "tool-result") return part;
      const value = resultText(part);
      if (value === undefined || value.startsWith(ELIDED) || value.length < 200) return part;
      changed++;
      const call = calls.get(part.toolCallId);
      const what = call ? describeCall(call.name, call.input) : part.toolName;
      const note =
        `${ELIDED} ${what}, ${value.length.toLocaleString("en-US")} chars; ` +
        `an older result left out to keep the conversation within the context window. ` +
        `Call the tool again if you need it.]`;
      const output: ToolResultPart["output"] =
        part.output.type === "error-text"
          ? { type: "error-text", value: note }
          : { type: "text", value: note };
      return { ...part, output };
    });
  } else if (message.role === "assistant" && typeof message.content !== "string") {
    message.content = message.content.map((part) => {
      if (part.type !== "tool-call" || estimateTokens(part.input) * 4 < LONG_ARGUMENT) return part;
      const input = shortenArguments(part.input);
      if (input === part.input) return part;
      changed++;
      return { ...part, input };
    });
  }
  return changed;
}

function resultText(part: ToolResultPart): string | undefined {
  const output = part.output;
  if (output.type === "text" || output.type === "error-text") return output.value;
  if (output.type === "json" || output.type === "error-json") return JSON.stringify(output.value);
  return undefined;
}

/** The arguments with every long string replaced by a note of its size. */
function shortenArguments(input: unknown): unknown {
  if (typeof input !== "object" || input === null || Array.isArray(input)) return input;
  let changed = false;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(input as Record<string, unknown>)) {
    if (typeof value === "string" && value.length > LONG_ARGUMENT && !value.startsWith(ELIDED)) {
      out[key] = `${ELIDED} ${value.length.toLocaleString("en-US")} chars]`;
      changed = true;
    } else {
      out[key] = value;
    }
  }
  return changed ? out : input;
}

/** "read_file src/x.ts lines 1-400": the call's short scalar arguments, in order. */
export function describeCall(name: string, input: unknown): string {
  if (typeof input !== "object" || input === null) return name;
  const bits: string[] = [];
  for (const [key, value] of Object.entries(input as Record<string, unknown>)) {
    if (typeof value === "string" && value.length <= 120) {
      bits.push(key === "path" || key === "query" ? value : `${key}=${value}`);
    } else if (typeof value === "number" || typeof value === "boolean") {
      bits.push(`${key}=${value}`);
    }
    if (bits.length === 4) break;
  }
  return [name, ...bits].join(" ").slice(0, 200);
}
