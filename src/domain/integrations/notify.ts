import { collectionOf, type Models } from "../../db/models.js";
import type { IntegrationRecord } from "./store.js";
import type { TaskSource } from "./types.js";

/*
 * The Slack notification channel (`settings.notify_channel`): tasks nobody asked for in a
 * chat, the ones automations and CI failures start, report there, one thread per task, as
 * tasks started in Slack report in theirs (the same notices, integrations/shared/notices.ts).
 */

/** The task sources (CreateTaskInput.source) that report to the notification channel. */
export const NOTIFIED_SOURCES: readonly string[] = ["automation", "ci_failure"];

/**
 * Where a task of `source` reports when nothing else was named: the notification channel of
 * the account's newest enabled Slack integration that has one and a bot token, else null.
 */
export async function notificationTarget(
  models: Models,
  accountId: string,
  source: string | undefined,
): Promise<TaskSource | null> {
  if (!source || !NOTIFIED_SOURCES.includes(source)) return null;
  const [doc] = await collectionOf<IntegrationRecord>(models.Integration)
    .find({
      account_id: accountId,
      type: "slack",
      enabled: true,
      "settings.notify_channel": { $exists: true },
      "secrets.bot_token": { $exists: true },
    })
    .project<Pick<IntegrationRecord, "_id" | "settings">>({ _id: 1, settings: 1 })
    .sort({ created_at: -1, _id: -1 })
    .limit(1)
    .toArray();
  const channel = (doc?.settings as { notify_channel?: string } | undefined)?.notify_channel;
  return doc && channel ? { integration_id: doc._id, type: "slack", ref: { channel } } : null;
}
