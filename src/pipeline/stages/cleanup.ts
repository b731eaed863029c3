import { rm } from "node:fs/promises";
import type { MemoryKind } from "../../db/models.js";
import { remember } from "../../domain/memory.js";
import type { Stage } from "../runner.js";

interface CheckRecord {
  results: Array<{ name: string; command: string; ok: boolean }>;
  fix_attempts?: number;
}

/**
 * CLEANUP: what the task taught about the repository goes to its memory (verification
 * commands that worked, conventions the agent noted), the working copy is removed, and
 * the task ends DONE with its pull request (or none).
 */
export const cleanupStage: Stage = {
  name: "cleanup",
  phase: "CLEANUP",
  async run(ctx) {
    const { task } = ctx;
    const items: Array<{ kind: MemoryKind; text: string }> = [];
    const checks = task.checks as CheckRecord | null;
    for (const result of checks?.results ?? []) {
      if (result.ok)
        items.push({
          kind: "verification",
          text: `\`${result.command}\` (${result.name}) is a check that works for this repository.`,
        });
    }
    for (const note of task.learned ?? []) items.push({ kind: "convention", text: note });
    const added = await remember(
      ctx.models,
      { account_id: task.account_id, workspace_id: task.workspace_id, repo_id: task.repo_id },
      task._id,
      items,
    );
    if (items.length > 0)
      await ctx.log(
        `Repository memory: ${added} new item${added === 1 ? "" : "s"} (${items.length - added} already known).`,
      );
    await rm(ctx.workdir, { recursive: true, force: true });
    await ctx.log("Working copy removed.");
    if (!task.pr_url && !task.branch)
      await ctx.log("Done without a pull request: the implementation changed nothing.");
    return { end: { status: "completed", pr_url: task.pr_url ?? null } };
  },
};
