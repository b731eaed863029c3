import { linearKind } from "../../domain/integrations/kinds.js";
import { linearDeliveryMarker } from "./door.js";
import { redactText } from "../../util/redact.js";
import type { Config } from "../../config/env.js";
import type { IntegrationJobDeps, IntegrationPlugin } from "../plugin.js";
import { trackerTaskInput } from "../shared/task-request.js";
import { commentOnIssue, handleLinear, linearClient, postLinearNotice } from "./door.js";

/*
 * Linear: a labelled (or assigned) issue becomes a task; comments decide its gates; the
 * issue moves to started with the plan and to completed on the merge.
 */

/** What the service's configuration sets for Linear (`IntegrationDeps.vendors.linear`). */
interface LinearServiceSettings {
  /** Linear's GraphQL endpoint (LINEAR_API_URL; tests point it at a fake). */
  apiUrl?: string | undefined;
}

function linearSettingsOf(deps: Pick<IntegrationJobDeps, "vendors">): LinearServiceSettings {
  return (deps.vendors.linear ?? {}) as LinearServiceSettings;
}

export const linearPlugin = {
  type: "linear",
  kind: linearKind,
  routes: [
    {
      method: "post",
      type: "linear",
      path: "/integrations/:id/linear/webhook",
      operationId: "linearWebhook",
      summary: "Linear's webhook deliveries to one integration (issues, comments)",
      description:
        "Signed with the integration's `webhook_secret`, no API key; `webhookTimestamp` in the body must be within 60 seconds of this clock either way. Each delivery is acted on once. An unknown integration and a bad signature get the same 401.",
      params: { id: { description: "The integration's id" } },
      headers: {
        "Linear-Signature": {
          description: "The HMAC-SHA256 (hex) of the raw body under the webhook secret",
          required: true,
        },
        "Linear-Delivery": {
          description: "The delivery's id; a redelivery carries the same one",
          required: false,
        },
      },
      contentTypes: ["application/json"],
      ok: "`{ok: true}`, with the queued task's id when the delivery asks for one",
      async handle(deps, request) {
        return handleLinear(
          {
            tasks: deps.tasks,
            logger: deps.logger,
            requestTask: deps.requestTask,
            apiUrl: linearSettingsOf(deps).apiUrl,
          },
          request.params.id ?? "",
          {
            rawBody: await request.readBody(),
            signature: request.header("linear-signature"),
            delivery: request.header("linear-delivery"),
          },
        );
      },
    },
  ],
  settings: (config: Config): LinearServiceSettings => ({ apiUrl: config.linearApiUrl }),
  jobs() {},
  install: null,
  reportsMerges: true,
  async notice(deps, integration, task, kind) {
    await postLinearNotice({ apiUrl: linearSettingsOf(deps).apiUrl }, integration, task, kind);
  },
  async taskInput(_deps, _integration, request) {
    return trackerTaskInput(request);
  },
  async announce() {},
  async reply(deps, integration, request, text) {
    if (request.type !== "linear") return;
    await commentOnIssue(
      linearClient(integration, linearSettingsOf(deps).apiUrl),
      request.report_to.ref.issue_id ?? "",
      redactText(text),
    );
  },
  markers: [linearDeliveryMarker],
} satisfies IntegrationPlugin<"linear">;
