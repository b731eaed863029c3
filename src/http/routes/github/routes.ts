import { completeLink } from "../../../domain/workspaces/linking.js";
import { route } from "../../route.js";
import { setupQuery, setupResult, type SetupResult } from "./schema.js";

function escapeHtml(text: string): string {
  return text.replace(
    /[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!,
  );
}

/** A browser lands on the setup URL: it gets a small page (API clients get JSON). */
function setupPage(result: SetupResult): string {
  const facts = result.linked
    ? `<p>Workspace <code>${escapeHtml(result.workspace_id ?? "")}</code> (${escapeHtml(
        result.account_login ?? "",
      )}, ${result.repo_count ?? 0} repositories) is now part of your account. List it with <code>GET /workspaces</code>.</p>`
    : "";
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>foreman: GitHub setup</title></head>
<body><h1>${result.linked ? "Installation linked" : "Nothing linked"}</h1>
<p>${escapeHtml(result.message)}</p>${facts}</body></html>
`;
}

export const githubRoutes = [
  route({
    method: "get",
    path: "/github/setup",
    operationId: "githubSetup",
    tag: "github",
    summary: "GitHub App setup redirect: links an installation to the account that asked",
    description:
      "GitHub sends the user here after installing the App (the callback URL, with request_oauth_on_install). The state of POST /workspaces/link is used once; the OAuth code is exchanged for a user token (never stored), and the installation is linked only when it is among the user's installations (GET /user/installations). Answers JSON, or a small HTML page when the client prefers text/html; errors are JSON. 400: unknown, expired or used state, missing or refused code; 403: the user cannot access the installation; 409: linked to another account already; 502: GitHub failed; 503: linking not configured.",
    auth: "none",
    query: setupQuery,
    status: 200,
    response: { description: "What happened", schema: setupResult },
    errors: [403, 409, 502, 503],
    html: setupPage,
    async handler(_ctx, { query, deps }) {
      if (query.setup_action === "request") {
        return {
          linked: false,
          message:
            "The installation was requested; an owner of the account has to approve it on GitHub. Once it is installed, link it with POST /workspaces/link.",
          workspace_id: null,
          installation_id: null,
          account_login: null,
          repo_count: null,
          suspended: null,
        };
      }
      if (query.state === undefined) {
        return {
          linked: false,
          message:
            "The installation was updated on GitHub; the service learns about repository changes from webhook events, so there is nothing to do here. To link an installation to an account, use POST /workspaces/link.",
          workspace_id: null,
          installation_id: query.installation_id ? Number(query.installation_id) : null,
          account_login: null,
          repo_count: null,
          suspended: null,
        };
      }
      const { workspace } = await completeLink(
        {
          models: deps.models,
          github: deps.config.github,
          client: deps.githubClient,
          logger: deps.logger,
        },
        {
          installation_id: Number(query.installation_id),
          code: query.code!,
          state: query.state,
        },
      );
      const suspended = Boolean(workspace.github?.suspended_at);
      return {
        linked: true,
        message: `Installation ${workspace.github?.installation_id} (${workspace.github?.account_login}) is linked to your account${suspended ? "; it is suspended on GitHub, so no task can run there until it is unsuspended" : ""}.`,
        workspace_id: workspace._id,
        installation_id: workspace.github?.installation_id ?? null,
        account_login: workspace.github?.account_login ?? null,
        repo_count: workspace.repos.length,
        suspended,
      };
    },
  }),
];
