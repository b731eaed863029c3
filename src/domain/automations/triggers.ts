import type { AutomationTrigger } from "../../db/models.js";
import { DEFAULT_TIMEZONE, isSlot, nextSlot, normalizeSchedule } from "./cron.js";
import { globMatches, matchesPayload, verifySignature } from "./templates.js";

/*
 * The kinds of automation trigger, one entry each (docs/architecture.md, "How to add an
 * automation trigger"). A kind says once how its `trigger_config` is stored, shown and
 * edited, whether it runs on a schedule, and when an event matches it; automations.ts asks
 * the registry and never switches on the kind. The registry is typed by the stored list of
 * kinds (AUTOMATION_TRIGGERS in db/models.ts): a kind without an entry, or an entry without
 * a config type, does not compile.
 */

/** How a stored webhook secret is shown; sending it back in a PATCH keeps the secret. */
export const SECRET_PLACEHOLDER = "********";

export interface CronConfig {
  schedule: string;
  timezone: string;
}
export interface WebhookConfig {
  match: Record<string, unknown>;
  secret?: string | null | undefined;
}
export interface CiFailureConfig {
  workflow?: string | null | undefined;
  branch?: string | null | undefined;
}

/** `trigger_config` as clients write it (validated by the route's schema), per kind. */
export interface TriggerConfigs {
  cron: CronConfig;
  webhook: WebhookConfig;
  ci_failure: CiFailureConfig;
}

/** What happened, per kind: what `matches` is asked about. */
export interface TriggerEvents {
  cron: { slot: Date };
  webhook: { payload: unknown; rawBody: string; signature: string | undefined };
  ci_failure: { workflow: string; branch: string };
}

/** `trigger_config` as stored: `match` as `{path, json}` pairs (dot-paths are not field names). */
export interface StoredConfig {
  schedule?: string;
  timezone?: string;
  match?: Array<{ path: string; json: string }>;
  secret?: string | null;
  workflow?: string | null;
  branch?: string | null;
}

export interface TriggerKind<Config, Event> {
  /** What fires it, for people. */
  description: string;
  /** The template variables a firing provides besides `now` and `date`. */
  variables: readonly string[];
  /** True when the automation has a cron job (jobs/cron.ts) while enabled. */
  scheduled: boolean;
  /** The client's config as stored. */
  store(config: Config): StoredConfig;
  /** The stored config as clients read it: secrets only as SECRET_PLACEHOLDER. */
  view(stored: StoredConfig): Record<string, unknown>;
  /** The stored config as clients write it, secrets kept: what a PATCH is laid over. */
  writable(stored: StoredConfig): Record<string, unknown>;
  /** Whether an event fires an automation with this config. */
  matches(stored: StoredConfig, event: Event): boolean;
  /** The next time it fires on its own, or null (only scheduled kinds). */
  nextRun(stored: StoredConfig, now: Date): Date | null;
}

function matchEntries(config: StoredConfig): Array<{ path: string; expected: unknown }> {
  return (config.match ?? []).map(({ path, json }) => ({ path, expected: JSON.parse(json) }));
}

function matchObject(config: StoredConfig): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const { path, expected } of matchEntries(config)) out[path] = expected;
  return out;
}

function cronView(c: StoredConfig): Record<string, unknown> {
  return { schedule: c.schedule, timezone: c.timezone ?? DEFAULT_TIMEZONE };
}

function ciFailureView(c: StoredConfig): Record<string, unknown> {
  return {
    ...(c.workflow ? { workflow: c.workflow } : {}),
    ...(c.branch ? { branch: c.branch } : {}),
  };
}

export const TRIGGERS: {
  [K in AutomationTrigger]: TriggerKind<TriggerConfigs[K], TriggerEvents[K]>;
} = {
  cron: {
    description: "a five-field cron schedule in a time zone",
    variables: [],
    scheduled: true,
    store: (config) => ({
      schedule: normalizeSchedule(config.schedule),
      timezone: config.timezone || DEFAULT_TIMEZONE,
    }),
    view: cronView,
    writable: cronView,
    matches: (c, { slot }) => isSlot(c.schedule!, c.timezone ?? DEFAULT_TIMEZONE, slot),
    nextRun: (c, now) =>
      c.schedule ? nextSlot(c.schedule, c.timezone ?? DEFAULT_TIMEZONE, now) : null,
  },
  webhook: {
    description: "a JSON payload posted to /automations/webhook, matched by dot-paths",
    variables: ["payload"],
    scheduled: false,
    store: (config) => ({
      match: Object.entries(config.match ?? {}).map(([path, value]) => ({
        path,
        json: JSON.stringify(value),
      })),
      secret: config.secret ?? null,
    }),
    view: (c) => ({ match: matchObject(c), ...(c.secret ? { secret: SECRET_PLACEHOLDER } : {}) }),
    writable: (c) => ({ match: matchObject(c), ...(c.secret ? { secret: c.secret } : {}) }),
    matches: (c, delivery) => {
      if (c.secret && !verifySignature(c.secret, delivery.rawBody, delivery.signature))
        return false;
      return matchesPayload(matchEntries(c), delivery.payload);
    },
    nextRun: () => null,
  },
  ci_failure: {
    description: "a failed GitHub check on the repository, by workflow and branch globs",
    variables: ["check"],
    scheduled: false,
    store: (config) => ({ workflow: config.workflow ?? null, branch: config.branch ?? null }),
    view: ciFailureView,
    writable: ciFailureView,
    matches: (c, check) =>
      globMatches(c.workflow, check.workflow, { anyChars: true }) &&
      globMatches(c.branch, check.branch),
    nextRun: () => null,
  },
};

/** The registry entry of `kind` (typed by the kind, for callers generic over it). */
export function triggerKind<K extends AutomationTrigger>(
  kind: K,
): TriggerKind<TriggerConfigs[K], TriggerEvents[K]> {
  return TRIGGERS[kind];
}
