import { z } from "zod";
import type { Config } from "../../config/env.js";
import type { Models } from "../../db/models.js";
import { errors, isAppError } from "../../errors.js";
import {
  LlmError,
  LlmNotConfiguredError,
  LlmProtocolError,
  NOT_CONFIGURED_MESSAGE,
} from "../../llm/errors.js";
import type { ModelClient } from "../../llm/provider.js";
import { runToolLoop } from "../../llm/tool-loop.js";
import type { ToolSpec } from "../../llm/types.js";
import { specPlannerSystemPrompt, specPlannerUserPrompt } from "./prompts.js";
import type { Logger } from "../../util/logger.js";
import { redactText } from "../../util/redact.js";
import { listSkills } from "../agents/skills.js";
import { createTasks } from "../tasks/create.js";
import { type TaskDeps } from "../tasks/model.js";

/*
 * The spec planner (docs/api.md, "Spec planner"): `POST /prism/parse` asks the model for a task
 * graph with `submit_tasks` (docs/architecture.md, "Model tool protocol") and checks it;
 * `POST /prism/queue` checks a graph and creates its tasks at once. The graph rules are the
 * same for both: ids unique, dependencies only on listed ids, no cycle. Running the graph is
 * the intake's job (pipeline/intake.ts): a task starts when every task it depends on is DONE
 * and fails when one of them fails.
 */

/** A planned task item of the interface. */
export interface PlannedTask {
  id: number;
  description: string;
  skill: string | null;
  depends_on: number[];
  priority: number;
}

/** Items in one list, for parse and queue alike. */
export const MAX_PLANNED_TASKS = 50;
/** Largest item id and priority (a 32-bit integer: ids are numbers in a list, not keys). */
const MAX_INT = 2_147_483_647;
/** The longest specification `POST /prism/parse` takes (characters). */
export const MAX_SPEC_CHARS = 100_000;
/**
 * Times the model is told what was wrong with its `submit_tasks` and asked again. With the
 * first answer that is at most 1 + PARSE_CORRECTIONS model calls for one parse.
 */
export const PARSE_CORRECTIONS = 3;
/** Skills listed to the model at most (the account's own first); any existing one is accepted. */
const MAX_PROMPT_SKILLS = 100;

/** One planned task item as a request body or the model gives it (defaults filled in). */
export const plannedTaskInput = z
  .strictObject({
    id: z.number().int().min(0).max(MAX_INT).describe("task number within the list"),
    description: z
      .string()
      .trim()
      .min(1)
      .max(20_000)
      .describe("implementation-ready task description"),
    skill: z
      .string()
      .trim()
      .min(1)
      .max(64)
      .nullable()
      .default(null)
      .describe("skill to apply (a built-in or one of the account's), or null"),
    depends_on: z
      .array(z.number().int().min(0).max(MAX_INT))
      .max(MAX_PLANNED_TASKS)
      .default([])
      .describe("ids of items that must be DONE first; empty for independent items"),
    priority: z
      .number()
      .int()
      .min(1)
      .max(MAX_INT)
      .default(1)
      .describe("execution priority, 1 is highest"),
  })
  .meta({ id: "PlannedTask" });

export const plannedTaskList = z.array(plannedTaskInput).min(1).max(MAX_PLANNED_TASKS);

/** A problem with one item of a list: its position, the field, and what is wrong. */
export interface ItemProblem {
  index: number;
  field: "id" | "depends_on" | "skill";
  message: string;
}

type GraphItem = Pick<PlannedTask, "id" | "depends_on">;

/**
 * The graph rules (docs/api.md, "Spec planner"): unique ids, dependencies only on listed ids,
 * no cycle (one cycle is named, as `1 -> 3 -> 1` where `->` reads "depends on"). Empty when the
 * graph is valid.
 */
