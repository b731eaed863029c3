import { z } from "zod";
import { MAX_SPEC_CHARS, plannedTaskInput, plannedTaskList } from "../../../domain/prism/prism.js";
import { opaqueId } from "../../schemas.js";

export const parseSpecBody = z.strictObject({
  spec: z
    .string()
    .trim()
    .min(1)
    .max(MAX_SPEC_CHARS)
    .describe("plain-language product specification"),
});

export const queueTasksBody = z.strictObject({
  tasks: plannedTaskList.describe(
    "planned task items (as POST /prism/parse answers them); ids unique, no cycles",
  ),
  repo_id: z
    .string()
    .trim()
    .min(1)
    .max(200)
    .regex(/^[A-Za-z0-9_.:-]+(\/[A-Za-z0-9_.-]+)?$/, "must be a repository id or owner/name")
    .describe("repo_id, or the repository's full name owner/name"),
  workspace_id: opaqueId,
  auto_approve: z.boolean().default(false),
});

export const plannedTasks = z.array(plannedTaskInput);

export const queuedTasks = z
  .object({
    queued: z.array(z.string()).describe("the created task ids, in item order"),
    execution_order: z
      .array(z.array(z.number().int()))
      .describe(
        "levels of item ids: ids in one level run at the same time, levels one after another",
      ),
  })
  .meta({ id: "QueuedTasks" });
