import { createHash } from "node:crypto";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

/*
 * A local Anthropic Messages API (POST /v1/messages, non-streaming) that bills prompt caching
 * the way Anthropic documents it
 * (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching):
 * - the prompt is the blocks tools → system → messages, in order;
 * - a block with cache_control is a breakpoint: the prefix up to and including it is written
 *   to the cache (cache_creation_input_tokens) unless already there;
 * - a request reads the longest cached prefix ending at a breakpoint, or at one of the 20
 *   blocks before a breakpoint (cache_read_input_tokens);
 * - prefixes shorter than 1,024 tokens are not cached; input_tokens is the rest.
 * Tokens are estimated as JSON characters / 4. Answers come from a script.
 */

export interface AnthropicToolUse {
  name: string;
  input: unknown;
}

/** An answer without a tool call: text, after a thinking block when given. */
export interface AnthropicTextAnswer {
  text: string;
  thinking?: { thinking: string; signature: string };
}

export interface AnthropicRequestRecord {
  body: Record<string, unknown>;
  /** Blocks with cache_control, in prompt order. */
  breakpoints: number;
  usage: {
    input_tokens: number;
    cache_read_input_tokens: number;
    cache_creation_input_tokens: number;
    output_tokens: number;
  };
}

export interface AnthropicFake {
  baseUrl: string;
  requests: AnthropicRequestRecord[];
  close(): Promise<void>;
}

const MIN_CACHEABLE = 1024;
const LOOKBACK = 20;

function blocksOf(body: Record<string, unknown>): Array<Record<string, unknown>> {
  const blocks: Array<Record<string, unknown>> = [];
  for (const tool of (body.tools ?? []) as Array<Record<string, unknown>>) blocks.push(tool);
  const system = body.system;
  if (typeof system === "string") blocks.push({ type: "text", text: system });
  else if (Array.isArray(system)) blocks.push(...(system as Array<Record<string, unknown>>));
  for (const message of (body.messages ?? []) as Array<{ role: string; content: unknown }>) {
    const content =
      typeof message.content === "string"
        ? [{ type: "text", text: message.content }]
        : (message.content as Array<Record<string, unknown>>);
    // The role is part of what is cached: it goes into each block's identity.
    for (const block of content) blocks.push({ role: message.role, ...block });
  }
  return blocks;
}

export async function startAnthropicFake(
  answer: (turn: number, body: Record<string, unknown>) => AnthropicToolUse | AnthropicTextAnswer,
): Promise<AnthropicFake> {
  const cache = new Set<string>();
  const requests: AnthropicRequestRecord[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      if (req.method !== "POST" || req.url !== "/v1/messages") {
        res.writeHead(404, { "content-type": "application/json" });
        res.end(
          JSON.stringify({
            type: "error",
            error: { type: "not_found_error", message: "no route" },
          }),
        );
        return;
      }
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as Record<string, unknown>;
      const blocks = blocksOf(body);
      // Running hash and token count of every prefix.
      const hashes: string[] = [];
      const tokens: number[] = [];
      const hash = createHash("sha256");
      let total = 0;
      for (const block of blocks) {
        const { cache_control: _ignored, ...plain } = block;
        const text = JSON.stringify(plain);
        hash.update(text);
        hashes.push(hash.copy().digest("hex"));
        total += Math.ceil(text.length / 4);
        tokens.push(total);
      }
      const marks = blocks.flatMap((b, i) => (b.cache_control ? [i] : []));
      let read = 0;
      for (const mark of marks) {
        for (let i = mark; i >= Math.max(0, mark - LOOKBACK); i--) {
          if (cache.has(hashes[i]!)) {
            read = Math.max(read, tokens[i]!);
            break;
          }
        }
      }
      const last = marks.length > 0 ? marks[marks.length - 1]! : -1;
      const cachedEnd = last >= 0 && tokens[last]! >= MIN_CACHEABLE ? tokens[last]! : 0;
      const written = Math.max(0, cachedEnd - read);
      for (const mark of marks) if (tokens[mark]! >= MIN_CACHEABLE) cache.add(hashes[mark]!);
      const turn = ((body.messages ?? []) as Array<{ role: string }>).filter(
        (m) => m.role === "assistant",
      ).length;
      const use = answer(turn, body);
      const usage = {
        input_tokens: total - read - written,
        cache_read_input_tokens: read,
        cache_creation_input_tokens: written,
        output_tokens: 50,
      };
      requests.push({ body, breakpoints: marks.length, usage });
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          id: `msg_${requests.length}`,
          type: "message",
          role: "assistant",
          model: body.model,
          content:
            "text" in use
              ? [
                  ...(use.thinking ? [{ type: "thinking", ...use.thinking }] : []),
                  { type: "text", text: use.text },
                ]
              : [
                  {
                    type: "tool_use",
                    id: `toolu_${requests.length}`,
                    name: use.name,
                    input: use.input,
                  },
                ],
          stop_reason: "text" in use ? "end_turn" : "tool_use",
          stop_sequence: null,
          usage,
        }),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve, reject) =>
        server.close((error) => (error ? reject(error) : resolve())),
      );
    },
  };
}
