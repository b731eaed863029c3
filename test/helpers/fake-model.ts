import { createServer, type IncomingHttpHeaders, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/*
 * A local OpenAI-compatible chat-completions server: the model's HTTP boundary in tests.
 * Each request is recorded and answered by a reply function, non-streaming (one JSON
 * completion) or streaming (SSE chunks shaped like OpenAI's, tool-call arguments split
 * across several chunks).
 */

/** A message as OpenAI's chat format has it (role, content, tool_calls, tool_call_id). */
export interface FakeMessage {
  role: string;
  content?: unknown;
  tool_calls?: Array<{ id: string; type: string; function: { name: string; arguments: string } }>;
  tool_call_id?: string;
  [key: string]: unknown;
}

export interface FakeModelRequest {
  model: string;
  messages: FakeMessage[];
  /** Names of the tools offered. */
  tools: string[];
  stream: boolean;
  /** The raw request body. */
  body: unknown;
  headers: IncomingHttpHeaders;
}

export interface FakeToolCall {
  name: string;
  /** JSON-encoded by the server; a string is sent as-is (to script malformed arguments). */
  arguments: unknown;
  id?: string;
}

export interface FakeReply {
  text?: string;
  toolCalls?: FakeToolCall[];
  usage?: { prompt_tokens: number; completion_tokens: number };
  /** Answer with this error status and an OpenAI-style error body. */
  status?: number;
  /** The error body's message (with `status`). */
  message?: string;
  /** Extra response headers (e.g. retry-after-ms). */
  headers?: Record<string, string>;
  /** Never answer; the socket is destroyed on close(). */
  hang?: boolean;
  /** Wait this long before answering. */
  delayMs?: number;
}

export type FakeReplyFunction = (request: FakeModelRequest) => FakeReply | Promise<FakeReply>;

export interface FakeModel {
  /** Ends in /v1, as OpenAI-compatible base URLs do. */
  baseUrl: string;
  requests: FakeModelRequest[];
  /** Answers later requests with another reply function. */
  setReply(reply: FakeReplyFunction): void;
  close(): Promise<void>;
}

const DEFAULT_USAGE = { prompt_tokens: 10, completion_tokens: 5 };

/** Starts the fake on 127.0.0.1 and a free port. */
export async function startFakeModel(initialReply: FakeReplyFunction): Promise<FakeModel> {
  let reply = initialReply;
  const requests: FakeModelRequest[] = [];
  let counter = 0;

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      void (async () => {
        if (req.method !== "POST" || req.url?.split("?")[0] !== "/v1/chat/completions") {
          sendError(res, 404, `No route for ${req.method} ${req.url}`);
          return;
        }
        let body: Record<string, unknown>;
        try {
          body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as Record<string, unknown>;
        } catch {
          sendError(res, 400, "The request body is not JSON");
          return;
        }
        const request: FakeModelRequest = {
          model: String(body.model),
          messages: (body.messages ?? []) as FakeMessage[],
          tools: ((body.tools ?? []) as Array<{ function?: { name?: string } }>).map((t) =>
            String(t.function?.name),
          ),
          stream: body.stream === true,
          body,
          headers: req.headers,
        };
        requests.push(request);
        let answer: FakeReply;
        try {
          answer = await reply(request);
        } catch (error) {
          sendError(res, 500, `fake model reply failed: ${(error as Error).message}`);
          return;
        }
        if (answer.hang) return;
        if (answer.delayMs) await new Promise((r) => setTimeout(r, answer.delayMs));
        if (answer.status && answer.status >= 400) {
          sendError(res, answer.status, answer.message ?? `fake error ${answer.status}`, answer);
          return;
        }
        counter++;
        const includeUsage =
          (body.stream_options as { include_usage?: unknown } | undefined)?.include_usage === true;
        if (request.stream) sendStream(res, request.model, counter, answer, includeUsage);
        else sendCompletion(res, request.model, counter, answer);
      })();
    });
  });

  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests,
    setReply(next) {
      reply = next;
    },
    async close() {
      // Hanging requests keep their sockets open; close() would wait for them forever.
      server.closeAllConnections();
      await new Promise<void>((resolve, reject) =>
        server.close((error) => (error ? reject(error) : resolve())),
      );
    },
  };
}

/** Answers with the given replies in order; past the end, a 500 that says so. */
export function scripted(replies: FakeReply[]): FakeReplyFunction {
  let next = 0;
  return () => {
    const reply = replies[next];
    next++;
    if (!reply) {
      return {
        status: 500,
        message: `fake model script ran out: request ${next} but only ${replies.length} replies were scripted`,
      };
    }
    return reply;
  };
}

