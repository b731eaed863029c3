import type { Probot } from "probot";
import type { GithubAppConfig } from "../config/env.js";
import { installationCloneUrl } from "./app.js";

/** An installation-authenticated Octokit (Probot's, with REST methods under `.rest`). */
export type InstallationOctokit = Awaited<ReturnType<Probot["auth"]>>;

/**
 * What the pipeline and the API need from the GitHub App: installation clients, clone URLs
 * with a fresh token, and where github.com (or the Enterprise server) lives. Always present:
 * without an App it is `noGithubClient`, which says so (`configured: false`) and refuses
 * every call with the settings to set.
 */
export interface GithubClient {
  /** The App is configured (APP_ID, PRIVATE_KEY, WEBHOOK_SECRET): installation calls can work. */
  readonly configured: boolean;
  /** Web base URL (https://github.com or the GHES host), for recognising pull-request URLs. */
  readonly webUrl: string;
  octokit(installationId: number): Promise<InstallationOctokit>;
  cloneUrl(installationId: number, cloneUrl: string): Promise<string>;
}

export function createGithubClient(probot: Probot, config: GithubAppConfig): GithubClient {
  return Object.freeze({
    configured: true,
    webUrl: config.webUrl,
    octokit: (installationId: number) => probot.auth(installationId),
    cloneUrl: (installationId: number, cloneUrl: string) =>
      installationCloneUrl(probot, installationId, cloneUrl),
  });
}

/** What every call of `noGithubClient` throws. */
export class GithubAppNotConfiguredError extends Error {
  override name = "GithubAppNotConfiguredError";
  constructor(installationId: number) {
    super(
      `The GitHub App is not configured on this server, so installation ${installationId} cannot be used: set APP_ID, PRIVATE_KEY (or PRIVATE_KEY_PATH) and WEBHOOK_SECRET.`,
    );
  }
}

/**
 * The client of a server without a GitHub App: plain-git workspaces need none. Callers ask
 * `configured` first and answer in their own words; a call that gets here anyway refuses.
 */
export const noGithubClient: GithubClient = Object.freeze({
  configured: false,
  // Without an App there is no Enterprise host configured for it: github.com's URLs.
  webUrl: "https://github.com",
  octokit(installationId: number): Promise<InstallationOctokit> {
    return Promise.reject(new GithubAppNotConfiguredError(installationId));
  },
  cloneUrl(installationId: number): Promise<string> {
    return Promise.reject(new GithubAppNotConfiguredError(installationId));
  },
});
