import { ErrorCode as SlackErrorCode, WebClient } from "@slack/web-api";
import { randomBytes } from "node:crypto";
import type { Models } from "../../db/models.js";
import { errors } from "../../errors.js";
import type { Config } from "../../config/env.js";
import type { VendorInstall } from "../../domain/integrations/endpoint.js";
import type { Logger } from "../../util/logger.js";
import { registerSecret } from "../../util/redact.js";
import { claimMarker, markerFields, markerKind, stateHash } from "../../durable/markers.js";
import {
  getIntegrationRecord,
  integrationChanged,
  otherSlackInstall,
  storeSlackInstall,
  SLACK_OAUTH_CALLBACK_PATH,
  type IntegrationRecord,
  type SlackInstall,
} from "../../domain/integrations/store.js";

/** A Slack install state of `POST /integrations/{id}/slack/install`, by its hash. */
export const slackInstallStateMarker = markerKind(
  "slack-install",
  "slack-install-state",
  (state: string) => [stateHash(state)],
);

/** The use of a Slack install state: its one use is decided by this insert. */
export const slackInstallStateUsedMarker = markerKind(
  "slack-install",
  "slack-install-state",
  (state: string) => [stateHash(state), "used"],
);

/*
 * Installing the Slack app into a Slack workspace for an integration, through Slack's OAuth v2
 * flow (api.slack.com/authentication/oauth-v2), as POST /workspaces/link does for GitHub:
 *
 *   POST /integrations/{id}/slack/install  → a single-use state bound to the account and the
 *                                            integration (256 random bits, stored only as its
 *                                            hash, valid 10 minutes) and Slack's authorize URL
 *   Slack → GET /integrations/slack/oauth/callback?code&state
 *                                          → the state is used once; the code is exchanged
 *                                            with oauth.v2.access (@slack/web-api); the bot
 *                                            token (write-only) and the team are stored
 *
 * The state is a server-side nonce rather than a signed token: it cannot be forged, and
 * the database decides its single use by a unique insert, which a signature alone cannot.
 * Nothing is written to the integration until Slack has answered with a bot token for a
 * team the integration may take: a denied install, a bad code or a refused exchange leaves
 * it as it was.
 */

/** The bot scopes the service asks for; slack-app.yml lists the same (a test checks). */
export const SLACK_BOT_SCOPES = [
  "app_mentions:read",
  "chat:write",
  "commands",
  // Replies in a task's thread (message.channels, message.groups) are feedback for the task.
  "channels:history",
  "groups:history",
] as const;

/** How long an install state may be used after `POST /integrations/{id}/slack/install`. */
export const SLACK_INSTALL_STATE_TTL_MS = 10 * 60_000;
const SLACK_TIMEOUT_MS = 15_000;

export interface SlackOAuthConfig {
  clientId: string | undefined;
  clientSecret: string | undefined;
  /** The service's public base URL (PUBLIC_URL): the redirect URL is derived from it. */
  publicUrl: string | undefined;
  /** Slack's Web API base; the authorize page is on the same host. */
  apiUrl: string | undefined;
}

interface ReadyConfig {
  clientId: string;
  clientSecret: string;
  redirectUri: string;
  apiUrl: string;
}

function readyConfig(config: SlackOAuthConfig): ReadyConfig {
  const missing = [
    ...(config.clientId ? [] : ["SLACK_CLIENT_ID"]),
    ...(config.clientSecret ? [] : ["SLACK_CLIENT_SECRET"]),
    ...(config.publicUrl ? [] : ["PUBLIC_URL"]),
  ];
  if (missing.length > 0)
    throw errors.upstream(
      `Installing the Slack app is not configured on this server: set ${missing.join(", ")}.`,
      503,
    );
  return {
    clientId: config.clientId!,
    clientSecret: config.clientSecret!,
    redirectUri: new URL(SLACK_OAUTH_CALLBACK_PATH, config.publicUrl).toString(),
    apiUrl: config.apiUrl ?? "https://slack.com/api/",
  };
}

export interface SlackInstallStart {
  state: string;
  authorize_url: string;
  redirect_uri: string;
  expires_at: string;
}

/**
 * Starts installing the Slack app for one of the account's Slack integrations (404 for
 * another account's): a single-use state and Slack's authorize URL carrying it.
 */
