import { z } from "zod";
import { claimMarker, markerKind } from "../durable/markers.js";
import { createTask } from "../domain/tasks/create.js";
import { openThreadTask } from "../domain/tasks/store.js";
import { isAppError } from "../errors.js";
import type { JobKind } from "../queue/scheduler.js";
import { queueForDelivery } from "./delivery.js";
import type { GithubHandlerDeps, HandlerGroup } from "./deps.js";
import { sanitizeUntrusted } from "../text/sanitize.js";
import {
  hasWriteAccess,
  howToLink,
  reply,
  usableWorkspace,
  workspaceOfInstallation,
  type Thread,
} from "./threads.js";

/** A labelled issue turned into a task. */
export const githubLabelMarker = markerKind("gh-label", "github-label", (deliveryKey: string) => [
  deliveryKey,
]);

/*
 * An issue labelled with AGENT_LABEL (default `agent`) becomes a task built from its title
 * and body; the issue gets the plan for approval and later the pull request link.
 */

const labelJobSchema = z.strictObject({
  delivery_key: z.string(),
  installation_id: z.number().int(),
  repo_id: z.string(),
  repo_full_name: z.string(),
  number: z.number().int(),
  title: z.string(),
  body: z.string(),
  issue_url: z.string(),
  sender: z.string(),
});
type LabelJob = z.infer<typeof labelJobSchema>;
export const LABEL_JOB = { name: "github.label", schema: labelJobSchema };

export const labelHandlers: HandlerGroup = (probot, deps) => {
  probot.on("issues.labeled", async (context) => {
    const { issue, label, repository, installation, sender } = context.payload;
    if (
      !installation ||
      !label ||
      label.name.toLowerCase() !== deps.github.agentLabel.toLowerCase()
    )
      return;
    if (sender.type === "Bot") return;
    const key = `${repository.id}:${issue.number}:${context.id}`;
    await queueForDelivery(
      deps.scheduler,
      LABEL_JOB,
      {
        delivery_key: key,
        installation_id: installation.id,
        repo_id: String(repository.id),
        repo_full_name: repository.full_name,
        number: issue.number,
        title: issue.title.slice(0, 1000),
        body: (issue.body ?? "").slice(0, 65_536),
        issue_url: issue.html_url,
        sender: sender.login,
      },
      { "data.delivery_key": key },
    );
  });
};

/** The job that turns a labelled issue into a task. */
export function labelJob(deps: GithubHandlerDeps): JobKind<LabelJob> {
  const logger = deps.logger.child({ component: "github-labels" });
  return {
    ...LABEL_JOB,
    async run(job) {
      if (!(await claimMarker(deps.models, githubLabelMarker(job.delivery_key)))) return;
      const octokit = await deps.client.octokit(job.installation_id);
      if (!(await hasWriteAccess(octokit, job.repo_full_name, job.sender))) {
        logger.info({ sender: job.sender }, "label ignored: the sender has no write access");
        return;
      }
      const thread: Thread = {
        installation_id: job.installation_id,
        repo_full_name: job.repo_full_name,
        number: job.number,
        is_pull_request: false,
      };
      const workspace = await workspaceOfInstallation(deps.models, job.installation_id);
      if (!usableWorkspace(workspace)) {
        await reply(octokit, thread, howToLink(deps.github.slug));
        return;
      }
      const running = await openThreadTask(
        deps.models,
        workspace.account_id,
        job.repo_id,
        job.number,
      );
      if (running) {
        await reply(
          octokit,
          thread,
          `Task \`${running}\` is already working on this issue; \`/status\` shows where it is.`,
        );
        return;
      }
      const body = sanitizeUntrusted(job.body);
      const description =
        `${sanitizeUntrusted(job.title)}${body ? `\n\n${body}` : ""}\n\n(From issue #${job.number} of ${job.repo_full_name}, labelled by @${job.sender}.)`.slice(
          0,
          20_000,
        );
      try {
        const task = await createTask(deps.tasks, workspace.account_id, {
          workspace_id: workspace._id,
          repo_id: job.repo_id,
          description,
          source: "github",
          origin: { kind: "label", sender: job.sender, issue_url: job.issue_url },
          thread,
        });
        await reply(
          octokit,
          thread,
          `Task \`${task._id}\` created from this issue. I will post the plan here for approval.`,
        );
      } catch (error) {
        if (!isAppError(error) || error.status >= 500) throw error;
        await reply(octokit, thread, `Could not start a task from this issue: ${error.message}`);
      }
    },
  };
}
