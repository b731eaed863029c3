import { z } from "zod";
import { isLoopbackHost } from "../../../config/env.js";
import { serviceStatus } from "../../../config/status.js";
import { route } from "../../route.js";

/** GET /status: what the operator configured and what is missing (config/status.ts). */
export const serviceStatusSchema = z
  .object({
    model: z.object({
      configured: z.boolean(),
      provider: z.string().optional().describe("anthropic, openai or openai-compatible"),
      model: z.string().optional().describe("the model id in use (configured or the default)"),
    }),
    github_app: z.object({
      configured: z.boolean(),
      app_id: z.string().optional(),
      slug: z.string().optional(),
    }),
    public_url: z.object({
      configured: z.boolean(),
      value: z.string().optional().describe("PUBLIC_URL"),
    }),
    sandbox: z.object({
      engine: z.enum(["bwrap", "none"]).describe("SANDBOX"),
      network: z.enum(["none", "public"]).describe("SANDBOX_NETWORK"),
    }),
    signup: z
      .object({
        open: z.boolean().describe("POST /keys/generate without a key makes an account"),
        why: z
          .string()
          .describe(
            "OPEN_SIGNUP=true/false when set; unset, whether HOST is loopback (open) or not (closed)",
          ),
      })
      .describe("open sign-up (OPEN_SIGNUP)"),
    missing: z
      .array(
        z.object({
          setting: z.string().describe("the variable(s) to set"),
          why: z.string().describe("what does not work without it"),
        }),
      )
      .describe("empty when everything is configured"),
    viewer: z
      .object({
        operator: z
          .boolean()
          .describe(
            "the request came from a loopback address (after TRUST_PROXY hops): the person at the machine that runs the service",
          ),
      })
      .describe(
        "who asks (extension): the dashboard shows the operator's settings only to the operator; until roles exist, the operator is whoever reaches the service from its own machine",
      ),
  })
  .meta({ id: "ServiceStatus" });

export const statusRoutes = [
  route({
    method: "get",
    path: "/status",
    operationId: "getStatus",
    tag: "system",
    summary: "What is configured and what is missing",
    description:
      "The same summary the service logs at start: the model, the GitHub App, the public URL, the sandbox and open sign-up, and each missing setting with the variable to set and what does not work without it. Never a secret's value. GET /readyz stays about the database.",
    auth: "key",
    status: 200,
    response: { description: "The configuration summary", schema: serviceStatusSchema },
    async handler(ctx, { deps }) {
      const model = deps.modelClient;
      return {
        ...serviceStatus(deps.config, {
          configured: model?.configured ?? false,
          provider: model?.configured ? model.provider : undefined,
          modelId: model?.configured ? model.modelId : undefined,
        }),
        // Until roles (issue 45), the operator is whoever reaches the service from its own
        // machine: the one who can read its log and set its environment.
        viewer: { operator: isLoopbackHost(ctx.ip) },
      };
    },
  }),
];
