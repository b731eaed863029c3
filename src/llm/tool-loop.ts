import { STATUS_CODES } from "node:http";
import {
  APICallError,
  RetryError,
  ToolChoiceViolationError,
  generateText,
  jsonSchema,
  streamText,
  tool,
  wrapLanguageModel,
  zodSchema,
  type AssistantContent,
  type JSONSchema7,
  type LanguageModelMiddleware,
  type ModelMessage,
  type ToolResultPart,
  type ToolSet,
} from "ai";
import type { ZodError } from "zod";
import { recordModelUsage } from "../metrics/index.js";
import { redactText } from "../util/redact.js";
import { StageError } from "../util/stage-error.js";
import {
  providerUsageOf,
  usageOf,
  withCacheBreakpoints,
  type CachedRequest,
  type ProviderUsage,
} from "./cache.js";
import {
  contextWindowOf,
  estimateTokens,
  fitToBudget,
  inputBudget,
  maxResultChars,
} from "./context-budget.js";
import { LlmError, LlmProtocolError, LlmUpstreamError } from "./errors.js";
import { costOf } from "./prices.js";
import { requireModel, type ModelClient, type ReadyModelClient } from "./provider.js";
import type { ExecutableTool, ModelCallRecord, PricedUsage, ToolSpec, Usage } from "./types.js";

/*
 * The one way the pipeline talks to a model (docs/architecture.md, "Model tool protocol").
 * Every step is a single model call; the AI SDK never executes a tool itself (no `execute` is
 * handed to it), so budget, cancellation and the step count stay here.
 */

export interface ToolLoopOptions<F = unknown> {
  /** An unconfigured client makes the loop throw LlmNotConfiguredError before any call. */
  client: ModelClient;
  system: string;
  /** The first user message. */
  prompt: string;
  /** Tools the model may call and we execute. */
  tools: ExecutableTool[];
  /** Calling one of these with valid arguments ends the loop (e.g. submit_plan, finish). */
  finishTools: ToolSpec<F>[];
  /** Model calls at most. */
  maxSteps: number;
  /** Answers without any tool call tolerated before failing (default 2). */
  maxNudges?: number;
  /** Tool results longer than this are cut in the middle (default 40,000 characters). */
  maxToolResultChars?: number;
  /**
   * The model's context window in tokens; default: the client's setting (LLM_CONTEXT_TOKENS),
   * else the table in context-budget.ts. Every call is kept within it.
   */
  contextTokens?: number;
  /** After every model call; may throw (e.g. budget reached) to stop the loop. */
  onUsage(usage: PricedUsage): Promise<void>;
  /** For progress logs. */
  onToolCall?(call: { name: string; input: unknown }): void;
  /** Model text between tool calls, for progress logs. */
  onText?(text: string): void;
  /**
   * Once per model call, after the tools it called ran (or when the loop ends there): the
   * call as the model saw it, for the task's trajectory. Errors it throws end the loop.
   */
  onCall?(call: ModelCallRecord): Promise<void>;
  signal?: AbortSignal;
}

export interface ToolLoopResult<F = unknown> {
  /** The finish tool that was called. */
  tool: string;
  /** Its arguments, parsed by its zod schema. */
  input: F;
  /** Model calls made. */
  steps: number;
  /** Tokens and cost of all model calls together. */
  usage: PricedUsage;
}

const DEFAULT_MAX_NUDGES = 2;
const DEFAULT_MAX_TOOL_RESULT_CHARS = 40_000;

type ToolChoice = "required" | "auto";

// Clients whose server refused toolChoice "required"; they get "auto" from then on.
const autoOnly = new WeakSet<ReadyModelClient>();

interface ModelToolCall {
  toolCallId: string;
  toolName: string;
  input: unknown;
  /** The SDK could not parse the arguments (not JSON) or does not know the tool. */
  invalid: boolean;
}

interface StepOutcome {
  text: string;
  toolCalls: ModelToolCall[];
  /** The assistant message(s) to append to the conversation. */
  assistant: ModelMessage[];
  usage: Usage;
}

/**
 * Runs model calls until the model calls a finish tool with valid arguments, executing the
 * other tools it calls in between. Throws LlmProtocolError, LlmUpstreamError,
 * LlmNotConfiguredError, or whatever onUsage or the abort signal throws.
 */
