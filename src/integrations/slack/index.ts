import { slackKind } from "../../domain/integrations/kinds.js";
import { slackInstall, slackInstallStateMarker, slackInstallStateUsedMarker } from "./install.js";
import { slackDeliveryMarker } from "./door.js";
import { errors } from "../../errors.js";
import type { VendorEndpoint, VendorRequest } from "../../domain/integrations/endpoint.js";
import type { IntegrationDeps, IntegrationPlugin, PluginHandler } from "../plugin.js";
import { slackServiceSettings, slackSettingsOf } from "./settings.js";
import {
  handleSlack,
  handleSlackApp,
  postSlackNotice,
  replyInSlack,
  SLACK_ENDPOINTS,
  type SlackEndpoint,
  type SlackRequest,
} from "./door.js";
import { announceSlackTask, slackTaskInput } from "./requests.js";

/*
 * Slack: slash commands, mentions and gate buttons at the integration's own URLs (signed
 * with its signing secret) or at the Slack app's URLs (signed with SLACK_SIGNING_SECRET,
 * routed by team); the app is installed through Slack's OAuth flow; a task reports in its
 * thread.
 */

const SIGNED_HEADERS = {
  "X-Slack-Signature": {
    description:
      "`v0=` and the HMAC-SHA256 of `v0:<timestamp>:<raw body>` under the signing secret",
    required: true,
  },
  "X-Slack-Request-Timestamp": {
    description:
      "Unix seconds when Slack sent it; refused outside 5 minutes of this clock either way",
    required: true,
  },
};

const ENDPOINT = {
  description:
    "`commands` (the slash command, a form), `interactions` (gate buttons, a form whose `payload` is JSON), `events` (mentions, JSON)",
  values: SLACK_ENDPOINTS,
};

const CONTENT_TYPES = ["application/x-www-form-urlencoded", "application/json"];

const OK =
  "What Slack shows: a command's ephemeral answer, an event's `{ok}` (or the URL verification `challenge`), an interaction's acknowledgement";

/** The endpoint named by the path, or 404 for one Slack has none of. */
function endpointOf(request: VendorRequest): SlackEndpoint {
  const endpoint = request.params.endpoint ?? "";
  if (!(SLACK_ENDPOINTS as readonly string[]).includes(endpoint)) throw errors.notFound("route");
  return endpoint as SlackEndpoint;
}

async function signed(request: VendorRequest): Promise<SlackRequest> {
  return {
    rawBody: await request.readBody(),
    signature: request.header("x-slack-signature"),
    timestamp: request.header("x-slack-request-timestamp"),
    contentType: request.header("content-type"),
  };
}

function doorDeps(deps: IntegrationDeps) {
  return {
    tasks: deps.tasks,
    logger: deps.logger,
    requestTask: deps.requestTask,
    apiUrl: slackSettingsOf(deps).apiUrl,
  };
}

const routes: readonly VendorEndpoint<PluginHandler, "slack">[] = [
  {
    method: "post",
    path: "/integrations/slack/:endpoint",
    type: "slack",
    operationId: "slackAppRequest",
    summary: "The Slack app's own URLs: a request from any workspace the app is installed in",
    description:
      "Signed with the app's signing secret (SLACK_SIGNING_SECRET), no API key; routed to the integration installed in the request's team. A team no integration has is answered 200 with how to connect it.",
    params: { endpoint: ENDPOINT },
    headers: SIGNED_HEADERS,
    contentTypes: CONTENT_TYPES,
    ok: OK,
    async handle(deps, request) {
      const endpoint = endpointOf(request);
      return handleSlackApp(
        { ...doorDeps(deps), signingSecret: slackSettingsOf(deps).signingSecret },
        endpoint,
        await signed(request),
      );
    },
  },
  {
    method: "post",
    path: "/integrations/:id/slack/:endpoint",
    type: "slack",
    operationId: "slackRequest",
    summary: "A Slack request to one integration (slash command, gate button, mention)",
    description:
      "Signed with the integration's `signing_secret`, no API key. An unknown integration and a bad signature get the same 401.",
    params: { id: { description: "The integration's id" }, endpoint: ENDPOINT },
    headers: SIGNED_HEADERS,
    contentTypes: CONTENT_TYPES,
    ok: OK,
    async handle(deps, request) {
      const endpoint = endpointOf(request);
      return handleSlack(doorDeps(deps), request.params.id ?? "", endpoint, await signed(request));
    },
  },
];

export const slackPlugin = {
  type: "slack",
  kind: slackKind,
  routes,
  settings: slackServiceSettings,
  jobs() {},
  install: slackInstall,
  // A Slack thread has the pull request's link already.
  reportsMerges: false,
  async notice(deps, integration, task, kind) {
    if (kind === "merged") return;
    await postSlackNotice(
      { tasks: deps.tasks, logger: deps.logger, apiUrl: slackSettingsOf(deps).apiUrl },
      integration,
      task,
      kind,
    );
  },
  async taskInput(deps, integration, request) {
    if (request.type !== "slack") throw new Error(`a ${request.type} request is not Slack's`);
    return slackTaskInput(deps, integration, request);
  },
  async announce(deps, integration, request, repo) {
    if (request.type === "slack") await announceSlackTask(deps, integration, request, repo);
  },
  async reply(deps, integration, request, text) {
    if (request.type === "slack")
      await replyInSlack(integration, request, text, slackSettingsOf(deps).apiUrl);
  },
  markers: [slackDeliveryMarker, slackInstallStateMarker, slackInstallStateUsedMarker],
} satisfies IntegrationPlugin<"slack">;
