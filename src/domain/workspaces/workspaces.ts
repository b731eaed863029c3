import { constants } from "node:fs";
// eslint-disable-next-line no-restricted-imports -- not a working copy: the local repository a workspace names (ALLOW_LOCAL_REPOS), looked at where git will clone it from
import { access, stat } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { afterFilter, type PageRequest } from "../../util/paging.js";
import { generationMarker } from "../../durable/markers.js";
import {
  collectionOf,
  type Models,
  type RepositoryDoc,
  type WorkspaceDoc,
} from "../../db/models.js";
import { errors } from "../../errors.js";
import { GitError, remoteHead } from "../../util/git.js";
import { newId } from "../../util/ids.js";
import { checkRemote, RemoteUrlError } from "../../util/remote-url.js";
import { redactText } from "../../util/redact.js";

export interface RepoInput {
  name: string;
  clone_url: string;
  default_branch?: string | undefined;
}

export interface RepoView {
  id: string;
  name: string;
  full_name: string;
  clone_url: string;
  /** Null for a GitHub repository until GitHub lists it or a clone finds the remote's HEAD. */
  default_branch: string | null;
  private: boolean;
}

export interface WorkspaceView {
  id: string;
  kind: "git" | "github";
  name: string;
  repo_count: number;
  github: { installation_id: number; account_login: string | null; suspended: boolean } | null;
  created_at: string;
  updated_at: string;
}

/** The marker bumped by every change to an existing workspace; workspace caches watch it. */
export const WORKSPACES_MARKER = generationMarker("workspaces-generation");

export type WorkspaceRecord = WorkspaceDoc & { _id: string; created_at: Date; updated_at: Date };

export function toWorkspaceView(ws: WorkspaceRecord): WorkspaceView {
  return {
    id: ws._id,
    kind: ws.kind as "git" | "github",
    name: ws.name,
    repo_count: ws.repos.length,
    github:
      ws.kind === "github" && ws.github?.installation_id != null
        ? {
            installation_id: ws.github.installation_id,
            account_login: ws.github.account_login ?? null,
            suspended: Boolean(ws.github.suspended_at),
          }
        : null,
    created_at: ws.created_at.toISOString(),
    updated_at: ws.updated_at.toISOString(),
  };
}

export function toRepoView(repo: RepositoryDoc): RepoView {
  return {
    id: repo.repo_id,
    name: repo.name,
    full_name: repo.full_name,
    // Remotes may carry credentials (https://user:token@host/...); never show them.
    clone_url: redactText(repo.clone_url),
    default_branch: repo.default_branch ?? null,
    private: repo.private ?? false,
  };
}

/**
 * Refuses remotes outside the clone-URL policy (src/util/remote-url.ts) with a 400 naming
 * each field; a host that does not resolve now is let through (the clone checks again).
 */
async function checkRemotes(repos: RepoInput[], allowLocalRepos: boolean): Promise<void> {
  const problems = await Promise.all(
    repos.map(async (repo, index) => {
      try {
        await checkRemote(repo.clone_url, { allowLocal: allowLocalRepos, unresolved: "allow" });
        return null;
      } catch (error) {
        if (!(error instanceof RemoteUrlError)) throw error;
        return { path: `body.repos.${index}.clone_url`, message: error.message };
      }
    }),
  );
  const found = problems.filter((p) => p !== null);
  if (found.length)
    throw errors.validation(
      found,
      "A clone URL is not allowed: only https://, ssh:// and user@host:path remotes on public hosts.",
    );
}

/** How long asking a remote for its HEAD may take when a workspace is created. */
const LS_REMOTE_TIMEOUT_MS = 15_000;

/**
 * The remote's default branch (`git ls-remote --symref <url> HEAD`), or null when the remote
 * cannot say (unreachable, or a server without symref support): clones then follow the
 * remote's HEAD and record the branch they found. Never assumed to be `main`.
 */
export async function remoteDefaultBranch(url: string): Promise<string | null> {
  try {
    return await remoteHead(url, { timeoutMs: LS_REMOTE_TIMEOUT_MS });
  } catch {
    return null;
  }
}