export async function runToolLoop<F>(options: ToolLoopOptions<F>): Promise<ToolLoopResult<F>> {
  const client = requireModel(options.client);
  const tools = loopTools(options);
  const maxNudges = options.maxNudges ?? DEFAULT_MAX_NUDGES;
  const { budget, maxResult } = contextLimits(client, options);

  const system = redactText(options.system);
  const fixedTokens = estimateTokens(system) + estimateTokens(toolSchemas(tools.toolSet));
  const messages: ModelMessage[] = [{ role: "user", content: redactText(options.prompt) }];
  const total: PricedUsage = {
    inputTokens: 0,
    outputTokens: 0,
    cachedInputTokens: 0,
    cacheWriteTokens: 0,
    usd: 0,
    priced: true,
  };
  let nudges = 0;
  let previousLength = 0;

  for (let step = 1; step <= options.maxSteps; step++) {
    options.signal?.throwIfAborted();
    // Old tool results give way first (in chunks: see context-budget.ts); when that changed
    // the history, the previous call's cached prefix ends earlier than its length.
    if (fitToBudget(messages, fixedTokens, budget).elided > 0) previousLength = 0;
    const request = withCacheBreakpoints(client.provider, system, messages, previousLength);
    previousLength = messages.length;
    const at = new Date();
    const outcome = await callModel(client, request, tools.toolSet, options.signal);
    const ms = Math.round(Date.now() - at.getTime());

    const priced = costOf(outcome.usage, client.price);
    const record = callRecord(step, at, client.modelId, request, outcome, priced, ms);
    let recorded = false;
    const recordCall = async () => {
      if (recorded || !options.onCall) return;
      recorded = true;
      await options.onCall(record);
    };
    recordModelUsage(client.provider, client.modelId, priced);
    addUsage(total, priced);
    // Errors from the budget check propagate unchanged: they are the caller's to interpret.
    try {
      await options.onUsage(priced);
    } catch (error) {
      await recordCall();
      throw error;
    }

    if (outcome.text.trim()) options.onText?.(outcome.text.trim());
    messages.push(...outcome.assistant);

    if (outcome.toolCalls.length === 0) {
      if (nudges >= maxNudges) {
        throw new LlmProtocolError(
          `The model answered without calling ${tools.finishNames} after ${maxNudges} reminder${maxNudges === 1 ? "" : "s"}.`,
        );
      }
      nudges++;
      await recordCall();
      messages.push({
        role: "user",
        content:
          `Answer only by calling tools. When the work is done, call ${tools.finishNames}; ` +
          `until then, call one of the other tools.`,
      });
      continue;
    }

    const answered = await runToolCalls(tools, options, outcome.toolCalls, maxResult, (results) => {
      record.tool_results = resultsOf(results);
      return recordCall();
    });
    if ("finish" in answered) {
      return { tool: answered.finish, input: answered.input, steps: step, usage: total };
    }
    messages.push({ role: "tool", content: answered.results });
  }

  throw new LlmProtocolError(
    `The model did not call ${tools.finishNames} within ${options.maxSteps} step${options.maxSteps === 1 ? "" : "s"}.`,
  );
}

/** The tools of one loop: those it executes, those that end it, and their SDK form. */
interface LoopTools<F> {
  executable: Map<string, ExecutableTool>;
  finishing: Map<string, ToolSpec<F>>;
  toolSet: ToolSet;
  /** "submit_plan or finish", for messages to the model. */
  finishNames: string;
}

/** Checks the options' tools and steps (throwing on a caller's mistake) and indexes the tools. */
function loopTools<F>(options: ToolLoopOptions<F>): LoopTools<F> {
  if (options.finishTools.length === 0) throw new Error("runToolLoop needs a finish tool");
  if (options.maxSteps < 1) throw new Error("runToolLoop needs maxSteps >= 1");

  const executable = new Map(options.tools.map((t) => [t.name, t]));
  const finishing = new Map(options.finishTools.map((t) => [t.name, t]));
  for (const name of finishing.keys()) {
    if (executable.has(name)) throw new Error(`Tool ${name} is both executable and finishing`);
  }
  return {
    executable,
    finishing,
    toolSet: toSdkTools([...options.tools, ...options.finishTools]),
    finishNames: [...finishing.keys()].join(" or "),
  };
}

