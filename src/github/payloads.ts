import { z } from "zod";
import type { FieldProblem } from "../errors.js";

/*
 * The shape of each delivery the handlers act on (src/github/ci.ts, commands.ts,
 * installations.ts, issues.ts, outcomes.ts, auto-review.ts, follow-ups.ts): only the fields they read, everything else
 * passes. A correctly signed delivery that lacks them (a replayed or hand-made body) is
 * answered 400 before Probot sees it, instead of failing inside a handler with a 500.
 */

const id = z.number().int();
const text = z.string().nullish();
const repository = z.looseObject({
  id,
  full_name: z.string(),
  default_branch: z.string().optional(),
});
const installationRef = z.looseObject({ id }).nullish();
const installation = z.looseObject({
  id,
  account: z
    .looseObject({
      login: text,
      slug: text,
      name: text,
      type: text,
    })
    .nullish(),
  target_id: z.number().nullish(),
  target_type: text,
  suspended_at: text,
});
const pullRequests = z.array(z.looseObject({ number: id })).nullish();
const app = z.looseObject({ slug: text, name: text }).nullish();
const repoEntry = z.looseObject({
  id,
  name: z.string(),
  full_name: z.string(),
  private: z.boolean().optional(),
});

const ciCommon = { repository, installation: installationRef };

/** What the follow-up handlers read of a reviewed pull request (src/github/follow-ups.ts). */
const user = z.looseObject({ login: z.string(), type: text });
const reviewedPullRequest = z.looseObject({
  number: id,
  head: z.looseObject({
    ref: z.string(),
    repo: z.looseObject({ full_name: z.string() }).nullish(),
  }),
});

/** What the automatic review reads of `pull_request.opened` and `.ready_for_review`. */
function readyPullRequest() {
  return z.looseObject({
    repository: repository.extend({ default_branch: z.string() }),
    installation: installationRef,
    pull_request: z.looseObject({
      number: id,
      html_url: z.string(),
      draft: z.boolean().nullish(),
      state: z.string(),
      head: z.looseObject({ ref: z.string(), sha: z.string() }),
      user: z.looseObject({ login: z.string() }).nullish(),
    }),
  });
}

const SHAPES: Record<string, z.ZodType> = {
  "check_run.completed": z.looseObject({
    ...ciCommon,
    check_run: z.looseObject({
      id,
      name: z.string(),
      conclusion: text,
      head_sha: z.string(),
      details_url: text,
      html_url: text,
      output: z.looseObject({ title: text, summary: text, text }).nullish(),
      check_suite: z.looseObject({ id: id.nullish(), head_branch: text }).nullish(),
      app,
      pull_requests: pullRequests,
    }),
  }),
  "check_suite.completed": z.looseObject({
    ...ciCommon,
    check_suite: z.looseObject({
      id,
      conclusion: text,
      head_branch: text,
      head_sha: z.string(),
      url: text,
      app,
      pull_requests: pullRequests,
    }),
  }),
  "workflow_run.completed": z.looseObject({
    ...ciCommon,
    workflow: z.looseObject({ name: text }).nullish(),
    workflow_run: z.looseObject({
      id,
      name: text,
      conclusion: text,
      head_branch: text,
      head_sha: z.string(),
      head_repository: z.looseObject({ full_name: z.string() }).nullish(),
      html_url: z.string(),
      display_title: text,
      run_attempt: id.nullish(),
      check_suite_id: id.nullish(),
      workflow_id: id,
      pull_requests: pullRequests,
    }),
  }),
  "issue_comment.created": z.looseObject({
    repository,
    installation: installationRef,
    comment: z.looseObject({
      id,
      body: text,
      html_url: z.string(),
      user: z.looseObject({ login: z.string(), type: text }).nullish(),
    }),
    issue: z.looseObject({ number: id, title: z.string(), body: text }),
  }),
  "issues.labeled": z.looseObject({
    repository,
    installation: installationRef,
    issue: z.looseObject({ number: id, title: z.string(), body: text, html_url: z.string() }),
    label: z.looseObject({ name: z.string() }).nullish(),
    sender: z.looseObject({ login: z.string(), type: text }),
  }),
  "pull_request.closed": z.looseObject({
    // Not read by the handler, but GitHub always sends it with a pull_request event.
    repository,
    pull_request: z.looseObject({
      html_url: z.string(),
      head: z.looseObject({ ref: z.string() }),
      merged: z.boolean().nullish(),
      closed_at: text,
      merged_at: text,
    }),
  }),
  "pull_request_review.submitted": z.looseObject({
    repository,
    installation: installationRef,
    sender: user.nullish(),
    review: z.looseObject({ id, state: z.string(), body: text, user }),
    pull_request: reviewedPullRequest,
  }),
  "pull_request_review_comment.created": z.looseObject({
    repository,
    installation: installationRef,
    sender: user.nullish(),
    comment: z.looseObject({
      id,
      body: text,
      html_url: z.string(),
      path: z.string(),
      line: z.number().int().nullish(),
      diff_hunk: text,
      pull_request_review_id: id.nullish(),
      user,
    }),
    pull_request: reviewedPullRequest,
  }),
  "pull_request.opened": readyPullRequest(),
  "pull_request.ready_for_review": readyPullRequest(),
  "installation.created": z.looseObject({
    installation,
    repositories: z.array(repoEntry).nullish(),
  }),
  "installation.new_permissions_accepted": z.looseObject({
    installation,
    repositories: z.array(repoEntry).nullish(),
  }),
  "installation.deleted": z.looseObject({ installation }),
  "installation.suspend": z.looseObject({ installation }),
  "installation.unsuspend": z.looseObject({ installation }),
  "installation_repositories.added": z.looseObject({
    installation,
    repositories_added: z.array(repoEntry),
  }),
  "installation_repositories.removed": z.looseObject({
    installation,
    repositories_removed: z.array(z.looseObject({ id })),
  }),
};

/** The `event.action` names a handler acts on. */
export const HANDLED_EVENTS = Object.keys(SHAPES);

/** What is wrong with a delivery's payload for its event, or an empty list. */
export function payloadProblems(name: string, payload: unknown): FieldProblem[] {
  if (payload === null || typeof payload !== "object" || Array.isArray(payload))
    return [{ path: "body", message: "A GitHub delivery's body must be a JSON object." }];
  const action = (payload as { action?: unknown }).action;
  if (action !== undefined && typeof action !== "string")
    return [{ path: "body.action", message: "must be a string" }];
  const shape = SHAPES[action ? `${name}.${action}` : name];
  if (!shape) return [];
  const result = shape.safeParse(payload);
  if (result.success) return [];
  return result.error.issues.slice(0, 20).map((issue) => ({
    path: ["body", ...issue.path.map(String)].join("."),
    message: issue.message,
  }));
}
