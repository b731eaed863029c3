import { exchangeWebFlowCode } from "@octokit/oauth-methods";
import { Octokit } from "@octokit/rest";
import { randomBytes } from "node:crypto";
import type { GithubAppConfig } from "../../config/env.js";
import { isDuplicateKey } from "../../util/duplicate-key.js";
import { collectionOf, type Models, type RepositoryDoc } from "../../db/models.js";
import { errors } from "../../errors.js";
import type { GithubClient } from "../../github-api/client.js";
import type { Logger } from "../../util/logger.js";
import { forgetSecret, registerSecret } from "../../util/redact.js";
import { bumpMarker } from "../../durable/marker-cache.js";
import {
  claimMarker,
  dropMarker,
  dropMarkerIfExpired,
  markerFields,
  markerKind,
  stateHash,
} from "../../durable/markers.js";
import { WORKSPACES_MARKER, type WorkspaceRecord } from "./workspaces.js";

/** The first link of an installation to an account. */
export const githubLinkMarker = markerKind(
  "github-link",
  "github-link",
  (installationId: number) => [installationId],
);

/** A link state of `POST /workspaces/link`, by its hash. */
export const linkStateMarker = markerKind("link-state", "github-link-state", (state: string) => [
  stateHash(state),
]);

/** The use of a link state: its one use is decided by this insert. */
export const linkStateUsedMarker = markerKind(
  "link-state",
  "github-link-state",
  (state: string) => [stateHash(state), "used"],
);

/** The per-row lock of a workspace's read-compute-write. */
export const workspaceLockMarker = markerKind(
  "workspace-lock",
  "workspace-lock",
  (workspaceId: string) => [workspaceId],
);

/** The driver collections this module uses, typed by their records (db/models.ts). */
const workspacesOf = (models: Models) => collectionOf<WorkspaceRecord>(models.Workspace);

/** The workspace just written by a link; gone only if deleted in the same instant. */
async function linkedWorkspace(models: Models, id: string): Promise<WorkspaceRecord> {
  const workspace = await workspacesOf(models).findOne({ _id: id });
  if (!workspace) throw new Error(`workspace ${id} was deleted while it was being linked`);
  return workspace;
}

/*
 * GitHub App installations as workspaces, and linking them to accounts (docs/api.md,
 * "GitHub App: installations and linking").
 *
 * Each installation is one workspace, `gh-<installation id>`: deterministic, so a repeated
 * or racing `installation.created` and the setup redirect meet on the same row through a
 * unique insert. The row exists unlinked (`account_id` null) from the first event on; the
 * setup flow links it to the account that started it, after GitHub confirmed that the user
 * can see the installation. Rows are changed by read-compute-write under a per-row lock (a
 * unique insert: FerretDB has no positional array updates and no atomic conditional ones),
 * and every change bumps the workspaces marker so that per-process caches drop the old row.
 */

/** How long a link state may be used after `POST /workspaces/link`. */
export const LINK_STATE_TTL_MS = 15 * 60_000;
const GITHUB_TIMEOUT_MS = 15_000;
/** At 100 per page: more installations than any one user can see. */
const MAX_PAGES = 50;

/** The workspace id of a GitHub App installation. */
export function installationWorkspaceId(installationId: number): string {
  return `gh-${installationId}`;
}

/** The stored `_id` of a link state: its sha256, so the database never holds the value. */
export function linkStateId(state: string): string {
  return linkStateMarker(state).id;
}

/** What the service keeps of an installation's account. */
export interface InstallationInfo {
  id: number;
  account_login: string;
  account_type: string;
  target_id: number | null;
  /** Undefined: leave as recorded. */
  suspended_at?: Date | null;
}

/** A repository as GitHub describes it in events and listings. */
export interface GithubRepoInput {
  id: number;
  name: string;
  full_name: string;
  private: boolean;
  /** Absent in installation events; known from `GET /installation/repositories`. */
  default_branch?: string | null | undefined;
  clone_url?: string | undefined;
}

type InstallationAccount =
  | { login?: string | null; slug?: string | null; type?: string | null; name?: string | null }
  | null
  | undefined;