export function taskGraphProblems(items: readonly GraphItem[]): ItemProblem[] {
  const problems: ItemProblem[] = [];
  const first = new Map<number, number>();
  items.forEach((item, index) => {
    const earlier = first.get(item.id);
    if (earlier === undefined) first.set(item.id, index);
    else
      problems.push({
        index,
        field: "id",
        message: `Id ${item.id} is used twice (items ${earlier} and ${index} of the list); ids must be unique.`,
      });
  });
  items.forEach((item, index) => {
    const unknown = [...new Set(item.depends_on)].filter((dep) => !first.has(dep));
    for (const dep of unknown)
      problems.push({
        index,
        field: "depends_on",
        message: `Task ${item.id} depends on ${dep}, which is not in the list.`,
      });
  });
  // With duplicate ids the edges are ambiguous; the cycle check waits for unique ids.
  if (problems.some((p) => p.field === "id")) return problems;
  const cycle = findCycle(items);
  if (cycle) {
    problems.push({
      index: first.get(cycle[0]!)!,
      field: "depends_on",
      message: `The dependencies form a cycle: ${cycle.join(" -> ")}.`,
    });
  }
  return problems;
}

/**
 * A dependency cycle as a path of ids that starts and ends with its smallest id, or null.
 * Edges to ids not in the list are ignored.
 */
export function findCycle(items: readonly GraphItem[]): number[] | null {
  const edges = new Map<number, number[]>();
  for (const item of items) edges.set(item.id, [...new Set(item.depends_on)]);
  const state = new Map<number, "open" | "done">();
  const path: number[] = [];

  function visit(id: number): number[] | null {
    state.set(id, "open");
    path.push(id);
    for (const dep of edges.get(id) ?? []) {
      if (!edges.has(dep)) continue;
      const seen = state.get(dep);
      if (seen === "open") return path.slice(path.indexOf(dep));
      if (seen === undefined) {
        const found = visit(dep);
        if (found) return found;
      }
    }
    path.pop();
    state.set(id, "done");
    return null;
  }

  for (const id of [...edges.keys()].sort((a, b) => a - b)) {
    if (state.has(id)) continue;
    const loop = visit(id);
    if (!loop) continue;
    const start = loop.indexOf(Math.min(...loop));
    const rotated = [...loop.slice(start), ...loop.slice(0, start)];
    return [...rotated, rotated[0]!];
  }
  return null;
}

function byPriorityThenId<T extends Pick<PlannedTask, "id" | "priority">>(a: T, b: T): number {
  return a.priority - b.priority || a.id - b.id;
}

/**
 * The items in levels: level 0 has no dependencies, level k holds items whose deepest
 * dependency is in level k-1; each level sorted by priority, then id. Needs a valid graph.
 */
export function taskLevels<T extends GraphItem & Pick<PlannedTask, "priority">>(
  items: readonly T[],
): T[][] {
  const byId = new Map(items.map((item) => [item.id, item]));
  const level = new Map<number, number>();
  function levelOf(item: T, depth: number): number {
    const known = level.get(item.id);
    if (known !== undefined) return known;
    if (depth > items.length) throw new Error("taskLevels needs an acyclic graph");
    let value = 0;
    for (const dep of item.depends_on) {
      const target = byId.get(dep);
      if (!target) throw new Error(`taskLevels: unknown dependency ${dep}`);
      value = Math.max(value, levelOf(target, depth + 1) + 1);
    }
    level.set(item.id, value);
    return value;
  }
  const levels: T[][] = [];
  for (const item of items) (levels[levelOf(item, 0)] ??= []).push(item);
  return levels.map((items_) => [...items_].sort(byPriorityThenId));
}

/** `execution_order` of `POST /prism/queue`: the ids of each level, in order. */
export function executionOrder(items: readonly PlannedTask[]): number[][] {
  return taskLevels(items).map((level) => level.map((item) => item.id));
}

/**
 * Dependency order for `POST /prism/parse`: level by level (every item after all it depends
 * on), ties by priority, then id — the order of `execution_order` flattened.
 */