export async function startSlackInstall(
  models: Models,
  config: SlackOAuthConfig,
  accountId: string,
  integrationId: string,
  now = new Date(),
): Promise<SlackInstallStart> {
  // The resource first (404), then whether this server can install at all (503): the order
  // of checks of every route (docs/api.md).
  const integration = await getIntegrationRecord(models, accountId, integrationId);
  if (integration.type !== "slack") throw errors.notFound("Slack integration");
  const ready = readyConfig(config);
  const state = randomBytes(32).toString("base64url");
  const expiresAt = new Date(now.getTime() + SLACK_INSTALL_STATE_TTL_MS);
  const stored = await claimMarker(models, slackInstallStateMarker(state), {
    account_id: accountId,
    integration_id: integrationId,
    expires_at: expiresAt,
    created_at: now,
    updated_at: now,
  });
  if (!stored) throw new Error("a new Slack install state collided with a stored one");
  const authorize = new URL("/oauth/v2/authorize", ready.apiUrl);
  authorize.searchParams.set("client_id", ready.clientId);
  authorize.searchParams.set("scope", SLACK_BOT_SCOPES.join(","));
  authorize.searchParams.set("redirect_uri", ready.redirectUri);
  authorize.searchParams.set("state", state);
  return {
    state,
    authorize_url: authorize.toString(),
    redirect_uri: ready.redirectUri,
    expires_at: expiresAt.toISOString(),
  };
}

function badInstall(path: string, message: string) {
  return errors.validation(
    [{ path, message }],
    `${message} Start again with POST /integrations/{id}/slack/install.`,
  );
}

/** Uses an install state once: unknown, expired or used states are refused (400). */
async function consumeInstallState(
  models: Models,
  state: string,
  now: Date,
): Promise<{ accountId: string; integrationId: string }> {
  const doc = (await markerFields(models, slackInstallStateMarker(state))) as {
    account_id?: string;
    integration_id?: string;
    expires_at?: Date;
  } | null;
  if (!doc?.account_id || !doc.integration_id || !doc.expires_at)
    throw badInstall("state", "The install state is not known.");
  if (doc.expires_at.getTime() <= now.getTime())
    throw badInstall("state", "The install state has expired (states are valid for 10 minutes).");
  const firstUse = await claimMarker(models, slackInstallStateUsedMarker(state), {
    expires_at: doc.expires_at,
    created_at: now,
    updated_at: now,
  });
  if (!firstUse) throw badInstall("state", "The install state has been used already.");
  return { accountId: doc.account_id, integrationId: doc.integration_id };
}

interface OAuthAnswer {
  ok?: boolean;
  access_token?: string;
  token_type?: string;
  scope?: string;
  bot_user_id?: string;
  team?: { id?: string; name?: string } | null;
  is_enterprise_install?: boolean;
}

/** Exchanges the code with oauth.v2.access; Slack's refusals are 400, its outages 502. */
async function exchangeCode(ready: ReadyConfig, code: string): Promise<OAuthAnswer> {
  // No retries: a code is single-use, and a retried exchange would only say so.
  const client = new WebClient(undefined, {
    slackApiUrl: ready.apiUrl,
    retryConfig: { retries: 0 },
    timeout: SLACK_TIMEOUT_MS,
  });
  try {
    return (await client.oauth.v2.access({
      client_id: ready.clientId,
      client_secret: ready.clientSecret,
      code,
      redirect_uri: ready.redirectUri,
    })) as OAuthAnswer;
  } catch (error) {
    const e = error as { code?: string; data?: { error?: unknown }; statusCode?: number };
    if (e.code === SlackErrorCode.PlatformError)
      throw badInstall(
        "code",
        `Slack refused the install's code (oauth.v2.access: ${String(e.data?.error ?? "error")}).`,
      );
    throw errors.upstream(
      `Slack could not be reached to finish the install (oauth.v2.access${e.statusCode ? `: HTTP ${e.statusCode}` : ""}); try again.`,
    );
  }
}

/** Revokes a token Slack issued for an install that is refused after all (best effort). */
async function revoke(ready: ReadyConfig, token: string, logger: Logger): Promise<void> {
  await new WebClient(token, {
    slackApiUrl: ready.apiUrl,
    retryConfig: { retries: 0 },
    timeout: SLACK_TIMEOUT_MS,
  }).auth
    .revoke()
    .catch((err: unknown) => logger.warn({ err }, "could not revoke a refused Slack install"));
}