/** The installation fields of a webhook payload or a `GET /user/installations` entry. */
export function installationInfo(installation: {
  id: number;
  account?: InstallationAccount;
  target_id?: number | null;
  target_type?: string | null;
  suspended_at?: string | null;
}): InstallationInfo {
  const account = installation.account;
  return {
    id: installation.id,
    // An enterprise installation's account has a slug, not a login.
    account_login:
      account?.login ?? account?.slug ?? account?.name ?? `installation-${installation.id}`,
    account_type: installation.target_type ?? account?.type ?? "User",
    target_id: installation.target_id ?? null,
    suspended_at: installation.suspended_at ? new Date(installation.suspended_at) : null,
  };
}

function repoDoc(webUrl: string, repo: GithubRepoInput, known?: RepositoryDoc): RepositoryDoc {
  return {
    repo_id: String(repo.id),
    name: repo.name,
    full_name: repo.full_name,
    // Installation events carry no clone URL; GitHub's is always <web>/<owner>/<name>.git.
    clone_url: repo.clone_url ?? `${webUrl}/${repo.full_name}.git`,
    // Unknown until GitHub lists the repository or a clone finds the remote's HEAD.
    default_branch: repo.default_branch ?? known?.default_branch ?? null,
    private: repo.private,
  } as RepositoryDoc;
}

/** The repositories after an event: `replace` gives the whole list, `add` some more. */
function mergeRepos(
  webUrl: string,
  current: RepositoryDoc[],
  incoming: GithubRepoInput[],
  mode: "replace" | "add",
): RepositoryDoc[] {
  const known = new Map(current.map((r) => [r.repo_id, r]));
  const next = incoming.map((r) => repoDoc(webUrl, r, known.get(String(r.id))));
  if (mode === "replace") return next;
  const added = new Set(next.map((r) => r.repo_id));
  return [...current.filter((r) => !added.has(r.repo_id)), ...next];
}

type WorkspaceChange = Record<string, unknown>;

const LOCK_TTL_MS = 30_000;
const LOCK_WAIT_MS = 15_000;

/**
 * Runs `fn` while holding the row's lock: a unique `_id` insert, the one write FerretDB
 * makes atomic (its conditional updates are not), so concurrent events of one installation
 * change its row one after the other. A holder that died leaves a lock that is broken once
 * it has expired; holders keep it for two small writes.
 */
async function withRowLock<T>(models: Models, id: string, fn: () => Promise<T>): Promise<T> {
  const lock = workspaceLockMarker(id);
  const deadline = Date.now() + LOCK_WAIT_MS;
  for (;;) {
    const now = new Date();
    const expires_at = new Date(now.getTime() + LOCK_TTL_MS);
    if (await claimMarker(models, lock, { expires_at, created_at: now, updated_at: now })) break;
    await dropMarkerIfExpired(models, lock);
    if (Date.now() > deadline) throw new Error(`workspace ${id} stayed locked; giving up`);
    await new Promise((resolve) => setTimeout(resolve, 10 + Math.random() * 40));
  }
  try {
    return await fn();
  } finally {
    await dropMarker(models, lock).catch(() => undefined);
  }
}

/**
 * Changes one workspace row under its lock: reads it, computes the change, writes it only
 * if nobody wrote in between (`updated_at` unchanged; writers that do not take the lock),
 * else tries again. Returns the row as written, or null when there is no such row.
 */
async function changeWorkspace(
  models: Models,
  id: string,
  compute: (ws: WorkspaceRecord) => WorkspaceChange | null,
): Promise<WorkspaceRecord | null> {
  return withRowLock(models, id, () => changeUnlocked(models, id, compute));
}

async function changeUnlocked(
  models: Models,
  id: string,
  compute: (ws: WorkspaceRecord) => WorkspaceChange | null,
): Promise<WorkspaceRecord | null> {
  for (let attempt = 0; attempt < 8; attempt++) {
    const ws = await workspacesOf(models).findOne({
      _id: id,
    });
    if (!ws) return null;
    const set = compute(ws);
    if (!set) return ws;
    const previous = ws.updated_at ?? null;
    // Strictly later than the value read, so that the guard of a concurrent writer fails.
    const updated_at = new Date(Math.max(Date.now(), (previous?.getTime() ?? 0) + 1));
    const result = await workspacesOf(models).updateOne(
      { _id: id, updated_at: previous },
      { $set: { ...set, updated_at } },
    );
    if (result.matchedCount === 1) {
      await bumpMarker(models, WORKSPACES_MARKER);
      return await workspacesOf(models).findOne({
        _id: id,
      });
    }
  }
  throw new Error(`workspace ${id} kept changing; giving up this update`);
}

