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
import { pageQuery } from "../../paging.js";
import { route, type AnyRoute } from "../../route.js";
import { noContent } from "../../schemas.js";
import {
  createIntegrationBody,
  integration,
  integrationParams,
  patchIntegrationBody,
} from "./schema.js";

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
