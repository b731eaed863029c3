import { z } from "zod";
import { label, opaqueId, timestamp } from "../../schemas.js";

/** A git remote: an absolute path, file://, http(s)://, ssh:// or scp-style user@host:path. */
export const cloneUrl = z
  .string()
  .trim()
  .min(1)
  .max(2000)
  .refine((v) => !v.startsWith("-"), "must not start with '-'")
  .refine(
    (v) =>
      v.startsWith("/") ||
      /^(file|https?|ssh|git):\/\//i.test(v) ||
      /^[\w.-]+@[\w.-]+:[^\s]+$/.test(v),
    "must be an absolute path, or a file://, http(s)://, ssh:// or user@host:path remote",
  );

export const repoName = z
  .string()
  .trim()
  .min(1)
  .max(200)
  .regex(
    /^[A-Za-z0-9._-]+(\/[A-Za-z0-9._-]+)?$/,
    "use name or owner/name with letters, digits, '.', '_' and '-'",
  );

export const branchName = z
  .string()
  .trim()
  .min(1)
  .max(255)
  .refine(
    (v) => !v.startsWith("-") && !v.includes("..") && !/[\s~^:?*[\\]/.test(v),
    "is not a valid branch name",
  );

export const createWorkspaceBody = z.strictObject({
  name: label(100),
  repos: z
    .array(
      z.strictObject({
        name: repoName,
        clone_url: cloneUrl,
        default_branch: branchName.optional(),
      }),
    )
    .min(1)
    .max(100),
});

export const workspace = z
  .object({
    id: z.string(),
    kind: z.enum(["git", "github"]),
    name: z.string(),
    repo_count: z.number().int(),
    github: z
      .object({
        installation_id: z.number().int(),
        account_login: z.string().nullable(),
        suspended: z.boolean(),
      })
      .nullable(),
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: "Workspace" });

export const repository = z
  .object({
    id: z.string().describe("repo_id: GitHub's numeric id for GitHub repositories"),
    name: z.string(),
    full_name: z.string(),
    clone_url: z.string().describe("credentials in the URL are shown redacted"),
    default_branch: z
      .string()
      .nullable()
      .describe(
        "null for a GitHub repository whose default branch is not known yet (installation events do not carry it); tasks then clone the remote's HEAD",
      ),
    private: z.boolean(),
  })
  .meta({ id: "Repository" });

export const workspaceWithRepos = workspace
  .extend({ repos: z.array(repository) })
  .meta({ id: "WorkspaceWithRepos" });

export const workspaceParams = z.strictObject({ id: opaqueId });

export const linkStart = z
  .object({
    state: z
      .string()
      .describe("single-use, valid 15 minutes; GitHub hands it back to /github/setup"),
    install_url: z.string().describe("where the user installs the App (or picks an installation)"),
    expires_at: timestamp,
  })
  .meta({ id: "LinkStart" });
