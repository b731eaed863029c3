import { claimMarkersFor, type Marker } from "../../durable/markers.js";
import { createTask } from "../../domain/tasks/create.js";
import { findIntegration, type IntegrationRecord } from "../../domain/integrations/store.js";
import { isAppError } from "../../errors.js";
import type { JobKind } from "../../queue/scheduler.js";
import { withRetries } from "../../util/retry.js";
import type { IntegrationJobDeps } from "../plugin.js";
import { pluginOf } from "../registry.js";
import { TASK_REQUEST_JOB, type TaskRequest } from "./task-request.js";

/*
 * A task asked for in Slack, Linear or Jira. The door checks the request (signature, replay
 * window, what it asks for, where it should run, all from the integration it has cached)
 * and answers the vendor after one durable write: this job, queued once per delivery (its
 * `_id` derives from the task id, which derives from the integration and the delivery). The
 * job then does what needs the database: it claims the delivery's markers (the vendor's
 * delivery id and the signed body, so a redelivery or a replay under another id is acted on
 * once), creates the task under its derived id (a job run again after a crash finds it made)
 * and answers where the task was asked for: Slack gets the task's first message, which
 * opens its thread; a refusal (allowance spent, repository gone) is said there or on the
 * issue. A failure of the database or of the vendor is retried with backoff, and a task that
 * still cannot be created is reported where it was asked for: nothing is dropped silently.
 */

/** How often creating the task, or answering, is tried before giving up on it. */
const ATTEMPTS = 4;

type TaskRequestDeps = IntegrationJobDeps;

export function taskRequestJob(deps: TaskRequestDeps): JobKind<TaskRequest> {
  const logger = deps.logger.child({ component: "integration-task-requests" });
  const backoff = deps.backoffMs ?? 1000;
  return {
    ...TASK_REQUEST_JOB,
    async run(request) {
      const log = logger.child({
        integration: request.integration_id,
        type: request.type,
        task: request.task_id,
      });
      const integration = await findIntegration(
        deps.tasks.models,
        request.integration_id,
        request.type,
      );
      if (!integration?.enabled) {
        log.info("task request of a deleted or disabled integration dropped");
        return;
      }
      const plugin = pluginOf(request.type);
      const reply = (text: string) => plugin.reply(deps, integration, request, text);
      const say = (text: string) =>
        withRetries(
          ATTEMPTS,
          backoff,
          () => true,
          (err, attempt) => log.warn({ err, attempt }, `${request.type} answer failed`),
          () => reply(text),
        ).catch(() => undefined);

      let outcome: { text: string } | { created: boolean; repo: string } | null;
      try {
        outcome = await withRetries(
          ATTEMPTS,
          backoff,
          (error) => !isAppError(error),
          (err, attempt) => {
            if (!isAppError(err)) log.warn({ err, attempt }, "creating the task failed");
          },
          () => createRequested(deps, integration, request),
        );
      } catch (error) {
        if (isAppError(error)) outcome = { text: `Could not start the task: ${error.message}` };
        else {
          const reason = error instanceof Error ? error.message : String(error);
          log.error({ err: error }, "task request given up");
          outcome = {
            text: `Could not start the task after ${ATTEMPTS} attempts (${reason}). Please ask again; if it keeps failing, the service's operators will find the cause in its logs.`,
          };
        }
      }
      if (!outcome) {
        log.info("delivery acted on before; nothing done");
        return;
      }
      if ("text" in outcome) {
        await say(outcome.text);
        return;
      }
      log.info({ existed: !outcome.created }, "integration task created");
      if (outcome.created)
        await plugin
          .announce(deps, integration, request, outcome.repo)
          .catch((err: unknown) => log.warn({ err }, `${request.type} task announcement failed`));
    },
  };
}

/**
 * Claims the delivery and creates its task: null when the delivery was acted on for another
 * task (a replay), a text when the request cannot become a task (said where it was asked).
 */
async function createRequested(
  deps: TaskRequestDeps,
  integration: IntegrationRecord,
  request: TaskRequest,
): Promise<{ text: string } | { created: boolean; repo: string } | null> {
  if (!(await claimMarkersFor(deps.tasks.models, request.claims as Marker[], request.task_id)))
    return null;
  const input = await pluginOf(request.type).taskInput(deps, integration, request);
  if ("text" in input) return input;
  const task = await createTask(deps.tasks, integration.account_id, input, {
    id: request.task_id,
  });
  return { created: !task.existed, repo: task.repo_id };
}