function githubFields(ws: WorkspaceRecord | null, info: InstallationInfo): WorkspaceChange {
  return {
    "github.installation_id": info.id,
    "github.account_login": info.account_login,
    "github.account_type": info.account_type,
    "github.target_id": info.target_id,
    "github.suspended_at":
      info.suspended_at === undefined ? (ws?.github?.suspended_at ?? null) : info.suspended_at,
  };
}

/** Inserts the row of an installation; false when it exists already. */
async function insertInstallation(
  models: Models,
  webUrl: string,
  info: InstallationInfo,
  repos: GithubRepoInput[],
  accountId: string | null,
  now: Date,
): Promise<boolean> {
  try {
    await workspacesOf(models).insertOne({
      _id: installationWorkspaceId(info.id),
      kind: "github",
      account_id: accountId,
      name: info.account_login,
      repos: mergeRepos(webUrl, [], repos, "replace"),
      github: {
        installation_id: info.id,
        account_login: info.account_login,
        account_type: info.account_type,
        target_id: info.target_id,
        suspended_at: info.suspended_at ?? null,
        deleted_at: null,
      },
      created_at: now,
      updated_at: now,
    });
    // A row linked at birth is new to the caches of its account.
    if (accountId) await bumpMarker(models, WORKSPACES_MARKER);
    return true;
  } catch (error) {
    if (isDuplicateKey(error)) return false;
    throw error;
  }
}

/**
 * Records an installation (created, new permissions accepted, or any event of one not seen
 * before): creates its unlinked row, or refreshes the account fields of the existing one.
 * With `repos` (the full list of `installation.created`), the repositories become that list.
 */
export async function recordInstallation(
  models: Models,
  webUrl: string,
  info: InstallationInfo,
  repos?: GithubRepoInput[],
  now = new Date(),
): Promise<WorkspaceRecord> {
  const id = installationWorkspaceId(info.id);
  if (!(await insertInstallation(models, webUrl, info, repos ?? [], null, now))) {
    await changeWorkspace(models, id, (ws) => ({
      name: info.account_login,
      ...githubFields(ws, info),
      ...(repos ? { repos: mergeRepos(webUrl, ws.repos, repos, "replace") } : {}),
    }));
  }
  return await linkedWorkspace(models, id);
}

/** Marks an installation suspended (a date) or active again (null). */
export async function setInstallationSuspended(
  models: Models,
  webUrl: string,
  info: InstallationInfo,
  suspendedAt: Date | null,
): Promise<WorkspaceRecord> {
  return recordInstallation(models, webUrl, { ...info, suspended_at: suspendedAt });
}

/**
 * Marks an installation deleted: its workspace disappears from every listing and lookup;
 * the row and the tasks that name it stay.
 */
export async function markInstallationDeleted(
  models: Models,
  installationId: number,
  now = new Date(),
): Promise<void> {
  await changeWorkspace(models, installationWorkspaceId(installationId), (ws) =>
    ws.github?.deleted_at ? null : { "github.deleted_at": now },
  );
}

/**
 * Unlinks an installation's workspace from `accountId` (DELETE /workspaces/{id}): the row
 * stays, unlinked, as before its first link, and its first-link marker goes, so the setup
 * flow can link it again (to this account or to another user with access on GitHub). The App
 * stays installed on GitHub. False when the row was not linked to `accountId`.
 */
export async function unlinkInstallation(
  models: Models,
  workspaceId: string,
  accountId: string,
): Promise<boolean> {
  let unlinked = false;
  const row = await changeWorkspace(models, workspaceId, (ws) => {
    unlinked = ws.account_id === accountId;
    return unlinked ? { account_id: null } : null;
  });
  const installationId = row?.github?.installation_id;
  if (unlinked && installationId != null)
    await dropMarker(models, githubLinkMarker(installationId), { account_id: accountId });
  return unlinked;
}

