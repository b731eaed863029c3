import type { z } from "zod";
import { collectionOf, type Models } from "../../db/models.js";
import { bumpMarker, MarkerCache } from "../../durable/marker-cache.js";
import { generationMarker } from "../../durable/markers.js";
import { resolveRepo } from "../workspaces/workspaces.js";
import { errors } from "../../errors.js";
import { newId } from "../../util/ids.js";
import { currentSecretScope } from "../../util/redact.js";
import { INTEGRATION_KINDS } from "./kinds.js";
import type { IntegrationType, RepoTarget } from "./types.js";

/** The driver collections this module uses, typed by their records (db/models.ts). */
const integrationsOf = (models: Models) => collectionOf<IntegrationRecord>(models.Integration);

/*
 * An account's integrations: create, read, update, delete. Settings are answered; secrets
 * are write-only (a view lists which are set, never their values) and added to the
 * redaction scope of the account's own work whenever they are read there (see `remember`).
 */

export interface IntegrationRecord {
  _id: string;
  account_id: string;
  type: IntegrationType;
  name: string;
  enabled: boolean;
  settings: Record<string, unknown>;
  secrets: Record<string, string>;
  /** Slack: the workspace the app was installed into through Slack's OAuth flow. */
  install?: SlackInstall | null | undefined;
  created_at: Date;
  updated_at: Date;
}

/** What an OAuth install of the Slack app left on the integration (slack/install.ts). */
export interface SlackInstall {
  team_id: string;
  team_name: string | null;
  bot_user_id: string | null;
  scopes: string[];
  installed_at: Date;
}

export interface IntegrationView {
  id: string;
  type: IntegrationType;
  name: string;
  enabled: boolean;
  settings: Record<string, unknown>;
  secrets_set: string[];
  endpoints: Record<string, string>;
  install: {
    team_id: string;
    team_name: string | null;
    bot_user_id: string | null;
    scopes: string[];
    installed_at: string;
  } | null;
  created_at: string;
  updated_at: string;
}

/** Where Slack sends the browser back after an install (relative to PUBLIC_URL). */
export const SLACK_OAUTH_CALLBACK_PATH = "/integrations/slack/oauth/callback";

/** The URLs to enter in the vendor's app settings for this integration (relative paths). */
export function endpointsOf(
  record: Pick<IntegrationRecord, "_id" | "type">,
): Record<string, string> {
  const base = `/integrations/${record._id}/${record.type}`;
  if (record.type === "slack")
    return {
      slash_command: `${base}/commands`,
      interactivity: `${base}/interactions`,
      events: `${base}/events`,
      oauth_redirect: SLACK_OAUTH_CALLBACK_PATH,
    };
  return { webhook: `${base}/webhook` };
}

export function toIntegrationView(record: IntegrationRecord): IntegrationView {
  return {
    id: record._id,
    type: record.type,
    name: record.name,
    enabled: record.enabled,
    settings: record.settings,
    secrets_set: Object.keys(record.secrets ?? {}).sort(),
    endpoints: endpointsOf(record),
    install: record.install
      ? { ...record.install, installed_at: record.install.installed_at.toISOString() }
      : null,
    created_at: record.created_at.toISOString(),
    updated_at: record.updated_at.toISOString(),
  };
}

/** Types whose webhooks exist; the others' settings are defined but nothing would use them. */
const DOORS_BUILT: IntegrationType[] = ["slack", "linear", "jira"];

/** Bumped by every change to an integration: the per-process caches below watch it. */
export const INTEGRATIONS_MARKER = generationMarker("integrations-generation");

/*
 * Every delivery to a Slack, Linear or Jira door looks its integration up by id first. A
 * process that serves them keeps what it read (startIntegrationCache), as it does for
 * workspaces: a change made here is seen at once in this process and within
 * ACCOUNT_VIEW_POLL_MS in the others (a disabled integration, a rotated secret).
 */
