import { z } from "zod";
import { INTEGRATION_KINDS } from "../../../domain/integrations/kinds.js";
import { INTEGRATION_TYPES } from "../../../domain/integrations/types.js";
import { label, opaqueId, timestamp } from "../../schemas.js";

const create = <T extends keyof typeof INTEGRATION_KINDS>(type: T) =>
  z.strictObject({
    type: z.literal(type),
    name: label(100),
    enabled: z.boolean().default(true),
    settings: INTEGRATION_KINDS[type].settings,
    secrets: INTEGRATION_KINDS[type].secrets.describe("write-only: never answered"),
  });

export const createIntegrationBody = z.discriminatedUnion("type", [
  create("slack"),
  create("linear"),
  create("jira"),
]);

export const patchIntegrationBody = z
  .strictObject({
    name: label(100).optional(),
    enabled: z.boolean().optional(),
    settings: z
      .record(z.string(), z.unknown())
      .optional()
      .describe("replaces the settings as a whole"),
    secrets: z
      .record(z.string(), z.string())
      .optional()
      .describe("replaces only the secrets named; write-only"),
  })
  .describe("Any fields; the result is validated as a whole, like a POST body.");

export const integrationParams = z.strictObject({ id: opaqueId });

export const integration = z
  .object({
    id: z.string(),
    type: z.enum(INTEGRATION_TYPES),
    name: z.string(),
    enabled: z.boolean(),
    settings: z.record(z.string(), z.unknown()),
    secrets_set: z
      .array(z.string())
      .describe("names of the secrets that are set; values are never answered"),
    endpoints: z
      .record(z.string(), z.string())
      .describe("paths on this service to enter in the vendor's app settings"),
    install: z
      .object({
        team_id: z.string(),
        team_name: z.string().nullable(),
        bot_user_id: z.string().nullable(),
        scopes: z.array(z.string()),
        installed_at: timestamp,
      })
      .nullable()
      .describe(
        "Slack: the workspace the app was installed into through Slack (POST /integrations/{id}/slack/install), else null",
      ),
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: "Integration" });

export const slackInstallStart = z
  .object({
    state: z
      .string()
      .describe("single-use, valid 10 minutes, bound to this account and integration"),
    authorize_url: z.url().describe("Slack's authorize page: send the user's browser there"),
    redirect_uri: z
      .url()
      .describe("where Slack sends the browser back (the Slack app's redirect URL)"),
    expires_at: timestamp,
  })
  .meta({ id: "SlackInstallStart" });

/** What Slack sends to the redirect URL. Not strict: Slack may add parameters of its own. */
export const slackCallbackQuery = z.object({
  code: z.string().min(1).max(512).optional().describe("the OAuth code to exchange"),
  state: z.string().min(1).max(512).optional().describe("the state of the install's start"),
  error: z
    .string()
    .min(1)
    .max(200)
    .optional()
    .describe("set instead of `code` when the install was not done (`access_denied`)"),
});

export const slackInstallResult = z
  .object({
    installed: z.literal(true),
    message: z.string(),
    integration_id: z.string(),
    team_id: z.string(),
    team_name: z.string().nullable(),
    scopes: z.array(z.string()),
  })
  .meta({ id: "SlackInstallResult" });
export type SlackInstallResultView = z.infer<typeof slackInstallResult>;
