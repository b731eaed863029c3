import { mkdir, rm } from "node:fs/promises";
import path from "node:path";
import { runGit, shallowClone } from "../../util/git.js";
import type { Stage } from "../runner.js";

/** CLONING: a shallow clone of the default branch into the task's working copy. */
export const cloneStage: Stage = {
  name: "clone",
  phase: "CLONING",
  async run(ctx) {
    const { repo } = ctx.task;
    await rm(ctx.workdir, { recursive: true, force: true });
    await mkdir(path.dirname(ctx.workdir), { recursive: true });
    await ctx.log(`Cloning ${repo.full_name} (branch ${repo.default_branch}, shallow).`);
    const started = performance.now();
    await shallowClone(await ctx.cloneUrl(), repo.default_branch, ctx.workdir, {
      timeoutMs: ctx.config.pipeline.commandTimeoutS * 1000,
      signal: ctx.signal,
    });
    const sha = (await runGit(["rev-parse", "HEAD"], { cwd: ctx.workdir })).trim();
    await ctx.update({ base_sha: sha });
    await ctx.log(
      `Cloned ${repo.full_name} at ${sha.slice(0, 12)} in ${Math.round(performance.now() - started)} ms.`,
    );
    return { next: "index" };
  },
};