const caches = new WeakMap<Models, MarkerCache<IntegrationRecord>>();

/** Starts the lookup cache of this process's integrations; the caller stops it on shutdown. */
export async function startIntegrationCache(
  models: Models,
  pollMs: number,
): Promise<MarkerCache<IntegrationRecord>> {
  const cache = new MarkerCache<IntegrationRecord>(models, INTEGRATIONS_MARKER, pollMs, (id) =>
    integrationsOf(models).findOne({ _id: id }),
  );
  await cache.start();
  caches.set(models, cache);
  return cache;
}

/** After a write: this process forgets the integration at once, the others at their next poll. */
export async function integrationChanged(models: Models, id: string): Promise<void> {
  caches.get(models)?.forget(id);
  await bumpMarker(models, INTEGRATIONS_MARKER);
}

/**
 * The account chose these values (any text of 8+ characters), so they are never redacted
 * process-wide, where they would rewrite every other account's text: only in a scope of the
 * same account (util/redact.ts). Elsewhere the field-name and format rules still apply.
 */
function remember(record: IntegrationRecord): IntegrationRecord {
  const scope = currentSecretScope();
  if (scope?.owner === record.account_id)
    for (const value of Object.values(record.secrets ?? {})) scope.add(value);
  return record;
}

/** Every repository a settings object names, checked to be the account's (404 otherwise). */
async function checkTargets(models: Models, accountId: string, settings: Record<string, unknown>) {
  const targets: RepoTarget[] = [];
  const collect = (v: unknown) => {
    if (v && typeof v === "object" && "workspace_id" in v && "repo_id" in v)
      targets.push(v as RepoTarget);
  };
  for (const value of Object.values(settings)) {
    collect(value);
    if (value && typeof value === "object" && !Array.isArray(value))
      Object.values(value).forEach(collect);
  }
  for (const t of targets) await resolveRepo(models, accountId, t.workspace_id, t.repo_id);
}

function parseWith<T extends z.ZodType>(schema: T, value: unknown, field: string): z.infer<T> {
  const parsed = schema.safeParse(value);
  if (!parsed.success)
    throw errors.validation(
      parsed.error.issues.map((i) => ({
        path: [field, ...i.path.map(String)].join("."),
        message: i.message,
      })),
    );
  return parsed.data;
}

/** Adds an integration to the account; the repositories it names must be the account's. */
export async function createIntegration(
  models: Models,
  accountId: string,
  input: {
    type: IntegrationType;
    name: string;
    enabled?: boolean;
    settings: unknown;
    secrets: unknown;
  },
): Promise<IntegrationView> {
  const kind = INTEGRATION_KINDS[input.type];
  if (!DOORS_BUILT.includes(input.type))
    throw errors.validation([
      {
        path: "type",
        message: `${input.type} integrations are not available on this server yet (only ${DOORS_BUILT.join(", ")}).`,
      },
    ]);
  const settings = parseWith(kind.settings, input.settings ?? {}, "settings") as Record<
    string,
    unknown
  >;
  const secrets = parseWith(kind.secrets, input.secrets, "secrets") as Record<string, string>;
  await checkTargets(models, accountId, settings);
  const now = new Date();
  const record: IntegrationRecord = {
    _id: newId("int"),
    account_id: accountId,
    type: input.type,
    name: input.name,
    enabled: input.enabled ?? true,
    settings,
    secrets,
    created_at: now,
    updated_at: now,
  };
  await integrationsOf(models).insertOne(record);
  return toIntegrationView(remember(record));
}

/** The account's integrations, newest first. */
export async function listIntegrations(
  models: Models,
  accountId: string,
): Promise<IntegrationView[]> {
  const docs = await integrationsOf(models)
    .find({ account_id: accountId })
    .sort({ created_at: -1, _id: -1 })
    .toArray();
  return docs.map((d) => toIntegrationView(remember(d)));
}

