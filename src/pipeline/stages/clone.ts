import path from "node:path";
import { adoptWorkdir, prepareWorkdir, removeWorkdir } from "../../workcopy/volume.js";
import { recordDefaultBranch } from "../../domain/workspaces/linking.js";
import { repoField } from "../../domain/tasks/store.js";
import { headCommit, runGit, shallowClone } from "../../util/git.js";
import { remoteGitArgs, RemoteUrlError } from "../../util/remote-url.js";
import { StageError } from "../errors.js";
import type { Stage, StageContext } from "../stage.js";
import { exists as existsInside } from "../../workcopy/fs.js";
import { keptOutputs, setUpAdoptedWorkingCopy, setUpWorkingCopy } from "./setup.js";

/**
 * The clone-URL policy (src/util/remote-url.ts) checked again right before git reaches a
 * plain-git remote: the name may resolve elsewhere than at creation. Answers the git
 * arguments pinning the checked addresses. GitHub remotes are the operator's configured host.
 */
export async function remoteArgs(ctx: StageContext, url: string): Promise<string[]> {
  if (ctx.task.repo.kind === "github") return [];
  try {
    return await remoteGitArgs(url, ctx.config.allowLocalRepos);
  } catch (error) {
    if (error instanceof RemoteUrlError)
      throw new StageError(
        `The clone URL of ${ctx.task.repo.full_name} is not allowed (${error.message}). Only https://, ssh:// and user@host:path remotes on public hosts can be used.`,
      );
    throw error;
  }
}

/**
 * An empty folder for the task's working copy: on a volume of TASK_DISK_LIMIT_MB where the
 * host allows it (workcopy/volume.ts), which the task's log says, else a plain folder.
 */
export async function prepareTaskWorkdir(ctx: StageContext): Promise<void> {
  const limitMb = ctx.config.sandbox.diskLimitMb;
  const how = await prepareWorkdir(ctx.workdir, limitMb, (reason) =>
    ctx.logger.warn(
      { reason },
      "no volume for the working copy; the disk watcher alone keeps the budget",
    ),
  );
  if (how === "volume")
    await ctx.log(
      `The working copy is on a volume of ${limitMb} MB: the kernel stops writes past TASK_DISK_LIMIT_MB.`,
    );
}

/**
 * Moves a fresh shallow clone to the commit the task was pinned to (`base_sha` at creation):
 * a full id is fetched alone; an abbreviated one needs the branch's history to resolve. An
 * unknown commit fails the task at CLONING naming it.
 */
async function checkoutPinned(
  ctx: StageContext,
  url: string,
  config: string[],
  pinned: string,
): Promise<void> {
  const timeoutMs = ctx.config.pipeline.commandTimeoutS * 1000;
  const git = (args: string[]) =>
    runGit(args, { config, cwd: ctx.workdir, timeoutMs, signal: ctx.signal });
  const resolve = async () =>
    (await git(["rev-parse", "--verify", "--quiet", `${pinned}^{commit}`])).trim();
  let sha = "";
  if (/^[0-9a-f]{40}$/.test(pinned)) {
    await git(["fetch", "--quiet", "--depth", "1", "--no-tags", url, pinned]).catch(() => "");
    sha = await resolve().catch(() => "");
  }
  if (!sha) {
    // Not fetchable alone (the server refuses unadvertised ids, or the id is abbreviated):
    // the whole history of the branch, where the commit must be reachable.
    const branch = ctx.task.base_branch ?? ctx.task.repo.default_branch;
    await git([
      "fetch",
      "--quiet",
      "--unshallow",
      "--no-tags",
      url,
      ...(branch ? [branch] : []),
    ]).catch(() => "");
    sha = await resolve().catch(() => "");
  }
  if (!sha) {
    throw new StageError(
      `The commit ${pinned} (base_sha) is not in ${ctx.task.repo.full_name}, or not reachable from the branch the task works on.`,
    );
  }
  await git(["reset", "--hard", "--quiet", sha]);
  await ctx.log(`Checked out ${sha.slice(0, 12)}, the commit the task is pinned to (base_sha).`);
}

/**
 * A follow-up takes over the working copy its parent left on this worker (kept-workdirs.ts)
 * instead of cloning: moved to the follow-up's own folder, brought to the branch's current
 * head (commits people pushed meanwhile included), cleaned of everything that is not the
 * branch's but the setup's outputs, whose setup runs again only when its inputs changed. False
 * when there is none here, or it cannot be brought up to date (then the task clones).
 */
