import type { Config } from "./env.js";

/*
 * What an operator has configured and what is still missing (issue 31, "an operator's first
 * hour"): logged once at start (service.ts) and answered by the keyed GET /status
 * (http/routes/status/routes.ts) for the dashboard. Names settings, never their values,
 * except the public URL, which is not a secret.
 */

export interface MissingSetting {
  /** The variable(s) to set, e.g. "APP_ID, PRIVATE_KEY, WEBHOOK_SECRET". */
  setting: string;
  /** What does not work without it. */
  why: string;
}

export interface ServiceStatus {
  model: { configured: boolean; provider?: string; model?: string };
  github_app: { configured: boolean; app_id?: string; slug?: string };
  public_url: { configured: boolean; value?: string };
  sandbox: { engine: "bwrap" | "none"; network: "none" | "public" };
  /** Open sign-up (OPEN_SIGNUP; unset: on only when HOST is loopback) and why. */
  signup: { open: boolean; why: string };
  missing: MissingSetting[];
}

/** The configured model as the model client sees it (llm/provider.ts). */
export interface ModelState {
  configured: boolean;
  provider?: string | undefined;
  modelId?: string | undefined;
}

export function serviceStatus(config: Config, model: ModelState): ServiceStatus {
  const missing: MissingSetting[] = [];
  if (!model.configured)
    missing.push({
      setting: config.llm.provider
        ? config.llm.provider === "openai-compatible"
          ? "LLM_BASE_URL"
          : "LLM_API_KEY"
        : "LLM_API_KEY (or ANTHROPIC_API_KEY, OPENAI_API_KEY; LLM_PROVIDER and LLM_BASE_URL for an OpenAI-compatible server)",
      why: "no model: tasks fail at planning, reviews and the spec planner answer 503",
    });
  if (!config.github)
    missing.push({
      setting: "APP_ID, PRIVATE_KEY (or PRIVATE_KEY_PATH), WEBHOOK_SECRET",
      why: "no GitHub App: GitHub workspaces, webhooks, labels, comment commands and pull requests are off (plain git workspaces work); GET /github/register creates the App",
    });
  if (!config.manifest.publicUrl)
    missing.push({
      setting: "PUBLIC_URL",
      why: "no public base URL: the App registration and the Slack install use the request's origin, and progress check runs link to no dashboard",
    });
  if (config.sandbox.engine === "none")
    missing.push({
      setting: "SANDBOX",
      why: "SANDBOX=none: repository commands run uncontained with the service's rights; install bubblewrap and unset it",
    });
  else if (config.sandbox.network === "none")
    missing.push({
      setting: "SANDBOX_NETWORK",
      why: "SANDBOX_NETWORK=none: repository commands have no network, so installs from package registries (npm ci, pip install) fail; set public to allow public hosts",
    });
  return {
    model: {
      configured: model.configured,
      ...(model.provider ? { provider: model.provider } : {}),
      ...(model.modelId ? { model: model.modelId } : {}),
    },
    github_app: {
      configured: Boolean(config.github),
      ...(config.github ? { app_id: config.github.appId } : {}),
      ...(config.github?.slug ? { slug: config.github.slug } : {}),
    },
    public_url: {
      configured: Boolean(config.manifest.publicUrl),
      ...(config.manifest.publicUrl ? { value: config.manifest.publicUrl } : {}),
    },
    sandbox: { engine: config.sandbox.engine, network: config.sandbox.network },
    signup: { open: config.openSignup, why: config.openSignupWhy },
    missing,
  };
}

/** One line for the start log: what is configured, then each missing setting. */
export function statusLine(status: ServiceStatus): string {
  const model = status.model.configured
    ? `model ${status.model.provider}/${status.model.model}`
    : "model MISSING";
  const parts = [
    model,
    `GitHub App ${status.github_app.configured ? `configured (${status.github_app.app_id})` : "MISSING"}`,
    `public URL ${status.public_url.value ?? "MISSING"}`,
    `sandbox ${status.sandbox.engine}, network ${status.sandbox.network}`,
    `open sign-up ${status.signup.open ? "on" : "off"} (${status.signup.why})`,
  ];
  return `configuration: ${parts.join("; ")}`;
}