/** The input tokens every call must fit in, and the longest tool result kept whole. */
function contextLimits(
  client: ReadyModelClient,
  options: ToolLoopOptions<unknown>,
): { budget: number; maxResult: number } {
  const window = contextWindowOf(
    client.provider,
    client.modelId,
    options.contextTokens ?? client.settings.contextTokens,
  );
  const budget = inputBudget(window, client.settings.maxOutputTokens);
  const maxResult = Math.min(
    options.maxToolResultChars ?? DEFAULT_MAX_TOOL_RESULT_CHARS,
    maxResultChars(budget),
  );
  return { budget, maxResult };
}

/** One model call as the model saw it, for the trajectory; its tool results come later. */
function callRecord(
  step: number,
  at: Date,
  model: string,
  request: CachedRequest,
  outcome: StepOutcome,
  usage: PricedUsage,
  ms: number,
): ModelCallRecord {
  return {
    step,
    at,
    model,
    // A copy of the list: the history grows (and old results are elided) after this call.
    messages:
      request.system === undefined
        ? [...request.messages]
        : [{ role: "system", content: request.system }, ...request.messages],
    response: {
      text: outcome.text,
      tool_calls: outcome.toolCalls.map((c) => ({
        id: c.toolCallId,
        name: c.toolName,
        input: c.input,
      })),
    },
    tool_results: [],
    usage,
    ms,
  };
}

/** Adds one call's usage to the loop's total. */
function addUsage(total: PricedUsage, priced: PricedUsage): void {
  total.inputTokens += priced.inputTokens;
  total.outputTokens += priced.outputTokens;
  total.cachedInputTokens! += priced.cachedInputTokens ?? 0;
  total.cacheWriteTokens! += priced.cacheWriteTokens ?? 0;
  total.usd += priced.usd;
  total.priced &&= priced.priced;
}

type Answered<F> = { finish: string; input: F } | { results: ToolResultPart[] };

/**
 * Runs the tool calls of one answer in order: the accepted finish call, or the results to send
 * back. `settle` records the call with the results so far; it runs before this returns or
 * throws (cancellation, a StageError).
 */
async function runToolCalls<F>(
  tools: LoopTools<F>,
  options: ToolLoopOptions<F>,
  calls: ModelToolCall[],
  maxResult: number,
  settle: (results: ToolResultPart[]) => Promise<void>,
): Promise<Answered<F>> {
  const results: ToolResultPart[] = [];
  // A finish call is refused when an earlier call of the same answer failed: the model
  // would otherwise finish believing, say, an edit happened that did not.
  let earlierFailed = false;
  const fail = (call: ModelToolCall, message: string) => {
    earlierFailed = true;
    results.push(toolResult(call, message, true));
  };

  for (const call of calls) {
    options.onToolCall?.({ name: call.toolName, input: call.input });
    const finish = tools.finishing.get(call.toolName);
    const spec = finish ?? tools.executable.get(call.toolName);
    if (!spec) {
      const known = [...tools.executable.keys(), ...tools.finishing.keys()];
      fail(call, unknownToolMessage(call.toolName, known));
      continue;
    }
    const parsed = await parseArguments(spec, call);
    if (!parsed.ok) {
      fail(call, parsed.message);
      continue;
    }
    if (finish) {
      if (earlierFailed) {
        results.push(
          toolResult(
            call,
            `${call.toolName} was not accepted because an earlier tool call in the same answer failed. ` +
              `Deal with that failure first, then call ${call.toolName} again.`,
            true,
          ),
        );
        continue;
      }
      // Parsed by the finish tool's own schema: the caller gets its output type.
      await settle(results);
      return { finish: call.toolName, input: parsed.value as F };
    }
    let output: string;
    try {
      output = await (spec as ExecutableTool).execute(parsed.value);
    } catch (error) {
      // Cancellation ends the loop, and so does a failure reported on purpose (a command
      // past the task's disk budget: sandbox/disk.ts); any other failure is the
      // model's to work around.
      if (options.signal?.aborted || error instanceof StageError) {
        await settle(results);
        if (error instanceof StageError) throw error;
        throw options.signal?.reason ?? error;
      }
      fail(call, `${call.toolName} failed: ${errorMessage(error)}`);
      continue;
    }
    // Tools report mistakes the model can fix as text starting with "Error: " (see
    // tools/read-tools.ts); those count as failures for the finish rule above.
    if (output.startsWith("Error: ")) earlierFailed = true;
    results.push(toolResult(call, bound(output, maxResult), output.startsWith("Error: ")));
  }
  await settle(results);
  return { results };
}

