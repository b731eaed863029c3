import type { Stage } from "../stage.js";
import { ensureWorkingCopy } from "./working-copy.js";

/** INDEXING: builds the index that search_code, list_files and the planning context use. */
export const indexStage: Stage = {
  name: "index",
  phase: "INDEXING",
  async run(ctx) {
    await ensureWorkingCopy(ctx);
    const index = await ctx.buildIndex();
    const { stats } = index;
    const skipped = Object.entries(stats.skipped)
      .filter(([, n]) => n > 0)
      .map(([reason, n]) => `${n} ${reason}`)
      .join(", ");
    await ctx.update({ index_stats: stats });
    await ctx.log(
      `Indexed ${stats.files} files (${Math.round(stats.bytes / 1024)} KiB) in ${Math.round(stats.ms)} ms${skipped ? `; skipped ${skipped}` : ""}.`,
    );
    return { next: "plan" };
  },
};
