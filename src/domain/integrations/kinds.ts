import { z } from "zod";
import { repoTarget, type IntegrationKind, type IntegrationType } from "./types.js";

/*
 * Settings and secrets of each integration type. Secrets are write-only: accepted on create
 * and PATCH, never answered (views list only which are set), redacted from logs like the
 * service's own. One line per type in INTEGRATION_KINDS: a missing type is a compile error.
 */

const secret = (what: string) => z.string().min(8).max(4096).describe(what);
const slackId = z
  .string()
  .regex(/^[A-Z0-9]{2,30}$/, "must be a Slack id such as C0123ABCD or U0123ABCD");

export const slackKind = {
  type: "slack",
  settings: z.strictObject({
    team_id: slackId
      .optional()
      .describe("the Slack workspace (T…); requests from another are refused"),
    default_repo: repoTarget.optional().describe("where tasks go when the channel has no mapping"),
    channels: z
      .record(slackId, repoTarget)
      .default({})
      .describe("channel id → repository its tasks run on"),
    allowed_users: z
      .array(slackId)
      .max(500)
      .default([])
      .describe("Slack user ids that may press Approve / Reject buttons"),
    notify_channel: slackId
      .optional()
      .describe("channel for tasks started by automations and CI failures"),
    command: z
      .string()
      .regex(/^\/[a-z0-9_-]{1,31}$/)
      .default("/foreman")
      .describe("the slash command's name, for help texts"),
  }),
  secrets: z.strictObject({
    signing_secret: secret(
      "the Slack app's signing secret, for requests to this integration's own endpoints; not needed when the service's app (SLACK_SIGNING_SECRET) is installed through Slack",
    ).optional(),
    bot_token: secret(
      "the bot token (xoxb-…) the service posts with; installing the app through Slack (POST /integrations/{id}/slack/install) sets it",
    ).optional(),
  }),
} satisfies IntegrationKind<z.ZodType, z.ZodType>;

export const linearKind = {
  type: "linear",
  settings: z.strictObject({
    teams: z
      .record(z.string().min(1).max(100), repoTarget)
      .default({})
      .describe("team key or id → repository"),
    label: z
      .string()
      .min(1)
      .max(100)
      .default("agent")
      .describe("the label that turns an issue into a task"),
    agent_user_id: z
      .string()
      .max(100)
      .optional()
      .describe("assigning an issue to this user also starts a task"),
  }),
  secrets: z.strictObject({
    webhook_secret: secret("the Linear webhook's signing secret"),
    api_key: secret("a Linear API key the service comments and moves issues with"),
  }),
} satisfies IntegrationKind<z.ZodType, z.ZodType>;

export const jiraKind = {
  type: "jira",
  settings: z.strictObject({
    site_url: z.url().max(300).describe("https://<site>.atlassian.net"),
    email: z.email().max(300).describe("the account the API token belongs to"),
    projects: z
      .record(z.string().min(1).max(100), repoTarget)
      .default({})
      .describe("project key → repository"),
    label: z.string().min(1).max(100).default("agent"),
    transitions: z
      .strictObject({
        started: z.string().max(100).optional(),
        done: z.string().max(100).optional(),
      })
      .default({})
      .describe("transition names for work started and pull request merged"),
  }),
  secrets: z.strictObject({
    webhook_secret: secret("the shared secret of the Jira webhook"),
    api_token: secret("an Atlassian API token"),
  }),
} satisfies IntegrationKind<z.ZodType, z.ZodType>;

export const INTEGRATION_KINDS = {
  slack: slackKind,
  linear: linearKind,
  jira: jiraKind,
} satisfies Record<IntegrationType, IntegrationKind<z.ZodType, z.ZodType>>;

export type SlackSettings = z.infer<typeof slackKind.settings>;
export type SlackSecrets = z.infer<typeof slackKind.secrets>;
export type LinearSettings = z.infer<typeof linearKind.settings>;
export type LinearSecrets = z.infer<typeof linearKind.secrets>;
export type JiraSettings = z.infer<typeof jiraKind.settings>;
export type JiraSecrets = z.infer<typeof jiraKind.secrets>;
