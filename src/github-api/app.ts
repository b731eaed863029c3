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
  // Tests turn off retries and the write throttle (GitHub's advice of seconds between
  // comments: a file of GitHub conversations waited 3 s per comment). Merged into what Probot
  // passes, which carries throttle options of its own: set before them, they were lost.
  const Octokit = ProbotOctokit.defaults((instance: OctokitOptions) => ({
    ...instance,
    ...(options.testing
      ? {
          retry: { ...(instance.retry as object | undefined), enabled: false },
          throttle: { ...(instance.throttle as object | undefined), enabled: false },
        }
      : {}),
    auth: authOnHost(instance.auth, config.baseUrl),
  }));
  return new Probot({
    appId: config.appId,
    privateKey: config.privateKey,
    secret: config.webhookSecret,
    baseUrl: config.baseUrl,
    log: logger.child({ component: "github" }),
    Octokit,
  });
}

type OctokitOptions = { auth?: Record<string, unknown> } & Record<string, unknown>;
type RequestWithDefaults = { defaults(options: { baseUrl: string }): unknown };

/*
 * Probot hands its App authentication a `request` without the Enterprise `baseUrl`
 * (node_modules/probot/lib/octokit/get-probot-octokit-with-defaults.js). An API call still
 * reaches the right host, because @octokit/auth-app fetches the token through the calling
 * request; but asking for the token directly (`octokit.auth({ type: "installation" })`,
 * what clone and push do) went to api.github.com. In a process that had made no API call
 * yet (the first clone after a restart) every GitHub task failed there. Every token request
 * now goes to the configured host.
 */
function authOnHost(
  auth: Record<string, unknown> | undefined,
  baseUrl: string,
): Record<string, unknown> | undefined {
  const request = auth?.request as RequestWithDefaults | undefined;
  if (!auth || typeof request?.defaults !== "function") return auth;
  return { ...auth, request: request.defaults({ baseUrl }) };
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
