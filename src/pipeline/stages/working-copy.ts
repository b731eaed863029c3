import { rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { headCommit, runGit, shallowClone } from "../../util/git.js";
import { exists as existsInside } from "../../workcopy/fs.js";
import { workingCopyDiff } from "../diff.js";
import { StageError } from "../errors.js";
import type { StageContext } from "../stage.js";
import { cloneStage, prepareTaskWorkdir, remoteArgs } from "./clone.js";
import { setUpWorkingCopy } from "./setup.js";

/**
 * Makes sure the working copy exists. A stage resumed by a worker on another machine (or
 * after the data directory was cleaned, or after a failure removed it and the task was
 * retried) clones again instead of failing: at the commit the task started from, with the
 * task's stored diff applied (restoreWorkingCopy).
 */
export async function ensureWorkingCopy(ctx: StageContext): Promise<void> {
  const exists = await existsInside(ctx.workdir, ".git");
  if (exists) return;
  if (ctx.task.base_sha) return restoreWorkingCopy(ctx, ctx.task.base_sha);
  await ctx.log("The working copy is not on this worker; cloning it again.");
  const outcome = await cloneStage.run(ctx);
  if (!("next" in outcome)) throw new StageError("Cloning the repository again failed.");
}

/**
 * Clones the task's branch again, moves it to `baseSha` (the commit the task started from,
 * even when the branch moved on since) and applies the task's stored diff, so the work
 * done so far is back.
 */
async function restoreWorkingCopy(ctx: StageContext, baseSha: string): Promise<void> {
  const { repo } = ctx.task;
  const branch = ctx.task.base_branch ?? repo.default_branch;
  // The last round's saved work (saveWork), else the diff the review stored.
  const diff = ctx.task.work_diff ?? ctx.task.diff ?? "";
  await ctx.log(
    `The working copy is not on this worker; cloning ${repo.full_name} again at ${baseSha.slice(0, 12)}${diff ? " and applying the task's diff" : ""}.`,
  );
  await prepareTaskWorkdir(ctx);
  const url = await ctx.cloneUrl();
  const config = await remoteArgs(ctx, url);
  const timeoutMs = ctx.config.pipeline.commandTimeoutS * 1000;
  await shallowClone(url, branch || null, ctx.workdir, { config, timeoutMs, signal: ctx.signal });
  const git = (args: string[]) =>
    runGit(args, { config, cwd: ctx.workdir, timeoutMs, signal: ctx.signal });
  if ((await headCommit(ctx.workdir)) !== baseSha) {
    try {
      await git(["fetch", "--quiet", "--depth", "1", "--no-tags", url, baseSha]);
      await git(["reset", "--hard", "--quiet", baseSha]);
    } catch {
      throw new StageError(
        `The commit ${baseSha.slice(0, 12)} the task started from can no longer be fetched from ${repo.full_name}; the work cannot be restored.`,
      );
    }
  }
  // On the commit's own files, before the task's changes are back (stages/setup.ts).
  await setUpWorkingCopy(ctx);
  if (!diff) return;
  const patch = path.join(path.dirname(ctx.workdir), `${path.basename(ctx.workdir)}.patch`);
  await writeFile(patch, diff.endsWith("\n") ? diff : `${diff}\n`);
  try {
    await git(["apply", "--index", "--whitespace=nowarn", patch]);
  } catch {
    throw new StageError(
      "The task's stored diff no longer applies to the commit it started from (it may have been cut for size); the work cannot be restored.",
    );
  } finally {
    await rm(patch, { force: true });
  }
}

/**
 * Saves the working copy's diff on the task after a round that changed it (implementing,
 * fixing, a round of changes), so a worker that resumes the next stage elsewhere restores the
 * work instead of cloning a copy without it.
 */
export async function saveWork(ctx: StageContext): Promise<void> {
  const { diff } = await workingCopyDiff(ctx.workdir, {
    maxChars: Number.MAX_SAFE_INTEGER,
    signal: ctx.signal,
  });
  await ctx.update({ work_diff: diff });
}
