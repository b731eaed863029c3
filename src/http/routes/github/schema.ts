import { z } from "zod";

/**
 * The query GitHub sends to the setup (callback) URL. Not strict: GitHub may add parameters
 * of its own, and a browser landing here should not fail on them.
 */
export const setupQuery = z
  .object({
    installation_id: z
      .string()
      .regex(/^[1-9][0-9]{0,15}$/, "must be a GitHub installation id")
      .optional()
      .describe("the installation GitHub says was installed or updated"),
    setup_action: z
      .enum(["install", "update", "request"])
      .optional()
      .describe("`request`: an organization owner still has to approve the installation"),
    code: z
      .string()
      .min(1)
      .max(512)
      .optional()
      .describe("OAuth code for a user token (the App requests OAuth on install)"),
    state: z.string().min(1).max(512).optional().describe("the state of POST /workspaces/link"),
  })
  .superRefine((query, ctx) => {
    if (query.setup_action === "request") return;
    // "Redirect on update" without a linking in progress: nothing to link.
    if (query.setup_action === "update" && query.state === undefined && query.code === undefined)
      return;
    for (const field of ["installation_id", "code", "state"] as const) {
      if (query[field] === undefined)
        ctx.addIssue({
          code: "custom",
          path: [field],
          message:
            field === "state"
              ? "is required: start linking with POST /workspaces/link and install from its install_url"
              : field === "code"
                ? "is required: the App must request user authorization (OAuth) during installation"
                : "is required",
        });
    }
  });

export const setupResult = z
  .object({
    linked: z.boolean(),
    message: z.string(),
    workspace_id: z.string().nullable(),
    installation_id: z.number().int().nullable(),
    account_login: z.string().nullable(),
    repo_count: z.number().int().nullable(),
    suspended: z.boolean().nullable(),
  })
  .meta({ id: "GithubSetupResult" });

export type SetupResult = z.infer<typeof setupResult>;
