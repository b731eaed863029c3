import type { FakeMessage, FakeModelRequest, FakeReply, FakeToolCall } from "./fake-model.js";

/*
 * A scripted "model" for whole tasks: it recognises which stage is asking (planning,
 * implementing, fixing, reviewing) from the tools offered and the system prompt, and
 * answers the n-th turn of that conversation from a script.
 */

export type Role = "plan" | "implement" | "fix" | "review" | "unknown";

function text(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content))
    return content.map((p) => (typeof p === "string" ? p : String(p?.text ?? ""))).join("");
  return "";
}

export function systemText(request: FakeModelRequest): string {
  return request.messages
    .filter((m: FakeMessage) => m.role === "system")
    .map((m) => text(m.content))
    .join("\n");
}

export function userText(request: FakeModelRequest): string {
  return text(request.messages.find((m) => m.role === "user")?.content);
}

export function roleOf(request: FakeModelRequest): Role {
  if (request.tools.includes("submit_plan")) return "plan";
  if (request.tools.includes("submit_review")) return "review";
  if (request.tools.includes("finish"))
    return systemText(request).includes("implementing an approved plan") ? "implement" : "fix";
  return "unknown";
}

/** How many answers the model already gave in this conversation. */
export function turn(request: FakeModelRequest): number {
  return request.messages.filter((m) => m.role === "assistant").length;
}

export type Script = Partial<
  Record<Role, (request: FakeModelRequest, turn: number) => FakeToolCall[]>
>;

/** Answers each request from the script of its role, with fixed token usage. */
export function agentModel(script: Script) {
  return (request: FakeModelRequest): FakeReply => {
    const role = roleOf(request);
    const step = script[role];
    if (!step) return { text: `no script for role ${role}` };
    return {
      toolCalls: step(request, turn(request)),
      usage: { prompt_tokens: 2000, completion_tokens: 200 },
    };
  };
}

/** A task that adds a greet() helper: a plan, one write, a finish, an approving review. */
export const greetScript: Script = {
  plan: () => [
    {
      name: "submit_plan",
      arguments: {
        summary: "Add a greeting helper.",
        steps: [
          { title: "Add greet()", description: "Export greet(name).", files: ["src/greet.js"] },
        ],
      },
    },
  ],
  implement: (_req, turn) =>
    turn === 0
      ? [
          {
            name: "write_file",
            arguments: {
              path: "src/greet.js",
              content: "export const greet = (n) => `Hi ${n}`;\n",
            },
          },
        ]
      : [{ name: "finish", arguments: { summary: "Added greet()." } }],
  review: () => [
    { name: "submit_review", arguments: { verdict: "approve", summary: "Fine.", comments: [] } },
  ],
};