function toSdkTools(specs: ToolSpec[]): ToolSet {
  const set: ToolSet = {};
  for (const spec of specs) {
    // The JSON schema goes to the provider, but the SDK is not given a validator: invalid
    // arguments must come back to us so the model hears exactly what was wrong. A tool's own
    // JSON Schema (an MCP server's) goes as it is: converting it would inline its `$ref`s.
    const schema = spec.inputJsonSchema
      ? jsonSchema(spec.inputJsonSchema as JSONSchema7)
      : zodSchema(spec.input);
    set[spec.name] = tool<unknown>({
      description: spec.description,
      inputSchema: jsonSchema(() => schema.jsonSchema),
    });
  }
  return set;
}

/** The tools' JSON schemas, as sent: for the size estimate of the request. */
function toolSchemas(tools: ToolSet): unknown[] {
  return Object.entries(tools).map(([name, t]) => {
    const schema = t.inputSchema as { jsonSchema?: unknown } | undefined;
    return { name, description: t.description, schema: schema?.jsonSchema };
  });
}

async function callModel(
  client: ReadyModelClient,
  { system, messages }: { system: string | undefined; messages: ModelMessage[] },
  tools: ToolSet,
  signal: AbortSignal | undefined,
): Promise<StepOutcome> {
  let toolChoice: ToolChoice = autoOnly.has(client) ? "auto" : "required";
  for (;;) {
    const timeout = AbortSignal.timeout(client.settings.timeoutMs);
    const combined = signal ? AbortSignal.any([signal, timeout]) : timeout;
    try {
      return await modelCall(client, { system, messages, tools, toolChoice, signal: combined });
    } catch (error) {
      if (signal?.aborted) throw signal.reason ?? error;
      if (timeout.aborted) {
        throw new LlmUpstreamError(
          `The model provider did not answer within ${duration(client.settings.timeoutMs)}.`,
          undefined,
          true,
        );
      }
      // Some OpenAI-compatible servers (and some models) refuse a forced tool choice; the
      // nudges keep the protocol without it.
      if (toolChoice === "required" && refusesRequiredToolChoice(error)) {
        autoOnly.add(client);
        toolChoice = "auto";
        continue;
      }
      throw upstreamError(error, client);
    }
  }
}

interface CallRequest {
  system: string | undefined;
  messages: ModelMessage[];
  tools: ToolSet;
  toolChoice: ToolChoice;
  signal: AbortSignal;
}

async function modelCall(client: ReadyModelClient, request: CallRequest): Promise<StepOutcome> {
  const common = {
    // Without `system`, the system prompt is the first message (cache.ts puts it there to
    // mark it as a cache breakpoint); the history itself never holds a system message.
    ...(request.system === undefined
      ? { allowSystemInMessages: true }
      : { system: request.system }),
    messages: request.messages,
    tools: request.tools,
    toolChoice: request.toolChoice,
    maxRetries: client.settings.maxRetries,
    abortSignal: request.signal,
    maxOutputTokens: client.settings.maxOutputTokens,
  };
  if (!client.stream) {
    // The provider's own answer, kept for when generateText refuses it (below).
    let answer: ProviderAnswer | undefined;
    const model = wrapLanguageModel({
      model: client.model,
      middleware: {
        specificationVersion: "v3",
        wrapGenerate: async ({ doGenerate }) => (answer = await doGenerate()),
      },
    });
    try {
      const result = await generateText({ ...common, model });
      return {
        text: result.text,
        toolCalls: result.toolCalls.map(toModelToolCall),
        assistant: assistantMessages(result.response.messages),
        usage: usageOf(result.usage),
      };
    } catch (error) {
      // AI SDK 6 throws when an answer to toolChoice "required" calls no tool. The loop
      // wants that answer: its text goes back to the model with a reminder, and its tokens
      // were paid for. The error carries the content; the usage comes from the answer.
      if (ToolChoiceViolationError.isInstance(error) && answer !== undefined) {
        return answerWithoutToolCall(error, answer);
      }
      throw error;
    }
  }

  const result = streamText({
    ...common,
    model: client.model,
    // Errors arrive as stream parts and are rethrown below; the default handler would
    // print them to the console.
    onError: () => {},
  });
  for await (const part of result.fullStream) {
    if (part.type === "error") throw part.error;
    if (part.type === "abort") throw request.signal.reason ?? new Error("aborted");
  }
  const [text, toolCalls, response, usage] = await Promise.all([
    result.text,
    result.toolCalls,
    result.response,
    result.usage,
  ]);
  return {
    text,
    toolCalls: toolCalls.map(toModelToolCall),
    assistant: assistantMessages(response.messages),
    usage: usageOf(usage),
  };
}