export interface SlackInstallResult {
  integration_id: string;
  team_id: string;
  team_name: string | null;
  scopes: string[];
}

/**
 * Completes an install from Slack's redirect: uses the state once, then stores the bot
 * token (write-only) and the Slack team on the state's integration. A denied install
 * (`error`), a refused code, an enterprise-wide install or a team the integration may not
 * take is refused, and the integration is left as it was.
 */
export async function completeSlackInstall(
  deps: { models: Models; config: SlackOAuthConfig; logger: Logger },
  input: { state?: string | undefined; code?: string | undefined; error?: string | undefined },
  now = new Date(),
): Promise<SlackInstallResult> {
  const ready = readyConfig(deps.config);
  if (!input.state)
    throw badInstall("state", "The install state is missing: Slack sends it back with the code.");
  const { accountId, integrationId } = await consumeInstallState(deps.models, input.state, now);
  if (input.error)
    throw badInstall(
      "error",
      input.error === "access_denied"
        ? "The install was cancelled in Slack (access_denied); nothing was changed."
        : `Slack did not install the app (${input.error.slice(0, 100)}); nothing was changed.`,
    );
  if (!input.code) throw badInstall("code", "Slack sent no code to exchange.");
  // The integration may have been removed meanwhile (404) or be another account's (404).
  const integration = await getIntegrationRecord(deps.models, accountId, integrationId);
  if (integration.type !== "slack") throw errors.notFound("Slack integration");
  const log = deps.logger.child({ integration: integrationId, accountId });

  const answer = await exchangeCode(ready, input.code);
  const token = answer.access_token;
  const teamId = answer.team?.id;
  if (token) registerSecret(token);
  if (!token || answer.token_type !== "bot" || !teamId) {
    if (token) await revoke(ready, token, log);
    throw errors.upstream(
      answer.is_enterprise_install
        ? "The app was installed for a whole Enterprise Grid organization; install it into one Slack workspace instead."
        : "Slack's answer to oauth.v2.access carried no bot token for a workspace.",
    );
  }
  const refusal = await teamRefusal(deps.models, integration, teamId);
  if (refusal) {
    await revoke(ready, token, log);
    log.warn({ team: teamId }, "slack install refused: team not allowed for this integration");
    throw errors.conflict(refusal);
  }
  const install: SlackInstall = {
    team_id: teamId,
    team_name: answer.team?.name ?? null,
    bot_user_id: answer.bot_user_id ?? null,
    scopes: (answer.scope ?? "").split(",").filter(Boolean),
    installed_at: now,
  };
  if (!(await storeSlackInstall(deps.models, accountId, integration, token, install, now))) {
    await revoke(ready, token, log);
    throw errors.notFound("integration");
  }
  await integrationChanged(deps.models, integrationId);
  log.info({ team: teamId, scopes: install.scopes }, "slack app installed");
  return {
    integration_id: integrationId,
    team_id: teamId,
    team_name: install.team_name,
    scopes: install.scopes,
  };
}

/** Why an integration may not take a Slack team, or null when it may. */
async function teamRefusal(
  models: Models,
  integration: IntegrationRecord,
  teamId: string,
): Promise<string | null> {
  const pinned = (integration.settings as { team_id?: string }).team_id;
  if (pinned && pinned !== teamId)
    return `This integration is for Slack workspace ${pinned} (settings.team_id), but the app was installed into ${teamId}; nothing was changed.`;
  if (await otherSlackInstall(models, teamId, integration._id))
    return `Slack workspace ${teamId} is already connected to another integration; remove that one first.`;
  return null;
}

/** The Slack app's OAuth settings of the service's configuration. */
function slackOAuth(config: Config): SlackOAuthConfig {
  return {
    clientId: config.slackOAuth.clientId,
    clientSecret: config.slackOAuth.clientSecret,
    publicUrl: config.manifest.publicUrl,
    apiUrl: config.slackApiUrl,
  };
}

/** Slack's install flow as the plugin offers it to the HTTP door's install routes. */
export const slackInstall: VendorInstall = {
  start: "/integrations/{id}/slack/install",
  callback: "/integrations/slack/oauth/callback",
  begin: (parts, accountId, integrationId) =>
    startSlackInstall(parts.models, slackOAuth(parts.config), accountId, integrationId),
  complete: (parts, query) =>
    completeSlackInstall(
      { models: parts.models, config: slackOAuth(parts.config), logger: parts.logger },
      query,
    ),
};
