import type { Config } from "../../config/env.js";
import type { IntegrationJobDeps } from "../plugin.js";

/** What the service's configuration sets for Slack (`IntegrationDeps.vendors.slack`). */
export interface SlackServiceSettings {
  /** Slack's Web API base (SLACK_API_URL; tests point it at a fake); Slack's own by default. */
  apiUrl?: string | undefined;
  /** The Slack app's own signing secret (SLACK_SIGNING_SECRET), for its app-wide URLs. */
  signingSecret?: string | undefined;
}

export function slackServiceSettings(config: Config): SlackServiceSettings {
  return { apiUrl: config.slackApiUrl, signingSecret: config.slackOAuth.signingSecret };
}

/** Slack's entry of the vendors' settings (the plugin's `settings` wrote it). */
export function slackSettingsOf(deps: Pick<IntegrationJobDeps, "vendors">): SlackServiceSettings {
  return (deps.vendors.slack ?? {}) as SlackServiceSettings;
}
