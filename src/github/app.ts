import { Probot, ProbotOctokit } from "probot";
import type { GithubAppConfig } from "../config/env.js";
import type { Logger } from "../util/logger.js";
import { registerSecret } from "../util/redact.js";

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

/**
 * An HTTPS clone URL for a repository of an installation, carrying a fresh installation
 * token (valid one hour). The token is registered for redaction before it is used.
 */
export async function installationCloneUrl(
  probot: Probot,
  installationId: number,
  cloneUrl: string,
): Promise<string> {
  const octokit = await probot.auth(installationId);
  const { token } = (await octokit.auth({ type: "installation" })) as { token: string };
  registerSecret(token);
  const url = new URL(cloneUrl);
  url.username = "x-access-token";
  url.password = token;
  return url.toString();
}
