import { createGrepTool, createReadTools } from "../tools/read-tools.js";
import { trajectoryRecorder } from "./trajectory.js";
import { createWriteTools, type FileChange } from "../tools/write-tools.js";
import { createSyntaxChecker, type SandboxRun } from "../tools/syntax-check.js";
import { runSandboxed } from "../sandbox/index.js";
import { runToolLoop } from "../llm/tool-loop.js";
import { memoryPromptBlock } from "../domain/agents/memory.js";
import { skillForTask, type SkillDefinition } from "../domain/agents/skills.js";
import { createRememberTool, createRunCommandTool, finishTool } from "../tools/agent-tools.js";
import { withBuildCache, type SandboxCache } from "../sandbox/cache.js";
import { owner as cacheOwner, setupCache } from "./stages/setup.js";
import { agentSystemPrompt, readRepositoryInstructions } from "./prompts.js";
import { describeCall, firstLine, progressLog } from "./progress.js";
import type { StageContext } from "./stage.js";
import { openStageMcpTools } from "./mcp.js";

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

/**
 * The caches of the task's commands: the package cache entry its setup step used, read-only
 * (pipeline/stages/setup.ts), and the build caches of the account's repository, kept between
 * runs (sandbox/cache.ts); never another account's.
 */
export async function taskCache(ctx: StageContext): Promise<SandboxCache> {
  return withBuildCache(cacheOwner(ctx), await setupCache(ctx));
}

/** The system prompt parts every agent of a task shares, read once per stage. */
export async function agentContext(
  ctx: StageContext,
): Promise<{ instructions: string; memory: string; skill?: SkillDefinition | undefined }> {
  const [instructions, skill] = await Promise.all([
    readRepositoryInstructions(ctx.workdir),
    skillForTask(ctx.models, ctx.task),
  ]);
  return { instructions, memory: memoryPromptBlock(ctx.task.memories_used ?? []), skill };
}

/** Seconds a syntax check or a grep may take in the sandbox. */
const QUICK_COMMAND_S = 30;

/** Runs a quick command (grep, a syntax check) in the task's sandbox, output capped. */
function quickSandbox(ctx: StageContext, signal: AbortSignal | undefined): SandboxRun {
  return async (command) => {
    const result = await runSandboxed(command, {
      cwd: ctx.workdir,
      timeoutMs: Math.min(QUICK_COMMAND_S, ctx.config.pipeline.commandTimeoutS) * 1000,
      ...(signal ? { signal } : {}),
      maxOutputBytes: 64 * 1024,
      timeBudget: ctx.commandTime,
    });
    return { ok: result.ok, output: result.output };
  };
}

export async function runAgent(
  ctx: StageContext,
  shared: { instructions: string; memory: string; skill?: SkillDefinition | undefined },
  options: AgentOptions,
): Promise<AgentRun> {
  const index = await ctx.index();
  const changes: FileChange[] = [];
  const notes: string[] = [];
  const signal = options.signal ?? ctx.signal;
  const progress = progressLog(ctx, options.label);
  const cache = await taskCache(ctx);
  // The task's MCP servers (pipeline/mcp.ts), for this loop only.
  const mcp = await openStageMcpTools(ctx, options.role, (line) => progress.note(line));
  const sandboxed = quickSandbox(ctx, signal);
  const tools = [
    ...createReadTools(ctx.workdir, () => index),
    createGrepTool(sandboxed),
    ...createWriteTools(ctx.workdir, {
      ...(options.allowedFiles ? { allowedFiles: options.allowedFiles } : {}),
      onChange: (change) => changes.push(change),
      syntaxCheck: createSyntaxChecker(sandboxed),
    }),
    createRunCommandTool({
      cwd: ctx.workdir,
      timeoutMs: ctx.config.pipeline.commandTimeoutS * 1000,
      signal,
      onRun: (line) => progress.note(line),
      onHeartbeat: (line) => void ctx.log(line).catch(() => undefined),
      cache,
      timeBudget: ctx.commandTime,
    }),
    createRememberTool((text) => notes.push(text)),
    ...mcp.tools,
  ];
  const result = await runToolLoop({
    client: ctx.model(),
    system: agentSystemPrompt(
      { ...ctx.task, skill: shared.skill },
      shared.instructions,
      shared.memory,
      options.role,
    ),
    prompt: options.prompt,
    tools,
    finishTools: [finishTool],
    maxSteps: ctx.config.llm.agentMaxSteps,
    onUsage: (usage) => ctx.addUsage(usage),
    onCall: trajectoryRecorder(ctx, options.role),
    onToolCall: (call) => {
      // run_command reports itself when it has run, with its outcome.
      if (call.name !== "run_command") progress.note(describeCall(call.name, call.input));
    },
    onText: (text) => {
      const line = firstLine(text);
      if (line) progress.note(`Model: ${line}`);
    },
    signal,
  }).finally(() => mcp.close());
  await progress.flush();
  const { summary } = result.input;
  return { summary, changes, notes, steps: result.steps };
}
