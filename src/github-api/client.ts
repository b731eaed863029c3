import type { Probot } from "probot";
import type { GithubAppConfig } from "../config/env.js";
import { installationCloneUrl } from "./app.js";

/** An installation-authenticated Octokit (Probot's, with REST methods under `.rest`). */
export type InstallationOctokit = Awaited<ReturnType<Probot["auth"]>>;

/**
 * What the pipeline and the API need from the GitHub App: installation clients, clone URLs
 * with a fresh token, and where github.com (or the Enterprise server) lives. Absent when
 * the App is not configured.
 */
export interface GithubClient {
  /** Web base URL (https://github.com or the GHES host), for recognising pull-request URLs. */
  webUrl: string;
  octokit(installationId: number): Promise<InstallationOctokit>;
  cloneUrl(installationId: number, cloneUrl: string): Promise<string>;
}

export function createGithubClient(probot: Probot, config: GithubAppConfig): GithubClient {
  return {
    webUrl: config.webUrl,
    octokit: (installationId) => probot.auth(installationId),
    cloneUrl: (installationId, cloneUrl) => installationCloneUrl(probot, installationId, cloneUrl),
  };
}
