import path from "node:path";
import { z } from "zod";
import { deleteWorkspace } from "../../../domain/workspaces/deletion.js";
import {
  createGitWorkspace,
  getWorkspace,
  listWorkspaces,
  toRepoView,
  toWorkspaceView,
  type WorkspaceView,
} from "../../../domain/workspaces/workspaces.js";
import { pageQuery, positionKey } from "../../paging.js";
import { startLink } from "../../../domain/workspaces/linking.js";
import { route, tasksOf } from "../../route.js";
import { noContent } from "../../schemas.js";
import {
  createWorkspaceBody,
  linkStart,
  repository,
  workspace,
  workspaceParams,
  workspaceWithRepos,
} from "./schema.js";

export const workspaceRoutes = [
  route({
    method: "post",
    path: "/workspaces",
    operationId: "createWorkspace",
    tag: "workspaces",
    summary: "Create a plain-git workspace",
    description:
      "Repositories are git remotes: https://, ssh:// or user@host:path on public hosts (local paths, file://, loopback, private, link-local and metadata addresses, other transports are refused with 400 unless the operator sets ALLOW_LOCAL_REPOS=true). The result of a task there is a pushed branch.",
    auth: "key",
    body: createWorkspaceBody,
    status: 201,
    response: { description: "The workspace with its repositories", schema: workspaceWithRepos },
    errors: [409],
    location: (w: WorkspaceView) => `/workspaces/${w.id}`,
    async handler(_ctx, { body, principal, deps }) {
      const ws = await createGitWorkspace(deps.models, principal.accountId, body, {
        allowLocalRepos: deps.config.allowLocalRepos,
      });
      return { ...toWorkspaceView(ws), repos: ws.repos.map(toRepoView) };
    },
  }),
  route({
    method: "get",
    path: "/workspaces",
    operationId: "listWorkspaces",
    tag: "workspaces",
    summary: "Workspaces of the caller's account, newest first",
    description: "Paged (see Paging).",
    auth: "key",
    query: pageQuery,
    status: 200,
    response: { description: "Workspaces", schema: z.array(workspace) },
    page: { key: (w: WorkspaceView) => [w.created_at, w.id] },
    async handler(_ctx, { principal, deps, page }) {
      const found = await listWorkspaces(deps.models, principal.accountId, page);
      return found.map(toWorkspaceView);
    },
  }),
  // Before /workspaces/:id, so that "link" is never read as a workspace id.
  route({
    method: "post",
    path: "/workspaces/link",
    operationId: "linkWorkspace",
    tag: "workspaces",
    summary: "Start linking a GitHub App installation to the caller's account",
    description:
      "Answers a single-use state (valid 15 minutes) and the App's installation URL carrying it. After installing (or choosing an existing installation), GitHub sends the user to GET /github/setup, which links the installation when the user can access it. 503 when the App, APP_SLUG or its OAuth credentials are not configured.",
    auth: "key",
    status: 201,
    response: { description: "The state and where to send the user", schema: linkStart },
    errors: [503],
    async handler(_ctx, { principal, deps }) {
      return startLink(deps.models, deps.config.github, principal.accountId);
    },
  }),
  route({
    method: "get",
    path: "/workspaces/:id",
    operationId: "getWorkspace",
    tag: "workspaces",
    summary: "One workspace",
    auth: "key",
    params: workspaceParams,
    status: 200,
    response: { description: "The workspace", schema: workspace },
    errors: [404],
    async handler(_ctx, { params, principal, deps }) {
      return toWorkspaceView(await getWorkspace(deps.models, principal.accountId, params.id));
    },
  }),
  route({
    method: "delete",
    path: "/workspaces/:id",
    operationId: "deleteWorkspace",
    tag: "workspaces",
    summary: "Delete a workspace",
    description:
      "Refused with 409 invalid_state, naming them, while any task of the workspace has not ended (cancel it with POST /tasks/{id}/cancel or wait) or a health scan of it is pending or running. A plain-git workspace is removed with its repositories; a GitHub App installation's workspace is unlinked from the account (the App stays installed on GitHub; POST /workspaces/link links it again). Its automations (and their schedules), its repository memory and the kept working copies of its tasks go too. Ended tasks and finished health reports stay, readable by their ids. Another account's workspace is 404.",
    auth: "key",
    params: workspaceParams,
    status: 204,
    response: { description: "Deleted", schema: noContent },
    errors: [404, 409],
    async handler(_ctx, { params, principal, deps }) {
      await deleteWorkspace(
        {
          tasks: tasksOf(deps),
          cron: deps.cron,
          logger: deps.logger,
          // The working copies' folder (pipeline/runner.ts, workdirFor).
          workRoot: path.join(deps.config.dataDir, "work"),
        },
        principal.accountId,
        params.id,
      );
    },
  }),
  route({
    method: "get",
    path: "/workspaces/:id/repos",
    operationId: "listWorkspaceRepos",
    tag: "workspaces",
    summary: "Repositories of one workspace",
    auth: "key",
    description: "In the workspace's order; paged (see Paging).",
    params: workspaceParams,
    query: pageQuery,
    status: 200,
    response: { description: "Repositories", schema: z.array(repository) },
    // Answered whole from the workspace document: the position is the key.
    page: { key: (_repo: unknown, index: number) => [positionKey(index)] },
    errors: [404],
    async handler(_ctx, { params, principal, deps }) {
      const ws = await getWorkspace(deps.models, principal.accountId, params.id);
      return ws.repos.map(toRepoView);
    },
  }),
];