export function dependencyOrder<T extends PlannedTask>(items: readonly T[]): T[] {
  return taskLevels(items).flat();
}

/** Skills a planned task may name: the account's own and the built-ins. */
async function availableSkills(
  models: Models,
  accountId: string,
): Promise<Array<{ name: string; description: string }>> {
  return (await listSkills(models, accountId)).map((s) => ({
    name: s.name,
    description: s.description,
  }));
}

/** Items that name a skill outside `known`. */
function skillProblems(items: readonly PlannedTask[], known: ReadonlySet<string>): ItemProblem[] {
  const names = [...known].sort();
  const shown = names.length > 30 ? `${names.slice(0, 30).join(", ")}, …` : names.join(", ");
  return items.flatMap((item, index) =>
    item.skill !== null && !known.has(item.skill)
      ? [
          {
            index,
            field: "skill" as const,
            message: `Task ${item.id} names the skill "${item.skill}", which does not exist; use one of ${shown || "(no skills)"}, or null.`,
          },
        ]
      : [],
  );
}

/**
 * `submit_tasks` (docs/architecture.md, "Model tool protocol"); its arguments are refused with
 * the graph and skill problems.
 */
function submitTasksTool(known: ReadonlySet<string>): ToolSpec<{ tasks: PlannedTask[] }> {
  return {
    name: "submit_tasks",
    description:
      "Submit the implementation tasks of the specification, all at once: each with an integer id, a stand-alone description, a skill name or null, the ids it depends on, and a priority (1 is highest).",
    input: z.strictObject({ tasks: plannedTaskList }).superRefine((value, ctx) => {
      for (const problem of [
        ...taskGraphProblems(value.tasks),
        ...skillProblems(value.tasks, known),
      ]) {
        ctx.addIssue({
          code: "custom",
          path: ["tasks", problem.index, problem.field],
          message: problem.message,
        });
      }
    }),
  };
}

export interface PlannerDeps {
  config: Config;
  models: Models;
  logger?: Logger | undefined;
  modelClient?: ModelClient | undefined;
}

/**
 * `POST /prism/parse`: the model's task list for a specification, checked and in dependency
 * order. Invalid lists are sent back with what was wrong, PARSE_CORRECTIONS times at most;
 * then 502 naming the problems. 503 without a model.
 */
export async function parseSpec(
  deps: PlannerDeps,
  accountId: string,
  spec: string,
): Promise<PlannedTask[]> {
  const model = deps.modelClient;
  if (!model?.configured) throw errors.upstream(model?.reason ?? NOT_CONFIGURED_MESSAGE, 503);
  const skills = await availableSkills(deps.models, accountId);
  const tool = submitTasksTool(new Set(skills.map((s) => s.name)));
  const limit = deps.config.llm.maxTaskCostUsd;
  let spentUsd = 0;
  let submissions = 0;
  let lastSubmission: unknown;
  let result;
  try {
    result = await runToolLoop({
      client: model,
      system: specPlannerSystemPrompt(skills.slice(0, MAX_PROMPT_SKILLS), MAX_PLANNED_TASKS),
      prompt: specPlannerUserPrompt(spec),
      tools: [],
      finishTools: [tool],
      maxSteps: 1 + PARSE_CORRECTIONS,
      onToolCall(call) {
        if (call.name !== tool.name) return;
        submissions++;
        lastSubmission = call.input;
      },
      async onUsage(step) {
        spentUsd += step.usd;
        if (spentUsd >= limit) {
          throw errors.upstream(
            `Planning the specification cost $${spentUsd.toFixed(4)} of the $${limit.toFixed(2)} limit (MAX_TASK_COST_USD) before the model submitted a valid task list. Raise MAX_TASK_COST_USD or shorten the specification.`,
          );
        }
      },
    });
  } catch (error) {
    if (error instanceof LlmProtocolError && submissions > 0) {
      const problems = await submissionProblems(tool, lastSubmission);
      throw errors.upstream(
        redactText(
          `The model's task list was still invalid after ${submissions} submission${submissions === 1 ? "" : "s"} (${PARSE_CORRECTIONS} corrections allowed): ${problems}`,
        ),
      );
    }
    throw modelFailure(error);
  }
  deps.logger?.info(
    {
      tasks: result.input.tasks.length,
      steps: result.steps,
      usd: Number(result.usage.usd.toFixed(6)),
    },
    "specification planned",
  );
  return dependencyOrder(result.input.tasks).map((item) => ({
    id: item.id,
    // The model saw only redacted text; scrubbing its answer too costs nothing.
    description: redactText(item.description),
    skill: item.skill,
    depends_on: [...new Set(item.depends_on)],
    priority: item.priority,
  }));
}