/** What a provider's model returns from one non-streaming call, before the SDK reads it. */
type ProviderAnswer = Awaited<
  ReturnType<Parameters<NonNullable<LanguageModelMiddleware["wrapGenerate"]>>[0]["doGenerate"]>
>;

/*
 * The step of an answer that called no tool, as generateText would have returned it: the
 * assistant message holds the text and reasoning parts with their provider metadata (e.g.
 * Anthropic's thinking signatures), like the SDK's own response messages.
 */
function answerWithoutToolCall(
  violation: ToolChoiceViolationError,
  answer: ProviderAnswer,
): StepOutcome {
  const content: Exclude<AssistantContent, string> = [];
  for (const part of violation.content) {
    if ((part.type === "text" && part.text.length > 0) || part.type === "reasoning") {
      content.push({ type: part.type, text: part.text, providerOptions: part.providerMetadata });
    }
  }
  return {
    text: violation.content.map((part) => (part.type === "text" ? part.text : "")).join(""),
    toolCalls: [],
    assistant: content.length > 0 ? [{ role: "assistant", content }] : [],
    usage: usageOf(providerUsageOf(answer.usage satisfies ProviderUsage)),
  };
}

function toModelToolCall(call: {
  toolCallId: string;
  toolName: string;
  input: unknown;
  invalid?: boolean;
}): ModelToolCall {
  return {
    toolCallId: call.toolCallId,
    toolName: call.toolName,
    input: call.input,
    invalid: call.invalid === true,
  };
}

/*
 * The SDK's response messages keep provider metadata (e.g. Anthropic thinking signatures)
 * that must be sent back unchanged. Its own "tool" messages (error results it made up for
 * unparsable calls) are dropped: we answer every call ourselves. Unparsable arguments are
 * replaced by {} because providers reject a tool call whose input is not an object.
 */
