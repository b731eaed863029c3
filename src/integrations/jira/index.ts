import { jiraKind } from "../../domain/integrations/kinds.js";
import { jiraDeliveryMarker } from "./door.js";
import { redactText } from "../../util/redact.js";
import type { Config } from "../../config/env.js";
import type { IntegrationJobDeps, IntegrationPlugin } from "../plugin.js";
import { trackerTaskInput } from "../shared/task-request.js";
import { commentOnJiraIssue, handleJira, jiraClient, postJiraNotice } from "./door.js";

/*
 * Jira: a labelled issue becomes a task; comments decide its gates; the issue takes the
 * settings' `started` transition with the plan and `done` on the merge.
 */

/** What the service's configuration sets for Jira (`IntegrationDeps.vendors.jira`). */
interface JiraServiceSettings {
  /** Jira sites may be http:// or non-public hosts (ALLOW_LOCAL_REPOS). */
  allowLocalSites?: boolean | undefined;
}

function jiraSettingsOf(deps: Pick<IntegrationJobDeps, "vendors">): JiraServiceSettings {
  return (deps.vendors.jira ?? {}) as JiraServiceSettings;
}

export const jiraPlugin = {
  type: "jira",
  kind: jiraKind,
  routes: [
    {
      method: "post",
      type: "jira",
      path: "/integrations/:id/jira/webhook",
      operationId: "jiraWebhook",
      summary: "Jira's webhook deliveries to one integration (issues, comments)",
      description:
        "Signed with the integration's `webhook_secret` (Jira's secure webhooks), no API key; the body's signed `timestamp` must be at most 35 minutes old (Jira retries for 30) and at most 5 minutes ahead of this clock. Each delivery is acted on once. An unknown integration and a bad signature get the same 401.",
      params: { id: { description: "The integration's id" } },
      headers: {
        "X-Hub-Signature": {
          description:
            "`sha256=` and the HMAC-SHA256 (hex) of the raw body under the webhook secret",
          required: true,
        },
        "X-Atlassian-Webhook-Identifier": {
          description: "The delivery's id; a retry carries the same one",
          required: false,
        },
      },
      contentTypes: ["application/json"],
      ok: "`{ok: true}`, with the queued task's id when the delivery asks for one",
      async handle(deps, request) {
        return handleJira(
          {
            tasks: deps.tasks,
            logger: deps.logger,
            requestTask: deps.requestTask,
            allowLocal: jiraSettingsOf(deps).allowLocalSites,
          },
          request.params.id ?? "",
          {
            rawBody: await request.readBody(),
            signature: request.header("x-hub-signature"),
            delivery: request.header("x-atlassian-webhook-identifier"),
          },
        );
      },
    },
  ],
  settings: (config: Config): JiraServiceSettings => ({
    allowLocalSites: config.allowLocalRepos,
  }),
  jobs() {},
  install: null,
  reportsMerges: true,
  async notice(deps, integration, task, kind) {
    await postJiraNotice(
      { allowLocal: jiraSettingsOf(deps).allowLocalSites },
      integration,
      task,
      kind,
    );
  },
  async taskInput(_deps, _integration, request) {
    return trackerTaskInput(request);
  },
  async announce() {},
  async reply(deps, integration, request, text) {
    if (request.type !== "jira") return;
    await commentOnJiraIssue(
      await jiraClient(integration, jiraSettingsOf(deps).allowLocalSites),
      request.report_to.ref.issue_key ?? "",
      redactText(text),
    );
  },
  markers: [jiraDeliveryMarker],
} satisfies IntegrationPlugin<"jira">;