/** What was wrong with the model's last `submit_tasks` arguments, as one line. */
async function submissionProblems(
  tool: ToolSpec<{ tasks: PlannedTask[] }>,
  input: unknown,
): Promise<string> {
  const parsed = await tool.input.safeParseAsync(input);
  if (parsed.success) return "its last answer was refused (see the model's conversation).";
  const lines = parsed.error.issues.map((issue) => {
    const path = issue.path.map(String).join(".");
    return `${path || "(arguments)"}: ${issue.message}`;
  });
  const shown = lines.slice(0, 5).join("; ");
  return lines.length > 5 ? `${shown}; and ${lines.length - 5} more.` : shown;
}

/** Model-layer failures as API errors: 503 without a model, 502 for what the model did. */
function modelFailure(error: unknown): unknown {
  if (isAppError(error)) return error;
  if (error instanceof LlmNotConfiguredError) return errors.upstream(error.message, 503);
  if (error instanceof LlmProtocolError) {
    return errors.upstream(redactText(`The model did not deliver a task list: ${error.message}`));
  }
  if (error instanceof LlmError) {
    return errors.upstream(redactText(`The model provider failed: ${error.message}`));
  }
  return error;
}

export interface QueueInput {
  tasks: PlannedTask[];
  repo_id: string;
  workspace_id: string;
  auto_approve: boolean;
}

export interface QueueResult {
  queued: string[];
  execution_order: number[][];
}

/**
 * `POST /prism/queue`: checks the graph and the skills (400 naming the problem), then creates
 * every task at once with one quota claim (429 and nothing created when it does not fit).
 * Dependencies become task ids; `queued` is in item order.
 */
export async function queuePlannedTasks(
  deps: TaskDeps,
  accountId: string,
  input: QueueInput,
): Promise<QueueResult> {
  rejectProblems(taskGraphProblems(input.tasks));
  const skills = await availableSkills(deps.models, accountId);
  rejectProblems(skillProblems(input.tasks, new Set(skills.map((s) => s.name))));
  const position = new Map(input.tasks.map((item, index) => [item.id, index]));
  const created = await createTasks(
    deps,
    accountId,
    input.tasks.map((item) => ({
      workspace_id: input.workspace_id,
      repo_id: input.repo_id,
      description: item.description,
      auto_approve: input.auto_approve,
      skill_name: item.skill,
      source: "prism",
      origin: { planned_id: item.id, priority: item.priority },
      depends_on_batch: [...new Set(item.depends_on)].map((dep) => position.get(dep)!),
    })),
  );
  return {
    queued: created.map((task) => task._id),
    execution_order: executionOrder(input.tasks),
  };
}

function rejectProblems(problems: ItemProblem[]): void {
  const [first] = problems;
  if (!first) return;
  const more = problems.length - 1;
  throw errors.validation(
    problems.map((p) => ({ path: `body.tasks.${p.index}.${p.field}`, message: p.message })),
    more > 0
      ? `${first.message} (${more} more problem${more === 1 ? "" : "s"} in details)`
      : first.message,
  );
}
