import { setReportThread } from "../../domain/tasks/store.js";
import { type CreateTaskInput } from "../../domain/tasks/create.js";
import { accountRepos } from "../../domain/workspaces/workspaces.js";
import type { IntegrationRecord } from "../../domain/integrations/store.js";
import type { SlackSettings } from "../../domain/integrations/kinds.js";
import type { RepoTarget, TaskSource } from "../../domain/integrations/types.js";
import type { IntegrationJobDeps } from "../plugin.js";
import { noRepoText, REPO_NAME, usageText, type SlackTaskRequest } from "../shared/task-request.js";
import { slackClient } from "./door.js";
import { slackSettingsOf } from "./settings.js";

/*
 * A task asked for in Slack, as the task request job (shared/task-requests.ts) creates it:
 * the repository it names or its channel's, its input, and the message that opens its thread.
 */

type TaskRequestDeps = IntegrationJobDeps;

/** The repository a Slack request names (owner/name of the account's), or its channel's. */
async function slackTarget(
  deps: TaskRequestDeps,
  integration: IntegrationRecord,
  request: SlackTaskRequest,
): Promise<{ target: RepoTarget | null; description: string }> {
  const settings = integration.settings as SlackSettings;
  const words = request.text.split(/\s+/).filter(Boolean);
  const first = words[0];
  if (first && REPO_NAME.test(first)) {
    const named = first.toLowerCase();
    for (const repo of await accountRepos(deps.tasks.models, integration.account_id))
      if (repo.full_name.toLowerCase() === named)
        return {
          target: { workspace_id: repo.workspace_id, repo_id: repo.repo_id },
          description: words.slice(1).join(" "),
        };
  }
  return {
    target: settings.channels[request.channel] ?? settings.default_repo ?? null,
    description: words.join(" "),
  };
}

/** The task a Slack request asks for, or the text saying why it cannot be one. */
export async function slackTaskInput(
  deps: TaskRequestDeps,
  integration: IntegrationRecord,
  request: SlackTaskRequest,
): Promise<CreateTaskInput | { text: string }> {
  const settings = integration.settings as SlackSettings;
  const { target, description } = await slackTarget(deps, integration, request);
  if (!target) return { text: noRepoText(settings, request.channel) };
  if (!description) return { text: usageText(settings) };
  const report: TaskSource = {
    integration_id: integration._id,
    type: "slack",
    ref: {
      channel: request.channel,
      ...(request.thread_ts ? { thread_ts: request.thread_ts } : {}),
    },
  };
  return {
    ...target,
    description,
    source: "slack",
    origin: {
      integration_id: integration._id,
      slack_user: request.user,
      channel: request.channel,
    },
    report_to: report,
  };
}

/**
 * A command's task says it exists in the channel; that message opens the task's thread, where
 * the plan and the change come. A mention's task answers in the mention's thread.
 */
export async function announceSlackTask(
  deps: TaskRequestDeps,
  integration: IntegrationRecord,
  request: SlackTaskRequest,
  repo: string,
): Promise<void> {
  const client = slackClient(integration, slackSettingsOf(deps).apiUrl);
  const res = await client.chat.postMessage({
    channel: request.channel,
    ...(request.thread_ts ? { thread_ts: request.thread_ts } : {}),
    text: `<@${request.user}> asked for a change: task \`${request.task_id}\` created (repository \`${repo}\`). The plan comes in this thread for approval.`,
  });
  if (!request.thread_ts && res.ts)
    await setReportThread(deps.tasks.models, request.task_id, res.ts);
}