/** A reply that calls one tool. */
export function callTool(name: string, args: unknown, extra: Partial<FakeReply> = {}): FakeReply {
  return { toolCalls: [{ name, arguments: args }], ...extra };
}

/** The tool results (role "tool") a request carries, oldest first. */
export function toolResults(
  request: FakeModelRequest,
): Array<{ toolCallId: string; content: string }> {
  return request.messages
    .filter((m) => m.role === "tool")
    .map((m) => ({ toolCallId: String(m.tool_call_id), content: contentText(m.content) }));
}

/** The text of the last tool result in a request, or undefined. */
export function lastToolResult(request: FakeModelRequest): string | undefined {
  return toolResults(request).at(-1)?.content;
}

/** The text of the last user message in a request, or undefined. */
export function lastUserMessage(request: FakeModelRequest): string | undefined {
  const message = request.messages.filter((m) => m.role === "user").at(-1);
  return message ? contentText(message.content) : undefined;
}

function contentText(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content
      .map((part) => (part && typeof part === "object" && "text" in part ? String(part.text) : ""))
      .join("");
  }
  return "";
}

function encodeArguments(value: unknown): string {
  return typeof value === "string" ? value : JSON.stringify(value ?? {});
}

function sendError(res: ServerResponse, status: number, message: string, reply?: FakeReply): void {
  res.writeHead(status, { "content-type": "application/json", ...reply?.headers });
  res.end(
    JSON.stringify({
      error: {
        message,
        type: status >= 500 ? "server_error" : "invalid_request_error",
        param: null,
        code: null,
      },
    }),
  );
}

function sendCompletion(res: ServerResponse, model: string, n: number, reply: FakeReply): void {
  const usage = reply.usage ?? DEFAULT_USAGE;
  const toolCalls = (reply.toolCalls ?? []).map((call, i) => ({
    id: call.id ?? `call_${n}_${i}`,
    type: "function",
    function: { name: call.name, arguments: encodeArguments(call.arguments) },
  }));
  res.writeHead(200, { "content-type": "application/json", ...reply.headers });
  res.end(
    JSON.stringify({
      id: `chatcmpl-${n}`,
      object: "chat.completion",
      created: Math.floor(Date.now() / 1000),
      model,
      choices: [
        {
          index: 0,
          message: {
            role: "assistant",
            content: reply.text ?? null,
            ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}),
          },
          finish_reason: toolCalls.length > 0 ? "tool_calls" : "stop",
        },
      ],
      usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens },
    }),
  );
}

function sendStream(
  res: ServerResponse,
  model: string,
  n: number,
  reply: FakeReply,
  includeUsage: boolean,
): void {
  res.writeHead(200, {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    ...reply.headers,
  });
  const base = {
    id: `chatcmpl-${n}`,
    object: "chat.completion.chunk",
    created: Math.floor(Date.now() / 1000),
    model,
  };
  const send = (payload: unknown) => res.write(`data: ${JSON.stringify(payload)}\n\n`);
  const delta = (d: unknown, finish: string | null = null) =>
    send({ ...base, choices: [{ index: 0, delta: d, finish_reason: finish }] });

  delta({ role: "assistant", content: "" });
  for (const piece of split(reply.text ?? "", 3)) delta({ content: piece });
  const calls = reply.toolCalls ?? [];
  calls.forEach((call, index) => {
    const id = call.id ?? `call_${n}_${index}`;
    delta({
      tool_calls: [{ index, id, type: "function", function: { name: call.name, arguments: "" } }],
    });
    for (const piece of split(encodeArguments(call.arguments), 3)) {
      delta({ tool_calls: [{ index, function: { arguments: piece } }] });
    }
  });
  delta({}, calls.length > 0 ? "tool_calls" : "stop");
  if (includeUsage) {
    const usage = reply.usage ?? DEFAULT_USAGE;
    send({
      ...base,
      choices: [],
      usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens },
    });
  }
  res.end("data: [DONE]\n\n");
}

/** Splits text into about `parts` pieces (none when the text is empty). */
function split(text: string, parts: number): string[] {
  if (!text) return [];
  const size = Math.max(1, Math.ceil(text.length / parts));
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}

/**
 * The service's model settings pointing at a fake: an OpenAI-compatible provider with a
 * price, so tasks have a cost.
 */
export function fakeModelEnv(
  model: { baseUrl: string },
  apiKey: string,
  modelId = "fake-coder",
): Record<string, string> {
  return {
    LLM_PROVIDER: "openai-compatible",
    LLM_BASE_URL: model.baseUrl,
    LLM_API_KEY: apiKey,
    LLM_MODEL: modelId,
    LLM_PRICE_INPUT_PER_MTOK: "3",
    LLM_PRICE_OUTPUT_PER_MTOK: "15",
  };
}
