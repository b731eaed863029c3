import type { StageContext } from "./stage.js";

/*
 * Progress lines of a model loop (planning, implementing, fixing): what the model calls and
 * says, as task log events, stored in the order the model produced them.
 */

/** One line for a tool call, e.g. `read_file src/a.ts` or `run_command \`npm test\``. */
export function describeCall(name: string, input: unknown): string {
  const args = input && typeof input === "object" ? (input as Record<string, unknown>) : {};
  if (typeof args.path === "string") return `${name} ${args.path}`;
  if (typeof args.command === "string") return `${name} \`${args.command.slice(0, 120)}\``;
  if (typeof args.query === "string") return `${name} ${JSON.stringify(args.query.slice(0, 120))}`;
  return name;
}

/** The first line of the model's text between tool calls, capped; empty when blank. */
export function firstLine(text: string): string {
  return text.trim().split("\n")[0]?.slice(0, 300) ?? "";
}

/**
 * A log that keeps order without making the model loop wait: each line is appended after
 * the one before. `flush` waits for all of them; a failed append never stops the loop.
 */
export function progressLog(ctx: Pick<StageContext, "log">, prefix?: string) {
  let chain = Promise.resolve();
  return {
    note(message: string): void {
      const line = prefix ? `${prefix}: ${message}` : message;
      chain = chain.then(() => ctx.log(line)).catch(() => undefined);
    },
    flush: () => chain,
  };
}