/** One integration of the account (404 for another account's: never reveal existence). */
export async function getIntegrationRecord(
  models: Models,
  accountId: string,
  id: string,
): Promise<IntegrationRecord> {
  const doc = await integrationsOf(models).findOne({
    _id: id,
  });
  if (!doc || doc.account_id !== accountId) throw errors.notFound("integration");
  return remember(doc);
}

/** An integration by id alone, for a vendor's signed request (which names it in its URL). */
export async function findIntegration(
  models: Models,
  id: string,
  type: IntegrationType,
): Promise<IntegrationRecord | null> {
  const cache = caches.get(models);
  const doc = cache ? await cache.get(id) : await integrationsOf(models).findOne({ _id: id });
  return doc && doc.type === type ? remember(doc) : null;
}

/** Another Slack integration than `exceptId` the app was installed into `teamId` for. */
export async function otherSlackInstall(
  models: Models,
  teamId: string,
  exceptId: string,
): Promise<boolean> {
  const other = await integrationsOf(models).findOne(
    { type: "slack", "install.team_id": teamId, _id: { $ne: exceptId } },
    { projection: { _id: 1 } },
  );
  return other !== null;
}

/**
 * Stores an OAuth install on the account's integration as it was read (`integration`), with
 * its bot token; false when the integration is gone.
 */
export async function storeSlackInstall(
  models: Models,
  accountId: string,
  integration: IntegrationRecord,
  token: string,
  install: SlackInstall,
  now: Date,
): Promise<boolean> {
  const { matchedCount } = await integrationsOf(models).replaceOne(
    { _id: integration._id, account_id: accountId },
    {
      ...integration,
      secrets: { ...integration.secrets, bot_token: token },
      install,
      updated_at: now,
    },
  );
  return matchedCount > 0;
}

/** The Slack integration the app was installed into `teamId` for (slack/install.ts). */
export async function findSlackInstall(
  models: Models,
  teamId: string,
): Promise<IntegrationRecord | null> {
  const doc = await integrationsOf(models).findOne({
    type: "slack",
    "install.team_id": teamId,
  });
  return doc ? remember(doc) : null;
}

/**
 * Changes an integration: `settings` replaces the settings as a whole (validated again);
 * `secrets` replaces only the secrets it names, so a token can be rotated alone.
 */
export async function updateIntegration(
  models: Models,
  accountId: string,
  id: string,
  patch: {
    name?: string;
    enabled?: boolean;
    settings?: unknown;
    secrets?: Record<string, unknown>;
  },
): Promise<IntegrationView> {
  const current = await getIntegrationRecord(models, accountId, id);
  const kind = INTEGRATION_KINDS[current.type];
  const settings =
    patch.settings === undefined
      ? current.settings
      : (parseWith(kind.settings, patch.settings, "settings") as Record<string, unknown>);
  const secrets =
    patch.secrets === undefined
      ? current.secrets
      : (parseWith(kind.secrets, { ...current.secrets, ...patch.secrets }, "secrets") as Record<
          string,
          string
        >);
  if (patch.settings !== undefined) await checkTargets(models, accountId, settings);
  const next: IntegrationRecord = {
    ...current,
    name: patch.name ?? current.name,
    enabled: patch.enabled ?? current.enabled,
    settings,
    secrets,
    updated_at: new Date(),
  };
  await integrationsOf(models).replaceOne({ _id: id, account_id: accountId }, next);
  await integrationChanged(models, id);
  return toIntegrationView(remember(next));
}

/** Removes an integration; its tasks stay, and stop reporting to it. */
export async function deleteIntegration(
  models: Models,
  accountId: string,
  id: string,
): Promise<void> {
  const { deletedCount } = await integrationsOf(models).deleteOne({
    _id: id,
    account_id: accountId,
  });
  if (deletedCount === 0) throw errors.notFound("integration");
  await integrationChanged(models, id);
}
