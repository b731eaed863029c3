import { z } from "zod";
import { taskIdFor, type CreateTaskInput } from "../../domain/tasks/create.js";
import type { SlackSettings } from "../../domain/integrations/kinds.js";
import { repoTarget } from "../../domain/integrations/types.js";

/*
 * What a door queues for a task asked for in Slack, Linear or Jira (task-requests.ts runs
 * it), and the texts a Slack request is answered with when it cannot become one.
 */

const marker = z.strictObject({ id: z.string().min(1).max(500), scope: z.string().min(1) });

const slackRequest = z.strictObject({
  type: z.literal("slack"),
  integration_id: z.string().min(1),
  task_id: z.string().min(1),
  claims: z.array(marker).max(4),
  /** What followed `task`: `[owner/repo] <what to change>`, hidden content stripped. */
  text: z.string().min(1).max(40_000),
  user: z.string().min(1),
  channel: z.string().min(1),
  /** A mention's thread (the task reports there); a command opens its own. */
  thread_ts: z.string().optional(),
  via: z.enum(["command", "mention"]),
});

const trackerRequest = z.strictObject({
  type: z.enum(["linear", "jira"]),
  integration_id: z.string().min(1),
  task_id: z.string().min(1),
  claims: z.array(marker).max(4),
  /** The mapped repository; null for an issue of a team or project no setting maps. */
  target: repoTarget.nullable(),
  /** The team (Linear) or project (Jira) key that no setting maps, to say what to set. */
  unmapped: z.string().max(200).optional(),
  description: z.string().min(1).max(70_000),
  origin: z.record(z.string(), z.string()),
  report_to: z.strictObject({
    integration_id: z.string(),
    type: z.enum(["linear", "jira"]),
    ref: z.record(z.string(), z.string()),
  }),
});

const requestSchema = z.discriminatedUnion("type", [slackRequest, trackerRequest]);
export type TaskRequest = z.infer<typeof requestSchema>;
export type SlackTaskRequest = z.infer<typeof slackRequest>;
export type TrackerTaskRequest = z.infer<typeof trackerRequest>;

export const TASK_REQUEST_JOB = { name: "integration.task-request", schema: requestSchema };

/** Queues a task request once per delivery; false when that delivery was queued before. */
export type RequestTask = (request: TaskRequest) => Promise<boolean>;

/** The task id of a delivery: the same delivery (or its retry) names the same task. */
export function deliveryTaskId(integrationId: string, deliveryKey: string): string {
  return taskIdFor("integration-delivery", integrationId, deliveryKey);
}

/** A word that names a repository (`owner/name`) in a Slack request. */
export const REPO_NAME = /^[\w.-]+\/[\w.-]+$/;

/** The Slack text for a channel with no repository, saying what to set. */
export function noRepoText(settings: SlackSettings, channel: string): string {
  return (
    `No repository is set for this channel. Name one (\`${settings.command} task owner/repo …\`), ` +
    `or map the channel in the integration's settings (\`channels.${channel}\`) or set \`default_repo\`.`
  );
}

/** The Slack text for a `task` with nothing to do. */
export function usageText(settings: SlackSettings): string {
  return `Say what to change: \`${settings.command} task [owner/repo] <what to change>\`.`;
}

/** The task a tracker's request asks for, or the text saying its issue maps to no repository. */
export function trackerTaskInput(request: TaskRequest): CreateTaskInput | { text: string } {
  if (request.type === "slack") throw new Error("a Slack request is not a tracker's");
  if (!request.target) return { text: unmappedText(request.type, request.unmapped ?? "unknown") };
  return {
    ...request.target,
    description: request.description,
    source: request.type,
    origin: request.origin,
    report_to: request.report_to,
  };
}

/** The tracker text for an issue whose team or project no setting maps to a repository. */
export function unmappedText(type: "linear" | "jira", key: string): string {
  return type === "linear"
    ? `No repository is set for this issue's team (${key}), so no task was started. Map the team in the integration's settings (\`teams.${key}\`, by team key or id) to a repository of the account.`
    : `No repository is set for this issue's project (${key}), so no task was started. Map the project in the integration's settings (\`projects.${key}\`) to a repository of the account.`;
}