async function adoptParentCopy(ctx: StageContext): Promise<boolean> {
  const parentId = ctx.task.parent_task_id;
  const branch = ctx.task.base_branch;
  if (!parentId || !branch || ctx.task.pinned_sha) return false;
  const started = performance.now();
  try {
    if (!(await adoptWorkdir(path.join(path.dirname(ctx.workdir), parentId), ctx.workdir)))
      return false;
  } catch (error) {
    ctx.logger.warn({ err: error }, "could not take over the parent's kept working copy");
    return false;
  }
  // Whether its installed dependencies can stay: looked at while the branch is fetched.
  const outputs = keptOutputs(ctx);
  const url = await ctx.cloneUrl();
  const config = await remoteArgs(ctx, url);
  const timeoutMs = ctx.config.pipeline.commandTimeoutS * 1000;
  const git = (args: string[]) =>
    runGit(args, { config, cwd: ctx.workdir, timeoutMs, signal: ctx.signal });
  try {
    if (!(await existsInside(ctx.workdir, ".git"))) throw new Error("it has no .git");
    await git(["fetch", "--quiet", "--depth", "1", "--no-tags", url, `refs/heads/${branch}`]);
    await git(["reset", "--hard", "--quiet", "FETCH_HEAD"]);
  } catch (error) {
    if (ctx.signal.aborted) throw error;
    await outputs;
    await removeWorkdir(ctx.workdir);
    await ctx.log(
      `The working copy task ${parentId} left could not be brought to the head of ${branch} (${error instanceof Error ? error.message.split("\n")[0] : String(error)}); cloning instead.`,
    );
    return false;
  }
  const sha = await headCommit(ctx.workdir);
  await ctx.update({ base_sha: sha });
  await ctx.log(
    `Took over the working copy task ${parentId} kept on this worker: ${branch} fetched at ${sha.slice(0, 12)} in ${Math.round(performance.now() - started)} ms, no clone.`,
  );
  await setUpAdoptedWorkingCopy(ctx, outputs);
  return true;
}

/**
 * CLONING: a shallow clone of the default branch into the task's working copy, then its
 * setup step (stages/setup.ts: dependencies through the registries' allowlist). A follow-up
 * takes over its parent's kept working copy instead where there is one (adoptParentCopy).
 */
export const cloneStage: Stage = {
  name: "clone",
  phase: "CLONING",
  async run(ctx) {
    const { repo } = ctx.task;
    const branch = ctx.task.base_branch ?? repo.default_branch;
    if (await adoptParentCopy(ctx)) return { next: "index" };
    await prepareTaskWorkdir(ctx);
    await ctx.log(
      `Cloning ${repo.full_name} (${branch ? `branch ${branch}` : "its default branch"}, shallow).`,
    );
    const started = performance.now();
    const url = await ctx.cloneUrl();
    const config = await remoteArgs(ctx, url);
    await shallowClone(url, branch, ctx.workdir, {
      config,
      timeoutMs: ctx.config.pipeline.commandTimeoutS * 1000,
      signal: ctx.signal,
    });
    if (ctx.task.pinned_sha) {
      await checkoutPinned(ctx, url, config, ctx.task.pinned_sha);
    }
    const sha = await headCommit(ctx.workdir);
    await ctx.update({ base_sha: sha });
    if (!branch) {
      // The default branch was not known: the clone followed the remote's HEAD; keep its
      // name for the later stages (pull request base) and for the workspace.
      const found = (
        await runGit(["symbolic-ref", "--short", "HEAD"], { cwd: ctx.workdir })
      ).trim();
      await ctx.update(repoField("default_branch", found));
      await recordDefaultBranch(ctx.models, ctx.task.workspace_id, ctx.task.repo_id, found).catch(
        (error: unknown) => ctx.logger.warn({ err: error }, "could not record the default branch"),
      );
      await ctx.log(`The default branch of ${repo.full_name} is ${found}.`);
    }
    await ctx.log(
      `Cloned ${repo.full_name} at ${sha.slice(0, 12)} in ${Math.round(performance.now() - started)} ms.`,
    );
    await setUpWorkingCopy(ctx);
    return { next: "index" };
  },
};