function assistantMessages(response: ModelMessage[]): ModelMessage[] {
  const out: ModelMessage[] = [];
  for (const message of response) {
    if (message.role !== "assistant") continue;
    if (typeof message.content === "string") {
      out.push(message);
      continue;
    }
    out.push({
      ...message,
      content: message.content.map((part) =>
        part.type === "tool-call" && !isPlainObject(part.input) ? { ...part, input: {} } : part,
      ),
    });
  }
  return out;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

type Parsed = { ok: true; value: unknown } | { ok: false; message: string };

async function parseArguments(spec: ToolSpec, call: ModelToolCall): Promise<Parsed> {
  if (call.invalid && typeof call.input === "string") {
    return {
      ok: false,
      message:
        `The arguments of ${call.toolName} are not valid JSON. ` +
        `Call ${call.toolName} again with a JSON object that matches its schema.`,
    };
  }
  const result = await spec.input.safeParseAsync(call.input);
  if (result.success) return { ok: true, value: result.data };
  return {
    ok: false,
    message:
      `Invalid arguments for ${call.toolName}:\n${formatIssues(result.error)}\n` +
      `Call ${call.toolName} again with corrected arguments.`,
  };
}

function formatIssues(error: ZodError): string {
  return error.issues
    .map((issue) => {
      const path = issue.path.map(String).join(".");
      return `- ${path || "(arguments)"}: ${issue.message}`;
    })
    .join("\n");
}

function unknownToolMessage(name: string, available: string[]): string {
  return `There is no tool named ${JSON.stringify(name)}. Available tools: ${available.join(", ")}.`;
}

function toolResult(call: ModelToolCall, text: string, isError: boolean): ToolResultPart {
  const value = redactText(text);
  return {
    type: "tool-result",
    toolCallId: call.toolCallId,
    toolName: call.toolName,
    output: isError ? { type: "error-text", value } : { type: "text", value },
  };
}

/** The tool results of one answer as the trajectory keeps them (their text as sent). */
function resultsOf(results: ToolResultPart[]): ModelCallRecord["tool_results"] {
  return results.map((r) => {
    const output = r.output as { type: string; value?: unknown };
    return {
      tool_call_id: r.toolCallId,
      name: r.toolName,
      output: typeof output.value === "string" ? output.value : JSON.stringify(output.value ?? ""),
      is_error: output.type === "error-text",
    };
  });
}

/** Keeps the head and the tail (where command output has its errors) of a long result. */
function bound(text: string, max: number): string {
  if (text.length <= max) return text;
  const head = Math.floor(max * 0.7);
  const tail = max - head;
  const omitted = text.length - head - tail;
  return (
    `${text.slice(0, head)}\n\n[… ${omitted} characters omitted: the result was too long. ` +
    `Ask for a smaller part, e.g. a line range or a narrower search …]\n\n${text.slice(-tail)}`
  );
}

function duration(ms: number): string {
  return ms < 10_000 && ms % 1000 !== 0 ? `${ms} ms` : `${Math.round(ms / 1000)} s`;
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function apiCallErrorOf(error: unknown): APICallError | undefined {
  const inner = RetryError.isInstance(error) ? error.lastError : error;
  return APICallError.isInstance(inner) ? inner : undefined;
}

function refusesRequiredToolChoice(error: unknown): boolean {
  const api = apiCallErrorOf(error);
  if (!api || (api.statusCode !== 400 && api.statusCode !== 422)) return false;
  return /tool[_ ]choice/i.test(`${api.responseBody ?? ""} ${api.message}`);
}

/** A short, key-free description of a provider failure. */
function upstreamError(error: unknown, client: ReadyModelClient): LlmError {
  if (error instanceof LlmError) return error;
  const scrub = (text: string) => {
    const key = client.settings.apiKey;
    const clean = key ? text.split(key).join("[REDACTED]") : text;
    return redactText(clean).replace(/\s+/g, " ").trim().slice(0, 300);
  };
  const api = apiCallErrorOf(error);
  if (api && api.statusCode !== undefined) {
    const status = `${api.statusCode} ${STATUS_CODES[api.statusCode] ?? ""}`.trim();
    const detail = providerDetail(api);
    return new LlmUpstreamError(
      `The model provider answered ${status}${detail ? `: ${scrub(detail)}` : ""}`,
      api.statusCode,
      api.isRetryable,
    );
  }
  if (api) {
    return new LlmUpstreamError(
      `Could not reach the model provider at ${hostOf(api.url)}: ${errorCode(api) ?? scrub(api.message)}`,
      undefined,
      true,
    );
  }
  return new LlmUpstreamError(
    `The model provider's answer could not be used: ${scrub(errorMessage(error))}`,
    undefined,
    false,
  );
}

// The provider's own explanation ("model not found", "invalid x-api-key"), when it sent one.
function providerDetail(api: APICallError): string | undefined {
  if (api.responseBody) {
    try {
      const body = JSON.parse(api.responseBody) as { error?: { message?: unknown } | string };
      const message = typeof body.error === "string" ? body.error : body.error?.message;
      if (typeof message === "string" && message) return message;
    } catch {
      // not JSON: fall back to the SDK's message
    }
  }
  const statusText = STATUS_CODES[api.statusCode ?? 0];
  return api.message && api.message !== statusText ? api.message : undefined;
}

function errorCode(error: unknown): string | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 6 && current; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === "string") return code;
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}

function hostOf(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return "the configured address";
  }
}
