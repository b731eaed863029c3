import { z } from "zod";
import { route, type AnyRoute } from "../route.js";

/*
 * GET /status: what the operator has configured and what is still missing, for the
 * dashboard's first-run checklist and its warning before a task is created without a model.
 * Names settings, never their values (no key, token or secret).
 */
export const serviceStatus = z
  .object({
    model: z.object({
      configured: z.boolean(),
      provider: z.string().optional(),
      model: z.string().optional(),
    }),
    github_app: z.object({ configured: z.boolean() }),
    public_url: z.object({ configured: z.boolean(), value: z.string().optional() }),
    sandbox: z.object({ engine: z.string(), network: z.string() }),
    missing: z.array(z.object({ setting: z.string(), why: z.string() })),
  })
  .meta({ id: "ServiceStatus" });

export const statusRoutes: AnyRoute[] = [
  route({
    method: "get",
    path: "/status",
    operationId: "getStatus",
    tag: "system",
    summary: "What the service is configured with, and what is missing (extension)",
    description:
      "For a first-run checklist: whether a model, the GitHub App and a public URL are configured, the sandbox in use, and each missing setting with why it matters. Names settings, never their values.",
    auth: "key",
    status: 200,
    response: { description: "The service's configuration status", schema: serviceStatus },
    async handler(_ctx, { deps }) {
      const { llm, github, manifest, sandbox } = deps.config;
      const missing: Array<{ setting: string; why: string }> = [];
      if (!llm.provider)
        missing.push({
          setting: "LLM_API_KEY",
          why: "No model is configured: tasks cannot plan or change code until one is.",
        });
      if (!github)
        missing.push({
          setting: "APP_ID",
          why: "No GitHub App: only plain-git workspaces can be used, and no pull requests are opened on GitHub.",
        });
      if (!manifest.publicUrl)
        missing.push({
          setting: "PUBLIC_URL",
          why: "Without a public URL, GitHub, Slack and other vendors cannot reach this service's webhooks.",
        });
      return {
        model: {
          configured: Boolean(llm.provider),
          ...(llm.provider ? { provider: llm.provider } : {}),
          ...(llm.model ? { model: llm.model } : {}),
        },
        github_app: { configured: Boolean(github) },
        public_url: {
          configured: Boolean(manifest.publicUrl),
          ...(manifest.publicUrl ? { value: manifest.publicUrl } : {}),
        },
        sandbox: { engine: sandbox.engine, network: sandbox.network },
        missing,
      };
    },
  }),
];
