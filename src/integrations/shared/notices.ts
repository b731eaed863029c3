import { z } from "zod";
import type { Models } from "../../db/models.js";
import { claimMarker, markerKind } from "../../durable/markers.js";
import { taskById, taskConversations } from "../../domain/tasks/store.js";
import type { JobKind, Scheduler } from "../../queue/scheduler.js";
import { redactTextIn, SecretScope } from "../../util/redact.js";
import { withRetries } from "../../util/retry.js";
import type { IntegrationJobDeps } from "../plugin.js";
import { pluginOf } from "../registry.js";
import { findIntegration } from "../../domain/integrations/store.js";
import type { TaskSource } from "../../domain/integrations/types.js";

/** A notice posted to an integration. */
export const integrationNoticeMarker = markerKind(
  "int-notice",
  "integration-notice",
  (taskId: string, notice: string) => [taskId, notice],
);

/*
 * What a task tells the chat thread or issue it came from: its plan and its change at the
 * gates, and how it ended. Each notice is a job queued once per task and kind; a vendor
 * failure is retried with backoff (ATTEMPTS tries), and a notice that still cannot be posted
 * is reported on the task's own log, so nothing is lost silently.
 */

const KINDS = ["plan", "diff", "end", "merged"] as const;
/** `round`: a revision's or retry's round posts its plan and change again (as on GitHub). */
const jobSchema = z.strictObject({
  task_id: z.string().min(1),
  kind: z.enum(KINDS),
  round: z.number().int().min(1).optional(),
});
export const INTEGRATION_NOTICE_JOB = { name: "integration.notice", schema: jobSchema };

const ATTEMPTS = 4;

/** Queues a notice for a task that reports to an integration; others cost one lookup. */
export function createIntegrationNotifier(models: Models, scheduler: Scheduler) {
  return async (taskId: string, kind: (typeof KINDS)[number]): Promise<void> => {
    const task = await taskConversations(models, taskId);
    // A merge moves tracker issues; a chat thread has the pull request link already.
    if (!task?.report_to || (kind === "merged" && !pluginOf(task.report_to.type).reportsMerges))
      return;
    const round = task.round ?? 0;
    await scheduler.enqueue(
      INTEGRATION_NOTICE_JOB,
      { task_id: taskId, kind, ...(round > 0 ? { round } : {}) },
      {
        unique: {
          "data.task_id": taskId,
          "data.kind": kind,
          ...(round > 0 ? { "data.round": round } : {}),
        },
      },
    );
  };
}

export type { IntegrationJobDeps };

export function integrationNoticeJob(deps: IntegrationJobDeps): JobKind<z.infer<typeof jobSchema>> {
  const logger = deps.logger.child({ component: "integration-notices" });
  const backoff = deps.backoffMs ?? 1000;
  return {
    ...INTEGRATION_NOTICE_JOB,
    async run({ task_id, kind }) {
      const models = deps.tasks.models;
      const task = await taskById(models, task_id);
      const source = task?.report_to as TaskSource | null | undefined;
      if (!task || !source) return;
      const integration = await findIntegration(models, source.integration_id, source.type);
      if (!integration || integration.account_id !== task.account_id || !integration.enabled)
        return;
      try {
        await withRetries(
          ATTEMPTS,
          backoff,
          () => true,
          (err, attempt) => logger.warn({ task: task_id, kind, attempt, err }, "notice failed"),
          async () => {
            await pluginOf(source.type).notice(
              deps,
              integration,
              { ...task, report_to: source },
              kind,
            );
            await claimMarker(models, integrationNoticeMarker(task_id, kind));
          },
        );
        logger.info({ task: task_id, kind, type: source.type }, "notice posted");
      } catch (error) {
        // The task's text, made outside its stages: the integration's secrets (the account's,
        // not redacted process-wide) are redacted here explicitly (util/redact.ts).
        const scope = new SecretScope(task.account_id, Object.values(integration.secrets ?? {}));
        const message = error instanceof Error ? error.message : String(error);
        const reason = redactTextIn(scope, message);
        await deps.tasks.events.append(task_id, {
          event_type: "log",
          message: `Could not post the ${kind === "end" ? "result" : kind} to ${source.type} after ${ATTEMPTS} attempts: ${reason}`,
        });
      }
    },
  };
}