/** The folder a clone URL names on this machine (an absolute path or file://), or null. */
function localFolderOf(url: string): string | null {
  if (url.startsWith("/")) return url;
  if (!/^file:\/\//i.test(url)) return null;
  try {
    return fileURLToPath(url);
  } catch {
    return url; // file://host/… names no local folder: git refuses it, and so does the check
  }
}

/** Why a local folder cannot be cloned, in words for the account, or null when it can. */
async function localFolderProblem(folder: string): Promise<string | null> {
  try {
    if (!(await stat(folder)).isDirectory()) return `${folder} is not a directory`;
    await access(folder, constants.R_OK | constants.X_OK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return `${folder} does not exist`;
    if (code === "EACCES" || code === "EPERM") return `${folder} cannot be read by the service`;
    return `${folder} cannot be read (${code ?? "error"})`;
  }
  return null;
}

/**
 * A local repository (ALLOW_LOCAL_REPOS) is checked where it is: an existing, readable
 * directory that git reads as a repository (`git ls-remote`, as the clone will). Answers the
 * problem, or the repository's default branch (null for one without commits).
 */
async function inspectLocalRepo(
  url: string,
  folder: string,
): Promise<{ problem: string } | { branch: string | null }> {
  const problem = await localFolderProblem(folder);
  if (problem) return { problem };
  try {
    return { branch: await remoteHead(url, { timeoutMs: LS_REMOTE_TIMEOUT_MS }) };
  } catch (error) {
    if (!(error instanceof GitError)) throw error;
    if (/not appear to be a git repository|not a git repository/i.test(error.stderr))
      return { problem: `${folder} is not a git repository` };
    const reason = /fatal: (.*)/.exec(error.stderr)?.[1] ?? "git cannot read it";
    return { problem: `${folder} cannot be read as a git repository: ${reason}` };
  }
}

/**
 * The default branch of each repository (given, else asked of the remote: null, not the
 * schema's "main", when unknown). Local repositories are checked first: 400 naming each
 * field whose folder is missing, not a directory, unreadable or not a git repository.
 */
async function defaultBranches(repos: RepoInput[]): Promise<Array<string | null>> {
  const problems: Array<{ path: string; message: string }> = [];
  const branches = await Promise.all(
    repos.map(async (repo, index) => {
      const folder = localFolderOf(repo.clone_url);
      if (!folder) return repo.default_branch ?? remoteDefaultBranch(repo.clone_url);
      const found = await inspectLocalRepo(repo.clone_url, folder);
      if ("problem" in found) {
        problems.push({ path: `body.repos.${index}.clone_url`, message: found.problem });
        return null;
      }
      return repo.default_branch ?? found.branch;
    }),
  );
  if (problems.length)
    throw errors.validation(
      problems.sort((a, b) => a.path.localeCompare(b.path, "en", { numeric: true })),
      "A repository path cannot be used: it must be an existing, readable git repository.",
    );
  return branches;
}

/** Creates a plain-git workspace owned by the account; repository names must be unique in it. */
export async function createGitWorkspace(
  models: Models,
  accountId: string,
  input: { name: string; repos: RepoInput[] },
  options: { allowLocalRepos: boolean },
): Promise<WorkspaceRecord> {
  await checkRemotes(input.repos, options.allowLocalRepos);
  const seen = new Set<string>();
  for (const repo of input.repos) {
    const key = repo.name.toLowerCase();
    if (seen.has(key)) throw errors.conflict(`The repository name "${repo.name}" is given twice.`);
    seen.add(key);
  }
  const branches = await defaultBranches(input.repos);
  const doc = await models.Workspace.create({
    _id: newId("ws"),
    kind: "git",
    account_id: accountId,
    name: input.name,
    repos: input.repos.map((r, i) => ({
      repo_id: newId("repo"),
      name: r.name.split("/").pop() ?? r.name,
      full_name: r.name,
      clone_url: r.clone_url,
      default_branch: branches[i] ?? null,
      private: false,
    })),
  });
  return doc.toObject() as WorkspaceRecord;
}

/** Workspaces the account may use, newest first; with `page`, at most `limit + 1` after its cursor. */
export async function listWorkspaces(
  models: Models,
  accountId: string,
  page?: PageRequest,
): Promise<WorkspaceRecord[]> {
  const docs = await models.Workspace.find({
    account_id: accountId,
    "github.deleted_at": null,
    ...afterFilter(page?.after),
  })
    .sort({ created_at: -1, _id: -1 })
    .limit(page ? page.limit + 1 : 0)
    .lean();
  return docs as WorkspaceRecord[];
}

/** One workspace of the account; another account's or an unknown id is `not_found`. */
export async function getWorkspace(
  models: Models,
  accountId: string,
  workspaceId: string,
): Promise<WorkspaceRecord> {
  const doc = await findWorkspace(models, workspaceId);
  if (!doc || doc.account_id !== accountId || doc.github?.deleted_at)
    throw errors.notFound("workspace");
  return doc;
}

/** Every repository of the account's workspaces, with the workspace it belongs to. */
export async function accountRepos(
  models: Models,
  accountId: string,
): Promise<Array<{ workspace_id: string; repo_id: string; full_name: string }>> {
  const workspaces = await collectionOf<WorkspaceRecord>(models.Workspace)
    .find({ account_id: accountId }, { projection: { _id: 1, repos: 1 } })
    .toArray();
  return workspaces.flatMap((ws) =>
    (ws.repos ?? []).map((repo) => ({
      workspace_id: ws._id,
      repo_id: repo.repo_id,
      full_name: repo.full_name,
    })),
  );
}

/** A workspace by id, whatever its account or state (the caller checks both), or null. */
export async function findWorkspace(
  models: Models,
  workspaceId: string,
): Promise<WorkspaceRecord | null> {
  // The driver directly: every task creation runs this.
  return collectionOf<WorkspaceRecord>(models.Workspace).findOne({ _id: workspaceId });
}

/**
 * Finds a repository of one of the account's workspaces by id or by `owner/name`.
 * Used by every door that names a repository (tasks, agents, automations, health).
 */
export async function resolveRepo(
  models: Models,
  accountId: string,
  workspaceId: string,
  repoRef: string,
  cached?: (workspaceId: string) => Promise<WorkspaceRecord | null>,
): Promise<{ workspace: WorkspaceRecord; repo: RepositoryDoc }> {
  const hit = cached ? await cached(workspaceId) : null;
  const workspace =
    hit && hit.account_id === accountId && !hit.github?.deleted_at
      ? hit
      : await getWorkspace(models, accountId, workspaceId);
  const ref = repoRef.toLowerCase();
  const repo = workspace.repos.find(
    (r) => r.repo_id === repoRef || r.full_name.toLowerCase() === ref,
  );
  if (!repo) throw errors.notFound("repository in this workspace");
  if (workspace.github?.suspended_at)
    throw errors.invalidState(
      `The GitHub App installation of workspace ${workspace._id} (${workspace.github.account_login ?? "unknown account"}) is suspended on GitHub; nothing can run there until an owner unsuspends it.`,
    );
  return { workspace, repo };
}