/** Repositories added to an installation (`installation_repositories.added`). */
export async function addInstallationRepos(
  models: Models,
  webUrl: string,
  info: InstallationInfo,
  repos: GithubRepoInput[],
): Promise<WorkspaceRecord | null> {
  const { suspended_at: _keep, ...account } = info;
  await recordInstallation(models, webUrl, account);
  return changeWorkspace(models, installationWorkspaceId(info.id), (ws) => ({
    repos: mergeRepos(webUrl, ws.repos, repos, "add"),
  }));
}

/** Repositories removed from an installation (`installation_repositories.removed`). */
export async function removeInstallationRepos(
  models: Models,
  webUrl: string,
  info: InstallationInfo,
  repoIds: number[],
): Promise<WorkspaceRecord | null> {
  const { suspended_at: _keep, ...account } = info;
  await recordInstallation(models, webUrl, account);
  const gone = new Set(repoIds.map(String));
  return changeWorkspace(models, installationWorkspaceId(info.id), (ws) =>
    ws.repos.some((r) => gone.has(r.repo_id))
      ? { repos: ws.repos.filter((r) => !gone.has(r.repo_id)) }
      : null,
  );
}

/**
 * Records a repository's default branch learned from a clone of the remote's HEAD, when
 * the workspace did not know it yet.
 */
export async function recordDefaultBranch(
  models: Models,
  workspaceId: string,
  repoId: string,
  branch: string,
): Promise<void> {
  await changeWorkspace(models, workspaceId, (ws) =>
    ws.repos.some((r) => r.repo_id === repoId && !r.default_branch)
      ? {
          repos: ws.repos.map((r) =>
            r.repo_id === repoId && !r.default_branch ? { ...r, default_branch: branch } : r,
          ),
        }
      : null,
  );
}

/* Linking (docs/api.md, "GitHub App: installations and linking"). */

/** The GitHub App settings linking needs, or a 503 that says what to set. */
function linkingConfig(github: GithubAppConfig | undefined): GithubAppConfig & {
  slug: string;
  clientId: string;
  clientSecret: string;
} {
  const missing = [
    ...(github ? [] : ["APP_ID", "PRIVATE_KEY (or PRIVATE_KEY_PATH)", "WEBHOOK_SECRET"]),
    ...(github?.slug ? [] : ["APP_SLUG"]),
    ...(github?.clientId ? [] : ["GITHUB_CLIENT_ID"]),
    ...(github?.clientSecret ? [] : ["GITHUB_CLIENT_SECRET"]),
  ];
  if (!github || missing.length > 0)
    throw errors.upstream(
      `Linking GitHub installations is not configured on this server: set ${missing.join(", ")}.`,
      503,
    );
  return github as GithubAppConfig & { slug: string; clientId: string; clientSecret: string };
}

export interface LinkStart {
  state: string;
  install_url: string;
  expires_at: string;
}

/**
 * Starts linking for an account: a single-use state (256 random bits, stored as its hash,
 * valid 15 minutes) and the App's installation URL carrying it.
 */
export async function startLink(
  models: Models,
  github: GithubAppConfig | undefined,
  accountId: string,
  now = new Date(),
): Promise<LinkStart> {
  const config = linkingConfig(github);
  const state = randomBytes(32).toString("base64url");
  const expiresAt = new Date(now.getTime() + LINK_STATE_TTL_MS);
  const stored = await claimMarker(models, linkStateMarker(state), {
    account_id: accountId,
    expires_at: expiresAt,
    created_at: now,
    updated_at: now,
  });
  // 32 random bytes do not repeat; were they to, the request fails as the insert's
  // duplicate-key error made it before claimMarker.
  if (!stored) throw new Error("a new link state collided with a stored one");
  const installUrl = new URL(
    `${config.webUrl}/apps/${encodeURIComponent(config.slug)}/installations/new`,
  );
  installUrl.searchParams.set("state", state);
  return { state, install_url: installUrl.toString(), expires_at: expiresAt.toISOString() };
}

function badState(message: string) {
  return errors.validation(
    [{ path: "state", message }],
    `${message} Start again with POST /workspaces/link.`,
  );
}

/**
 * Uses a link state once: unknown, expired or already used states are refused. The
 * unique insert of the "used" marker decides between concurrent uses.
 */
