import type { Models } from "../db/models.js";
import { installationWorkspaceId } from "../domain/workspaces/linking.js";
import { findWorkspace, type WorkspaceRecord } from "../domain/workspaces/workspaces.js";
import { redactText } from "../util/redact.js";
import type { InstallationOctokit } from "../github-api/client.js";

/*
 * A thread is an issue or pull request conversation: where commands come from and where the
 * task answers (plan, diff summary, pull request link).
 */

export interface Thread {
  installation_id: number;
  repo_full_name: string;
  number: number;
  is_pull_request: boolean;
}

export function ownerAndRepo(fullName: string): { owner: string; repo: string } {
  const [owner, repo] = fullName.split("/") as [string, string];
  return { owner, repo };
}

/**
 * Hidden in what the App writes on feedback it acts on, so that nothing it wrote (as its bot,
 * or quoted by a person) is taken for feedback again.
 */
export const APP_MARKER = "<!-- foreman:reply -->";

/**
 * True for anything the App itself (or another bot) wrote: a bot user, the App's own
 * `<slug>[bot]` login, or a body carrying the App's marker. Such text never starts work.
 */
export function writtenByApp(
  user: { type?: string; login?: string } | null | undefined,
  body: string | null | undefined,
  slug: string | undefined,
): boolean {
  if (!user || user.type === "Bot") return true;
  const login = user.login ?? "";
  if (login.endsWith("[bot]") || (slug && login.toLowerCase() === `${slug}[bot]`.toLowerCase()))
    return true;
  return Boolean(body?.includes(APP_MARKER));
}

/** Posts a comment in the thread; the text is redacted and kept within GitHub's limit. */
export async function reply(
  octokit: InstallationOctokit,
  thread: Pick<Thread, "repo_full_name" | "number">,
  body: string,
): Promise<void> {
  await octokit.rest.issues.createComment({
    ...ownerAndRepo(thread.repo_full_name),
    issue_number: thread.number,
    body: redactText(body).slice(0, 65_000),
  });
}

/**
 * True when the user may push to the repository (admin, maintain or write). Asked of
 * GitHub each time: a permission removed a minute ago counts.
 */
export async function hasWriteAccess(
  octokit: InstallationOctokit,
  fullName: string,
  username: string,
): Promise<boolean> {
  try {
    const { data } = await octokit.rest.repos.getCollaboratorPermissionLevel({
      ...ownerAndRepo(fullName),
      username,
    });
    return data.permission === "admin" || data.permission === "write";
  } catch (error) {
    if ((error as { status?: number }).status === 404) return false;
    throw error;
  }
}

/** The workspace of an installation, or null when the service has not seen it. */
export async function workspaceOfInstallation(
  models: Models,
  installationId: number,
): Promise<WorkspaceRecord | null> {
  return findWorkspace(models, installationWorkspaceId(installationId));
}

/** How to link an installation to an account, for a thread where it is not linked yet. */
export function howToLink(slug: string | undefined): string {
  return [
    "This GitHub App installation is not linked to an account of the service yet, so it cannot run tasks here.",
    "",
    "To link it, an account holder calls `POST /workspaces/link` with their API key and opens the `install_url` it answers" +
      (slug ? ` (the ${slug} app's installation page)` : "") +
      "; after GitHub sends them back, this installation belongs to their account and commands work.",
  ].join("\n");
}

/** Whether a workspace can take tasks: linked, not suspended, not deleted. */
export function usableWorkspace(workspace: WorkspaceRecord | null): workspace is WorkspaceRecord & {
  account_id: string;
} {
  return Boolean(
    workspace?.account_id && !workspace.github?.suspended_at && !workspace.github?.deleted_at,
  );
}
