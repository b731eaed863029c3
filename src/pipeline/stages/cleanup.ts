import { removeWorkdir } from "../../workcopy/volume.js";
import type { MemoryKind } from "../../db/models.js";
import { memoryScopeOf, remember } from "../../domain/agents/memory.js";
import { keepWorkdir } from "../kept-workdirs.js";
import type { Stage } from "../stage.js";

/**
 * CLEANUP: what the task taught about the repository goes to its memory (verification
 * commands that worked, conventions the agent noted), the working copy is removed (or, with a
 * branch to follow up, kept for a while: kept-workdirs.ts), and the task ends DONE with its
 * pull request (or none).
 */
export const cleanupStage: Stage = {
  name: "cleanup",
  phase: "CLEANUP",
  async run(ctx) {
    const { task } = ctx;
    const items: Array<{ kind: MemoryKind; text: string }> = [];
    for (const result of task.checks?.results ?? []) {
      if (result.ok)
        items.push({
          kind: "verification",
          text: `\`${result.command}\` (${result.name}) is a check that works for this repository.`,
        });
    }
    for (const note of task.learned ?? []) items.push({ kind: "convention", text: note });
    const added = await remember(ctx.models, memoryScopeOf(task), task._id, items);
    if (items.length > 0)
      await ctx.log(
        `Repository memory: ${added} new item${added === 1 ? "" : "s"} (${items.length - added} already known).`,
      );
    // A branch can be followed up: its working copy stays for that (kept-workdirs.ts).
    const { followUpKeepMs: ms, followUpKeepMax: max } = ctx.config.pipeline;
    const minFreeBytes = ctx.config.dataDirMinFreeMb * 1024 * 1024;
    const until = task.branch ? await keepWorkdir(ctx.workdir, { ms, max, minFreeBytes }) : null;
    if (until) {
      await ctx.log(
        `Working copy kept until ${until.toISOString()} for a follow-up of this task (FOLLOW_UP_KEEP_MIN); removed then, unless a follow-up takes it over.`,
      );
    } else {
      await removeWorkdir(ctx.workdir);
      await ctx.log("Working copy removed.");
    }
    if (!task.pr_url && !task.branch)
      await ctx.log("Done without a pull request: the implementation changed nothing.");
    return { end: { status: "completed", pr_url: task.pr_url ?? null } };
  },
};