export async function consumeLinkState(
  models: Models,
  state: string,
  now = new Date(),
): Promise<{ accountId: string }> {
  const doc = (await markerFields(models, linkStateMarker(state))) as {
    account_id?: string;
    expires_at?: Date;
  } | null;
  if (!doc?.account_id || !doc.expires_at) throw badState("The link state is not known.");
  if (doc.expires_at.getTime() <= now.getTime())
    throw badState("The link state has expired (states are valid for 15 minutes).");
  const firstUse = await claimMarker(models, linkStateUsedMarker(state), {
    expires_at: doc.expires_at,
    created_at: now,
    updated_at: now,
  });
  if (!firstUse) throw badState("The link state has been used already.");
  return { accountId: doc.account_id };
}

/** The error code of GitHub's OAuth answer (`bad_verification_code`, …), if it sent one. */
function oauthErrorCode(error: unknown): string | undefined {
  const data = (error as { response?: { data?: { error?: unknown } } }).response?.data;
  return typeof data?.error === "string" ? data.error : undefined;
}

/**
 * Exchanges the OAuth code of the setup redirect for a user token (never stored), with
 * Octokit's OAuth methods; on GHES they post to the host of `baseUrl` (GHE_HOST).
 */
async function exchangeCode(
  config: GithubAppConfig & { clientId: string; clientSecret: string },
  code: string,
): Promise<string> {
  const { request } = new Octokit({ baseUrl: config.baseUrl, userAgent: "foreman" });
  let token: string;
  try {
    const { authentication } = await exchangeWebFlowCode({
      clientType: "github-app",
      clientId: config.clientId,
      clientSecret: config.clientSecret,
      code,
      request: request.defaults({ request: { signal: AbortSignal.timeout(GITHUB_TIMEOUT_MS) } }),
    });
    token = authentication.token;
  } catch (error) {
    const oauthError = oauthErrorCode(error);
    const status = (error as { status?: number }).status;
    if (oauthError === "bad_verification_code")
      throw errors.validation(
        [{ path: "code", message: "GitHub does not accept this code (expired or already used)." }],
        "GitHub does not accept the authorization code; install or authorize again from POST /workspaces/link.",
      );
    if (oauthError === "incorrect_client_credentials")
      throw errors.upstream(
        "GitHub rejected the App's OAuth credentials: check GITHUB_CLIENT_ID and GITHUB_CLIENT_SECRET.",
      );
    if (oauthError)
      throw errors.upstream(
        `GitHub refused the authorization code exchange (${oauthError.slice(0, 100)}).`,
      );
    if (status === undefined || status === 500)
      throw errors.upstream("GitHub could not be reached to exchange the authorization code.");
    throw errors.upstream(`GitHub refused the authorization code exchange (HTTP ${status}).`);
  }
  if (typeof token !== "string" || token.length === 0)
    throw errors.upstream("GitHub answered the code exchange without a token.");
  return token;
}

interface UserInstallation {
  id: number;
  account?: InstallationAccount;
  target_id?: number;
  target_type?: string;
  suspended_at?: string | null;
}

/** Finds the installation among those the token's user can access (Octokit's pagination). */
async function findUserInstallation(
  baseUrl: string,
  token: string,
  installationId: number,
): Promise<UserInstallation | null> {
  // The user token goes in as a header (`Bearer`, as GitHub documents), not as Octokit's
  // auth: this client exists for this one listing.
  const octokit = new Octokit({
    baseUrl,
    userAgent: "foreman",
    request: { signal: AbortSignal.timeout(GITHUB_TIMEOUT_MS * 4) },
  });
  const pages = octokit.paginate.iterator(octokit.rest.apps.listInstallationsForAuthenticatedUser, {
    per_page: 100,
    headers: { authorization: `Bearer ${token}` },
  });
  let page = 0;
  try {
    for await (const { data } of pages) {
      const found = data.find((i) => i.id === installationId);
      if (found) return found as UserInstallation;
      if (++page >= MAX_PAGES) break;
    }
  } catch (error) {
    const status = (error as { status?: number }).status;
    if (status === undefined || status === 500)
      throw errors.upstream("GitHub could not be reached to list the user's installations.");
    throw errors.upstream(`GitHub refused to list the user's installations (HTTP ${status}).`);
  }
  return null;
}

