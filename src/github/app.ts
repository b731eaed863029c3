import { Probot, ProbotOctokit } from "probot";
import type { GithubAppConfig } from "../config/env.js";
import type { Logger } from "../util/logger.js";

/**
 * Builds the Probot instance for the configured GitHub App (github.com or GHES through
 * `baseUrl`). Event handlers are registered by `registerHandlers`; they must enqueue work and
 * return, because GitHub waits for the answer.
 */
export function createProbot(
  config: GithubAppConfig,
  logger: Logger,
  options: { testing?: boolean } = {},
): Probot {
  const Octokit = options.testing
    ? ProbotOctokit.defaults({ retry: { enabled: false }, throttle: { enabled: false } })
    : ProbotOctokit;
  return new Probot({
    appId: config.appId,
    privateKey: config.privateKey,
    secret: config.webhookSecret,
    baseUrl: config.baseUrl,
    log: logger.child({ component: "github" }),
    Octokit,
  });
}
