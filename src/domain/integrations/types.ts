import { z } from "zod";

/** The chat and issue-tracker integrations an account can add (one module each). */
export const INTEGRATION_TYPES = ["slack", "linear", "jira"] as const;
export type IntegrationType = (typeof INTEGRATION_TYPES)[number];

/** A repository of the account: where a source's tasks run. */
export const repoTarget = z.strictObject({
  workspace_id: z.string().min(1).max(100),
  repo_id: z.string().min(1).max(200),
});
export type RepoTarget = z.infer<typeof repoTarget>;

/** What each integration type declares: its settings, its write-only secrets. */
export interface IntegrationKind<S extends z.ZodType, K extends z.ZodType> {
  type: IntegrationType;
  settings: S;
  secrets: K;
}

/** Where a task created by an integration reports back. */
export interface TaskSource {
  integration_id: string;
  type: IntegrationType;
  /** Slack: channel and thread; Linear/Jira: the issue. */
  ref: Record<string, string>;
}