/** Every repository the installation can access, with default branches. */
async function listInstallationRepos(
  client: GithubClient,
  installationId: number,
): Promise<GithubRepoInput[]> {
  const octokit = await client.octokit(installationId);
  const repos = await octokit.paginate(octokit.rest.apps.listReposAccessibleToInstallation, {
    per_page: 100,
  });
  return repos.map((r) => ({
    id: r.id,
    name: r.name,
    full_name: r.full_name,
    private: r.private,
    default_branch: r.default_branch,
    clone_url: r.clone_url,
  }));
}

export interface LinkDeps {
  models: Models;
  github: GithubAppConfig | undefined;
  client: GithubClient;
  logger: Logger;
}

export interface LinkResult {
  workspace: WorkspaceRecord;
  /** The row did not exist: the setup redirect arrived before `installation.created`. */
  created: boolean;
}

/**
 * Completes linking from the setup redirect: uses the state once, exchanges the code for a
 * user token, checks that the installation is among the user's (403 otherwise), then links
 * its workspace to the state's account, creating the row from GitHub when no event has
 * yet, and refreshing its repositories from `GET /installation/repositories`.
 */
export async function completeLink(
  deps: LinkDeps,
  input: { installation_id: number; code: string; state: string },
  now = new Date(),
): Promise<LinkResult> {
  const config = linkingConfig(deps.github);
  if (!deps.client.configured)
    throw errors.upstream("The GitHub App is not configured on this server.", 503);
  const { accountId } = await consumeLinkState(deps.models, input.state, now);
  const token = await exchangeCode(config, input.code);
  registerSecret(token);
  let entry: UserInstallation | null;
  try {
    entry = await findUserInstallation(config.baseUrl, token, input.installation_id);
  } finally {
    forgetSecret(token);
  }
  const log = deps.logger.child({ installationId: input.installation_id, accountId });
  if (!entry) {
    log.warn("link refused: the installation is not among the user's");
    throw errors.forbidden(
      `The GitHub user who authorized does not have access to installation ${input.installation_id}.`,
    );
  }
  const info = installationInfo(entry);
  const id = installationWorkspaceId(info.id);

  const existing = await workspacesOf(deps.models).findOne({
    _id: id,
  });
  if (existing?.account_id && existing.account_id !== accountId)
    throw errors.conflict("This installation is already linked to another account.");
  // The first link of an installation is decided by a unique insert (two accounts racing).
  const linkMarker = githubLinkMarker(info.id);
  const claimed = await claimMarker(deps.models, linkMarker, {
    account_id: accountId,
    created_at: now,
    updated_at: now,
  });
  if (!claimed) {
    const marker = await markerFields(deps.models, linkMarker);
    if (marker?.account_id !== accountId && !(existing?.account_id === accountId))
      throw errors.conflict("This installation is already linked to another account.");
  }

  try {
    // A suspended installation gets no tokens: its repositories are refreshed on unsuspend.
    let repos: GithubRepoInput[] | undefined;
    if (!info.suspended_at) {
      try {
        repos = await listInstallationRepos(deps.client, info.id);
      } catch (error) {
        if (!existing)
          throw errors.upstream(
            `GitHub refused to list the repositories of installation ${info.id} (HTTP ${(error as { status?: number }).status ?? "error"}).`,
          );
        log.warn(
          { status: (error as { status?: number }).status },
          "could not refresh the installation's repositories; linking with the known ones",
        );
      }
    }
    let created = false;
    if (!existing)
      created = await insertInstallation(
        deps.models,
        config.webUrl,
        info,
        repos ?? [],
        accountId,
        now,
      );
    if (!created) {
      await changeWorkspace(deps.models, id, (ws) => ({
        account_id: accountId,
        name: info.account_login,
        ...githubFields(ws, info),
        "github.deleted_at": null,
        ...(repos ? { repos: mergeRepos(config.webUrl, ws.repos, repos, "replace") } : {}),
      }));
    }
    const workspace = await linkedWorkspace(deps.models, id);
    log.info({ workspaceId: id, created, repos: workspace.repos.length }, "installation linked");
    return { workspace, created };
  } catch (error) {
    if (claimed) await dropMarker(deps.models, linkMarker).catch(() => undefined);
    throw error;
  }
}
