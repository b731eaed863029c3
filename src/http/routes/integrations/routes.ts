import { z } from "zod";
import {
  createIntegration,
  deleteIntegration,
  getIntegrationRecord,
  listIntegrations,
  toIntegrationView,
  updateIntegration,
  type IntegrationView,
} from "../../../domain/integrations/store.js";
import type { VendorInstall, VendorInstalls } from "../../../domain/integrations/endpoint.js";
import { errors } from "../../../errors.js";
import { pageQuery } from "../../paging.js";
import { route, type AnyRoute } from "../../route.js";
import { noContent } from "../../schemas.js";
import {
  createIntegrationBody,
  integration,
  integrationParams,
  patchIntegrationBody,
  slackCallbackQuery,
  slackInstallResult,
  slackInstallStart,
  type SlackInstallResultView,
} from "./schema.js";

/** The install flow of an integration type (its plugin's, bound by src/context.ts). */
function installOf(installs: VendorInstalls, type: "slack"): VendorInstall {
  const install = installs[type];
  if (!install) throw errors.notFound(`${type} install`);
  return install;
}

function escapeHtml(text: string): string {
  return text.replace(
    /[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!,
  );
}

/** A browser lands on the redirect URL: it gets a small page (API clients get JSON). */
function installedPage(result: SlackInstallResultView): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>foreman: Slack installed</title></head>
<body><h1>Slack app installed</h1><p>${escapeHtml(result.message)}</p></body></html>
`;
}

export const integrationRoutes: AnyRoute[] = [
  route({
    method: "post",
    path: "/integrations",
    operationId: "createIntegration",
    tag: "integrations",
    summary: "Add a Slack, Linear or Jira integration",
    description:
      "Settings map the source (a Slack channel, a Linear team, a Jira project) to repositories of the account's workspaces (404 for a repository that is not the account's). Secrets are write-only. The answer's `endpoints` are the paths to enter in the vendor's app settings.",
    auth: "key",
    body: createIntegrationBody,
    status: 201,
    response: { description: "The integration (without its secrets)", schema: integration },
    location: (i: IntegrationView) => `/integrations/${i.id}`,
    async handler(_ctx, { body, principal, deps }) {
      return createIntegration(deps.models, principal.accountId, body);
    },
  }),
  route({
    method: "get",
    path: "/integrations",
    operationId: "listIntegrations",
    tag: "integrations",
    summary: "The account's integrations",
    auth: "key",
    query: pageQuery,
    status: 200,
    response: { description: "Integrations, newest first", schema: z.array(integration) },
    page: { key: (i: IntegrationView) => [i.created_at, i.id] },
    async handler(_ctx, { principal, deps }) {
      return listIntegrations(deps.models, principal.accountId);
    },
  }),
  route({
    method: "get",
    path: "/integrations/:id",
    operationId: "getIntegration",
    tag: "integrations",
    summary: "One integration",
    auth: "key",
    params: integrationParams,
    status: 200,
    response: { description: "The integration (without its secrets)", schema: integration },
    async handler(_ctx, { params, principal, deps }) {
      return toIntegrationView(
        await getIntegrationRecord(deps.models, principal.accountId, params.id),
      );
    },
  }),
  route({
    method: "patch",
    path: "/integrations/:id",
    operationId: "updateIntegration",
    tag: "integrations",
    summary: "Change an integration",
    description: "`settings` replaces the settings; `secrets` replaces only the secrets it names.",
    auth: "key",
    params: integrationParams,
    body: patchIntegrationBody,
    status: 200,
    response: { description: "The updated integration", schema: integration },
    async handler(_ctx, { params, body, principal, deps }) {
      return updateIntegration(deps.models, principal.accountId, params.id, body);
    },
  }),
  route({
    method: "post",
    path: "/integrations/:id/slack/install",
    operationId: "startSlackInstall",
    tag: "integrations",
    summary: "Start installing the Slack app into a Slack workspace for this integration",
    description:
      "Answers a single-use state (valid 10 minutes, bound to the caller's account and this integration) and Slack's authorize URL carrying it. After the user allows the app, Slack sends the browser to GET /integrations/slack/oauth/callback, which stores the bot token and the Slack team on the integration. 404 for an integration that is not the account's or not a Slack one; 503 when SLACK_CLIENT_ID, SLACK_CLIENT_SECRET or PUBLIC_URL is not set.",
    auth: "key",
    params: integrationParams,
    status: 201,
    response: { description: "The state and where to send the user", schema: slackInstallStart },
    errors: [404, 503],
    async handler(_ctx, { params, principal, deps }) {
      const start = await installOf(deps.vendorInstalls, "slack").begin(
        deps,
        principal.accountId,
        params.id,
      );
      return start as z.infer<typeof slackInstallStart>;
    },
  }),
  route({
    method: "get",
    path: "/integrations/slack/oauth/callback",
    operationId: "slackOAuthCallback",
    tag: "integrations",
    summary:
      "Slack's OAuth redirect: finishes an install started with POST /integrations/{id}/slack/install",
    description:
      "Slack sends the browser here after the user allowed (or cancelled) the install. The state is used once; the code is exchanged with oauth.v2.access; the bot token (write-only) and the team are stored on the state's integration. Answers JSON, or a small HTML page when the client prefers text/html; errors are JSON. 400: missing, unknown, expired or used state, a cancelled install (`error=access_denied`) or a code Slack refused; 404: the integration was removed meanwhile; 409: the team is another integration's, or not the one `settings.team_id` names; 502: Slack failed; 503: not configured. On every error the integration is left as it was.",
    auth: "none",
    query: slackCallbackQuery,
    status: 200,
    response: { description: "The install", schema: slackInstallResult },
    errors: [404, 409, 502, 503],
    html: installedPage,
    async handler(_ctx, { query, deps }) {
      const result = (await installOf(deps.vendorInstalls, "slack").complete(deps, query)) as Omit<
        SlackInstallResultView,
        "installed" | "message"
      >;
      return {
        installed: true as const,
        message: `The Slack app is installed in ${result.team_name ?? result.team_id} for integration ${result.integration_id}.`,
        ...result,
      };
    },
  }),
  route({
    method: "delete",
    path: "/integrations/:id",
    operationId: "deleteIntegration",
    tag: "integrations",
    summary: "Remove an integration",
    auth: "key",
    params: integrationParams,
    status: 204,
    response: { description: "Removed", schema: noContent },
    async handler(_ctx, { params, principal, deps }) {
      await deleteIntegration(deps.models, principal.accountId, params.id);
    },
  }),
];
