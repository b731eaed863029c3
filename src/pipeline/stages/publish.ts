import type { TaskRecord } from "../../db/models.js";
import { headCommit, runGit } from "../../util/git.js";
import { remoteArgs } from "./clone.js";
import { redactText } from "../../util/redact.js";
import { StageError } from "../errors.js";
import type { Stage, StageContext } from "../stage.js";
import { ensureWorkingCopy } from "./working-copy.js";
import { changeRequestBody, changeTitle } from "../../domain/pull-requests/change-request-text.js";
import { keepBaselines } from "../../verify/baseline.js";

/** The branch a task's change is pushed to: readable, and unique per task. */
export function branchName(task: Pick<TaskRecord, "_id" | "description" | "plan_summary">): string {
  const words = (task.plan_summary || task.description)
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 40)
    .replace(/-+$/, "");
  const id = task._id
    .replace(/^task_/, "")
    .slice(0, 8)
    .replace(/[^A-Za-z0-9]/g, "x");
  return `foreman/${words || "change"}-${id}`;
}

async function commitChange(ctx: StageContext): Promise<string> {
  const git = (args: string[]) => runGit(args, { cwd: ctx.workdir, signal: ctx.signal });
  const branch = ctx.task.branch ?? ctx.task.follow_up?.branch ?? branchName(ctx.task);
  // The push names the branch (HEAD:refs/heads/<branch>); the working copy needs none.
  await git(["add", "--all"]);
  const head = await headCommit(ctx.workdir);
  // A resumed stage finds its commit already made (HEAD moved past the cloned commit).
  if (!ctx.task.base_sha || head === ctx.task.base_sha) {
    const message = `${changeTitle(ctx.task)}\n\n${redactText(ctx.task.plan_summary ?? ctx.task.description)}\n\nTask: ${ctx.task._id}\n`;
    await git(["commit", "-q", "--no-verify", "-m", message]);
  }
  return branch;
}

async function openPullRequest(
  ctx: StageContext,
  branch: string,
): Promise<{ url: string; number: number }> {
  const { repo } = ctx.task;
  if (!ctx.github.configured || repo.installation_id == null)
    throw new StageError(
      "The branch was pushed, but the pull request cannot be opened: the GitHub App is not configured on this worker (APP_ID, PRIVATE_KEY).",
    );
  const [owner, name] = repo.full_name.split("/") as [string, string];
  const octokit = await ctx.github.octokit(repo.installation_id);
  // A resumed stage may find the pull request it opened before it stopped.
  const open = await octokit.rest.pulls.list({
    owner,
    repo: name,
    head: `${owner}:${branch}`,
    state: "open",
    per_page: 1,
  });
  if (open.data[0]) return { url: open.data[0].html_url, number: open.data[0].number };
  const created = await octokit.rest.pulls.create({
    owner,
    repo: name,
    head: branch,
    base: ctx.task.base_branch ?? repo.default_branch,
    title: changeTitle(ctx.task),
    body: changeRequestBody(ctx.task, { now: new Date() }),
  });
  return { url: created.data.html_url, number: created.data.number };
}

/**
 * The pushed commit's checks were run already: the last verification ran them on its tree.
 * They are kept as that commit's baseline (verify/baseline.ts), so a follow-up starting from
 * it does not run them on the unchanged code again. Only when the commit's tree is the one
 * verified; a failure here costs that follow-up a run, nothing else.
 */
async function keepVerification(ctx: StageContext): Promise<void> {
  const verified = ctx.task.verified;
  if (!verified?.results.length) return;
  try {
    const git = (args: string[]) => runGit(args, { cwd: ctx.workdir, signal: ctx.signal });
    const tree = (await git(["rev-parse", "HEAD^{tree}"])).trim();
    if (tree !== verified.tree) return;
    const commit = await headCommit(ctx.workdir);
    await keepBaselines(
      ctx.models,
      { accountId: ctx.task.account_id, repoId: ctx.task.repo_id, commit },
      verified.results,
    );
  } catch (error) {
    ctx.signal.throwIfAborted();
    ctx.logger.warn(
      { err: error },
      "could not keep the verification as the pushed commit's baseline",
    );
  }
}

/**
 * After the diff is approved (still REVIEWING): the change is committed on a branch of its
 * own and pushed; on GitHub a pull request is opened. On a plain git remote the pushed
 * branch is the result.
 */
export const publishStage: Stage = {
  name: "publish",
  phase: "REVIEWING",
  async run(ctx) {
    await ensureWorkingCopy(ctx);
    const branch = await commitChange(ctx);
    const url = await ctx.cloneUrl();
    const config = await remoteArgs(ctx, url);
    const followUp = ctx.task.follow_up;
    // A follow-up adds commits to its parent's branch: never forced, so commits pushed there
    // since it cloned are never lost (the push is refused instead).
    const force = followUp ? [] : ["--force"];
    try {
      await runGit(["push", ...force, "--quiet", "--no-verify", url, `HEAD:refs/heads/${branch}`], {
        config,
        cwd: ctx.workdir,
        timeoutMs: ctx.config.pipeline.commandTimeoutS * 1000,
        signal: ctx.signal,
      });
    } catch (error) {
      if (!followUp) throw error;
      throw new StageError(
        `The branch ${branch} moved on while this follow-up worked, so its commits were not pushed; start another follow-up of the parent task to work from the branch's new head.`,
      );
    }
    await ctx.update({ branch });
    await ctx.log(`Pushed branch ${branch} to ${ctx.task.repo.full_name}.`);
    await keepVerification(ctx);
    if (followUp) {
      // The parent's pull request (if any) shows the new commits: no new one is opened.
      await ctx.update({
        pr_url: followUp.pr_url,
        pr_number: followUp.pr_number,
        ...(followUp.pr_url ? { pr_state: "open" } : {}),
      });
      await ctx.log(
        followUp.pr_url
          ? `The new commits are on the pull request ${followUp.pr_url}.`
          : "A follow-up on a pushed branch: the branch is the result (no pull request).",
      );
      return { next: "cleanup" };
    }
    if (ctx.task.repo.kind !== "github") {
      await ctx.log("A plain git remote: the pushed branch is the result (no pull request).");
      return { next: "cleanup" };
    }
    let pr: { url: string; number: number };
    try {
      pr = await openPullRequest(ctx, branch);
    } catch (error) {
      if (error instanceof StageError) throw error;
      const status = (error as { status?: number }).status;
      const message = redactText((error as Error).message ?? String(error)).slice(0, 500);
      throw new StageError(
        `The branch ${branch} was pushed, but GitHub refused to open the pull request${status ? ` (HTTP ${status})` : ""}: ${message}`,
      );
    }
    await ctx.update({ pr_url: pr.url, pr_number: pr.number, pr_state: "open" });
    await ctx.log(`Opened pull request ${pr.url}.`);
    return { next: "cleanup" };
  },
};
