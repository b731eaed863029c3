import { createReadTools } from "../indexer/read-tools.js";
import { createWriteTools, type FileChange } from "../indexer/write-tools.js";
import { runToolLoop } from "../llm/tool-loop.js";
import { memoryPromptBlock, type MemoryView } from "../domain/memory.js";
import { createRememberTool, createRunCommandTool, finishTool } from "./agent-tools.js";
import { agentSystemPrompt, readRepositoryInstructions } from "./prompts.js";
import type { StageContext } from "./runner.js";

/*
 * One tool-using agent over the working copy: the loop IMPLEMENTING and FIXING share. It
 * reads, writes (confined to the working copy, and to `allowedFiles` for a parallel
 * worker), runs commands in the sandbox, and ends with `finish`.
 */

export interface AgentRun {
  summary: string;
  changes: FileChange[];
  notes: string[];
  steps: number;
}

export interface AgentOptions {
  role: "implement" | "fix";
  prompt: string;
  /** Prefix of this agent's progress lines, e.g. "Worker 2/3". */
  label: string;
  allowedFiles?: ReadonlySet<string>;
  signal?: AbortSignal;
}

/** The system prompt parts every agent of a task shares, read once per stage. */
export async function agentContext(
  ctx: StageContext,
): Promise<{ instructions: string; memory: string }> {
  const instructions = await readRepositoryInstructions(ctx.workdir);
  const memories = (ctx.task.memories_used ?? []) as MemoryView[];
  return { instructions, memory: memoryPromptBlock(memories) };
}

function describeCall(name: string, input: unknown): string {
  const args = input && typeof input === "object" ? (input as Record<string, unknown>) : {};
  if (typeof args.path === "string") return `${name} ${args.path}`;
  if (typeof args.command === "string") return `${name} \`${args.command.slice(0, 120)}\``;
  if (typeof args.query === "string") return `${name} ${JSON.stringify(args.query.slice(0, 120))}`;
  return name;
}

export async function runAgent(
  ctx: StageContext,
  shared: { instructions: string; memory: string },
  options: AgentOptions,
): Promise<AgentRun> {
  const index = await ctx.index();
  const changes: FileChange[] = [];
  const notes: string[] = [];
  const signal = options.signal ?? ctx.signal;
  // Progress lines are stored in the order the agent produced them.
  let progress = Promise.resolve();
  const note = (message: string) => {
    progress = progress.then(() => ctx.log(`${options.label}: ${message}`)).catch(() => undefined);
  };
  const tools = [
    ...createReadTools(ctx.workdir, () => index),
    ...createWriteTools(ctx.workdir, {
      ...(options.allowedFiles ? { allowedFiles: options.allowedFiles } : {}),
      onChange: (change) => changes.push(change),
    }),
    createRunCommandTool({
      cwd: ctx.workdir,
      timeoutMs: ctx.config.pipeline.commandTimeoutS * 1000,
      signal,
      onRun: (line) => note(line),
    }),
    createRememberTool((text) => notes.push(text)),
  ];
  const result = await runToolLoop({
    client: ctx.model(),
    system: agentSystemPrompt(ctx.task, shared.instructions, shared.memory, options.role),
    prompt: options.prompt,
    tools,
    finishTools: [finishTool],
    maxSteps: ctx.config.llm.agentMaxSteps,
    onUsage: (usage) => ctx.addUsage(usage),
    onToolCall: (call) => {
      if (call.name !== "run_command") note(describeCall(call.name, call.input));
    },
    onText: (text) => {
      const line = text.trim().split("\n")[0]?.slice(0, 300);
      if (line) note(`Model: ${line}`);
    },
    signal,
  });
  await progress;
  const { summary } = finishTool.input.parse(result.input);
  return { summary, changes, notes, steps: result.steps };
}
