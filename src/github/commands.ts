import { z } from "zod";
import type { TaskRecord } from "../db/models.js";
import { agentTaskDescription, BUILTIN_AGENTS, findAgent } from "../domain/agents/agents.js";
import {
  askAboutPullRequest,
  describePullRequest,
  improvePullRequest,
} from "../domain/pull-requests/help.js";
import { reviewPullRequest, type PrReviewDeps } from "../domain/pull-requests/review.js";
import { claimMarker, markerKind } from "../durable/markers.js";
import { createTask } from "../domain/tasks/create.js";
import { decide, type Decision } from "../domain/tasks/gates.js";
import { pullRequestTasks, threadTasks as tasksOfThread } from "../domain/tasks/store.js";
import { isAppError } from "../errors.js";
import type { JobKind } from "../queue/scheduler.js";
import type { Logger } from "../util/logger.js";
import type { InstallationOctokit } from "../github-api/client.js";
import { helpText, parseCommand, type Command, type CommandName } from "./command-parser.js";
import { queueForDelivery } from "./delivery.js";
import type { GithubHandlerDeps, HandlerGroup } from "./deps.js";
import { sanitizeUntrusted } from "../text/sanitize.js";
import { actOnFeedback, feedbackText, mentionsApp, queueMention } from "./follow-ups.js";
import {
  APP_MARKER,
  writtenByApp,
  hasWriteAccess,
  howToLink,
  ownerAndRepo,
  reply,
  usableWorkspace,
  workspaceOfInstallation,
  type Thread,
} from "./threads.js";

/** A comment command, carried out once. */
export const githubCommandMarker = markerKind(
  "gh-command",
  "github-command",
  (commentId: number) => [commentId],
);

/*
 * Comment commands (docs/api.md, "Comment commands"). The webhook handler only recognises a
 * command and queues an acknowledgement job; that job checks the author's write access through
 * the API, reacts with 👀 and only then queues the command job, which does the work through the
 * same domain functions as the API. Acknowledging is its own job kind with its own concurrency,
 * so a burst of commands is acknowledged within seconds instead of each reaction waiting behind
 * the work of the commands before it (and behind their writes in Probot's per-installation
 * write throttle: the reactions enter it first).
 */

const MAX_BODY = 65_536;

const commandJobSchema = z.strictObject({
  installation_id: z.number().int(),
  repo_id: z.string(),
  repo_full_name: z.string(),
  number: z.number().int(),
  is_pull_request: z.boolean(),
  comment_id: z.number().int(),
  comment_url: z.string(),
  author: z.string(),
  body: z.string().max(MAX_BODY),
  issue_title: z.string(),
  issue_body: z.string().max(MAX_BODY),
  /** Set by the acknowledgement job: write access checked and 👀 posted. Jobs queued
   * before acknowledging was split off lack it and acknowledge themselves. */
  acknowledged: z.literal(true).optional(),
});
export type CommandJob = z.infer<typeof commandJobSchema>;

export const COMMAND_JOB = { name: "github.command", schema: commandJobSchema };
export const ACK_JOB = { name: "github.command-ack", schema: commandJobSchema };
/** Acknowledging is a permission read and one reaction: many may run at once. */
const ACK_CONCURRENCY = 8;

/**
 * `issue_comment.created`: a command is queued for acknowledgement; on a pull request, a
 * comment that mentions the App is queued as feedback (follow-ups.ts); anything else, and
 * anything a bot or the App wrote, is ignored.
 */
export const commandHandlers: HandlerGroup = (probot, deps) => {
  probot.on("issue_comment.created", async (context) => {
    const { comment, issue, repository, installation } = context.payload;
    if (!installation || writtenByApp(comment.user, comment.body, deps.github.slug)) return;
    if (!parseCommand(comment.body ?? "", deps.github.slug)) {
      if (issue.pull_request && mentionsApp(comment.body ?? "", deps.github.slug))
        await queueMention(deps, {
          installation_id: installation.id,
          repo_id: String(repository.id),
          repo_full_name: repository.full_name,
          pr_number: issue.number,
          comment_id: comment.id,
          comment_url: comment.html_url,
          author: comment.user!.login,
          body: (comment.body ?? "").slice(0, MAX_BODY),
        });
      return;
    }
    await queueForDelivery(
      deps.scheduler,
      ACK_JOB,
      {
        installation_id: installation.id,
        repo_id: String(repository.id),
        repo_full_name: repository.full_name,
        number: issue.number,
        is_pull_request: Boolean(issue.pull_request),
        comment_id: comment.id,
        comment_url: comment.html_url,
        author: comment.user!.login,
        body: (comment.body ?? "").slice(0, MAX_BODY),
        issue_title: issue.title.slice(0, 1000),
        issue_body: (issue.body ?? "").slice(0, MAX_BODY),
      },
      { "data.comment_id": comment.id },
    );
  });
};

/** The thread's tasks of an account, newest first. */
async function threadTasks(
  deps: GithubHandlerDeps,
  accountId: string,
  job: Pick<CommandJob, "repo_id" | "number">,
): Promise<TaskRecord[]> {
  return tasksOfThread(deps.models, accountId, job.repo_id, job.number);
}

/**
 * Checks the author's write access and reacts with 👀. `false`: no write access, the command
 * is ignored. A failed reaction is logged and does not stop the command.
 */
async function acknowledge(
  octokit: InstallationOctokit,
  job: CommandJob,
  log: Logger,
): Promise<boolean> {
  if (!(await hasWriteAccess(octokit, job.repo_full_name, job.author))) {
    log.info({ author: job.author }, "command ignored: the author has no write access");
    return false;
  }
  try {
    await octokit.rest.reactions.createForIssueComment({
      ...ownerAndRepo(job.repo_full_name),
      comment_id: job.comment_id,
      content: "eyes",
    });
  } catch (error) {
    log.warn({ err: error }, "could not react to the command; carrying it out anyway");
  }
  return true;
}

/**
 * The job that acknowledges a comment command and then queues it. Running it twice (a lock
 * lost to a crash) posts the same reaction again, which GitHub keeps once, and queues the
 * command once (unique by comment).
 */
export function commandAckJob(deps: GithubHandlerDeps): JobKind<CommandJob> {
  const logger = deps.logger.child({ component: "github-commands" });
  return {
    ...ACK_JOB,
    concurrency: ACK_CONCURRENCY,
    async run(job) {
      const command = parseCommand(job.body, deps.github.slug);
      if (!command) return;
      const log = logger.child({
        command: command.name,
        repo: job.repo_full_name,
        number: job.number,
      });
      const octokit = await deps.client.octokit(job.installation_id);
      if (!(await acknowledge(octokit, job, log))) return;
      await deps.scheduler.enqueue(
        COMMAND_JOB,
        { ...job, acknowledged: true },
        { unique: { "data.comment_id": job.comment_id } },
      );
    },
  };
}

/** The job that carries out a comment command. */
export function commandJob(deps: GithubHandlerDeps): JobKind<CommandJob> {
  const logger = deps.logger.child({ component: "github-commands" });
  return {
    ...COMMAND_JOB,
    async run(job) {
      // Agenda's lock is not atomic on every backend: the comment is acted on once.
      if (!(await claimMarker(deps.models, githubCommandMarker(job.comment_id)))) return;
      const command = parseCommand(job.body, deps.github.slug);
      if (!command) return;
      const log = logger.child({
        command: command.name,
        repo: job.repo_full_name,
        number: job.number,
      });
      const octokit = await deps.client.octokit(job.installation_id);
      if (!job.acknowledged && !(await acknowledge(octokit, job, log))) return;
      const thread: Thread = {
        installation_id: job.installation_id,
        repo_full_name: job.repo_full_name,
        number: job.number,
        is_pull_request: job.is_pull_request,
      };
      try {
        const answer = await carryOut({ deps, octokit, job, thread, command });
        if (answer) await reply(octokit, thread, answer);
        log.info("command carried out");
      } catch (error) {
        if (isAppError(error) && error.status < 500) {
          await reply(octokit, thread, `Could not ${command.name}: ${error.message}`);
          return;
        }
        log.error({ err: error }, "command failed");
        await reply(
          octokit,
          thread,
          `Could not ${command.name}: the service hit an error (${isAppError(error) ? error.message : "see its logs"}). Try again later.`,
        ).catch(() => undefined);
      }
    },
  };
}

/** What every command's handler gets. */
export interface CommandContext {
  deps: GithubHandlerDeps;
  octokit: InstallationOctokit;
  job: CommandJob;
  thread: Thread;
  command: Command;
}

/** What a command that acts on the account gets: its installation is linked and usable. */
export interface LinkedContext extends CommandContext {
  accountId: string;
  /** Who decided, for the task's event log. */
  who: string;
  /** The fields of a task started from this thread. */
  base: {
    workspace_id: string;
    repo_id: string;
    source: "github";
    origin: { kind: "comment"; author: string; comment_url: string };
    thread: Thread;
  };
}

/** The reply to post, if any. */
type Reply = Promise<string | null>;

/**
 * One command's handler. `linked: true` handlers run only for an installation linked to an
 * account and usable; others are answered how to link (or that it is suspended) first.
 */
export type CommandHandler =
  | { linked: false; run: (ctx: CommandContext) => Reply }
  | { linked: true; run: (ctx: LinkedContext) => Reply };

/**
 * Every command the parser knows, with its handler. Keyed by the parser's `CommandName`: a
 * name added to COMMAND_NAMES without a handler here, or a handler for a name the parser
 * does not know, does not compile (test/unit/github-command-registry.test.ts).
 */
export type CommandRegistry = { readonly [N in CommandName]: CommandHandler };

const linked = (run: (ctx: LinkedContext) => Reply): CommandHandler => ({ linked: true, run });

/** The reply to `/approve`, `/reject`, `/approve-diff` and `/reject-diff`. */
const DECISIONS: Record<Decision, { waiting: string; done: string }> = {
  approve: {
    waiting: "awaiting_approval",
    done: "Plan approved; implementing it now. The change will be posted here for approval.",
  },
  reject: {
    waiting: "awaiting_approval",
    done: "Plan rejected; the task is cancelled.",
  },
  "approve-diff": {
    waiting: "awaiting_diff_approval",
    done: "Change approved; pushing the branch and opening the pull request.",
  },
  "reject-diff": {
    waiting: "awaiting_diff_approval",
    done: "Change rejected; the task is cancelled and nothing was pushed.",
  },
};

/** A gate command: decides for the thread's task that waits at that gate. */
function decision(name: Decision): CommandHandler {
  const entry = DECISIONS[name];
  return linked(async ({ deps, job, accountId, who }) => {
    const tasks = await threadTasks(deps, accountId, job);
    const waiting = tasks.find((t) => t.status === entry.waiting);
    if (!waiting) {
      const latest = tasks[0];
      return latest
        ? `No task of this thread is waiting for ${entry.waiting === "awaiting_approval" ? "plan" : "diff"} approval. Latest: ${statusText(latest)}`
        : "No task has been started from this thread yet. `/task <text>` starts one.";
    }
    await decide(deps.tasks, accountId, waiting._id, name, who);
    return `Task \`${waiting._id}\`: ${entry.done}`;
  });
}

export const COMMANDS: CommandRegistry = {
  task: linked(async (ctx) => {
    const text = sanitizeUntrusted(ctx.command.text);
    if (!text) return "Say what to do: `/task <what to change>`.";
    // On a pull request a task opened, `/task` follows that task up on the same branch.
    if (ctx.job.is_pull_request) {
      const followed = await followUpFromCommand(ctx, text);
      if (followed) return followed;
    }
    return startThreadTask(ctx, text);
  }),
  agent: linked(async (ctx) => {
    const text = sanitizeUntrusted(ctx.command.text);
    const [name = "", ...rest] = text.split(/\s+/);
    const agent = findAgent(name);
    if (!agent)
      return `${name ? `There is no agent named \`${name}\`.` : "Name an agent: `/agent <name> [details]`."} Agents: ${BUILTIN_AGENTS.map((a) => `\`${a.name}\``).join(", ")}.`;
    return startThreadTask(ctx, agentTaskDescription(agent, rest.join(" ")), agent.name);
  }),
  review: linked(async ({ deps, job, accountId }) => {
    if (!job.is_pull_request) return onlyOnPullRequests("review");
    const review = await reviewPullRequest(prDeps(deps), accountId, {
      pr_url: pullUrl(deps, job),
      post: true,
    });
    return review.posted ? null : `Review: ${review.verdict.replace("_", " ")}. ${review.summary}`;
  }),
  describe: linked(async ({ deps, job, accountId }) => {
    if (!job.is_pull_request) return onlyOnPullRequests("describe");
    const described = await describePullRequest(prDeps(deps), accountId, {
      pr_url: pullUrl(deps, job),
    });
    return `Updated this pull request's title and description from its diff: **${described.title.replace(/[*_`]/g, "\\$&")}**.`;
  }),
  ask: linked(async ({ deps, job, accountId, command }) => {
    if (!job.is_pull_request) return onlyOnPullRequests("ask");
    const question = sanitizeUntrusted(command.text);
    if (!question) return "Ask a question: `/ask <question about this pull request>`.";
    const { answer } = await askAboutPullRequest(prDeps(deps), accountId, {
      pr_url: pullUrl(deps, job),
      question,
    });
    const quoted = question
      .slice(0, 500)
      .split("\n")
      .map((l) => `> ${l}`)
      .join("\n");
    return `${quoted}\n\n${answer}`;
  }),
  improve: linked(async ({ deps, job, accountId }) => {
    if (!job.is_pull_request) return onlyOnPullRequests("improve");
    const improved = await improvePullRequest(prDeps(deps), accountId, {
      pr_url: pullUrl(deps, job),
    });
    return improved.review_url ? null : `No suggestions. ${improved.summary}`;
  }),
  approve: decision("approve"),
  reject: decision("reject"),
  "approve-diff": decision("approve-diff"),
  "reject-diff": decision("reject-diff"),
  status: linked(async ({ deps, job, accountId }) => {
    const [latest] = await threadTasks(deps, accountId, job);
    if (!latest) return "No task has been started from this thread yet. `/task <text>` starts one.";
    return statusText(latest);
  }),
  help: { linked: false, run: async ({ deps }) => helpText(deps.github.slug) },
};

function onlyOnPullRequests(name: CommandName): string {
  return `\`/${name}\` works on pull requests only.`;
}

/** The deps of the pull-request domain functions (review, describe, ask, improve). */
function prDeps(deps: GithubHandlerDeps): PrReviewDeps {
  return {
    config: deps.config,
    models: deps.models,
    logger: deps.logger,
    githubClient: deps.client,
    modelClient: deps.modelClient,
  };
}

/** The thread's pull request URL, on the configured GitHub. */
function pullUrl(deps: GithubHandlerDeps, job: Pick<CommandJob, "repo_full_name" | "number">) {
  return `${deps.client.webUrl.replace(/\/+$/, "")}/${job.repo_full_name}/pull/${job.number}`;
}

/** Carries out one command; returns the reply to post, if any. */
async function carryOut(ctx: CommandContext): Reply {
  const handler = COMMANDS[ctx.command.name];
  if (!handler.linked) return handler.run(ctx);
  const { deps, job, thread } = ctx;
  const workspace = await workspaceOfInstallation(deps.models, job.installation_id);
  if (!usableWorkspace(workspace)) {
    if (workspace?.account_id)
      return "This GitHub App installation is suspended or was removed, so it cannot run tasks. Unsuspend it in the installation's settings.";
    return howToLink(deps.github.slug);
  }
  return handler.run({
    ...ctx,
    accountId: workspace.account_id,
    who: `@${job.author} on GitHub`,
    base: {
      workspace_id: workspace._id,
      repo_id: job.repo_id,
      source: "github",
      origin: { kind: "comment", author: job.author, comment_url: job.comment_url },
      thread,
    },
  });
}

/**
 * `/task` and `/agent`: creates the task with the thread as context (on a pull request, on
 * its branch) and answers with its id.
 */
async function startThreadTask(
  { deps, octokit, job, accountId, base }: LinkedContext,
  what: string,
  agentName?: string,
): Reply {
  const description = `${what}\n\n${threadContext(job)}`.slice(0, 20_000);
  let baseBranch: string | undefined;
  if (job.is_pull_request) {
    const { data: pr } = await octokit.rest.pulls.get({
      ...ownerAndRepo(job.repo_full_name),
      pull_number: job.number,
    });
    if (pr.head.repo?.full_name !== job.repo_full_name)
      return "This pull request comes from a fork, and the service can only push branches to this repository. Run the task on an issue instead, or push the branch here.";
    baseBranch = pr.head.ref;
  }
  const task = await createTask(deps.tasks, accountId, {
    ...base,
    description,
    ...(agentName ? { agent_name: agentName } : {}),
    ...(baseBranch ? { base_branch: baseBranch } : {}),
  });
  return `Task \`${task._id}\` created${agentName ? ` (agent \`${agentName}\`)` : ""}${baseBranch ? ` on branch \`${baseBranch}\`` : ""}. I will post the plan here for approval.`;
}

/**
 * `/task` on a pull request a task opened: a follow-up of that task (or a revision of the
 * one waiting at a gate), answered in the thread; null on any other pull request.
 */
async function followUpFromCommand(
  { deps, job, thread, accountId }: LinkedContext,
  text: string,
): Reply {
  const tasks = await pullRequestTasks(deps.models, accountId, job.repo_id, job.number);
  if (tasks.length === 0) return null;
  const outcome = await actOnFeedback(deps, {
    accountId,
    tasks,
    thread,
    author: job.author,
    description: feedbackText({
      what: "request",
      author: job.author,
      repo_full_name: job.repo_full_name,
      pr_number: job.number,
      body: text,
      comments: [],
    }),
    origin: {
      kind: "comment",
      author: job.author,
      pr_number: job.number,
      comment_url: job.comment_url,
      comments: [],
    },
  });
  return `${outcome.reply}\n\n${APP_MARKER}`;
}

/** The issue or pull request the command came from, as context for the task (untrusted). */
function threadContext(job: CommandJob): string {
  const kind = job.is_pull_request ? "pull request" : "issue";
  const body = sanitizeUntrusted(job.issue_body).slice(0, 8000);
  return `Requested by @${job.author} in ${kind} #${job.number} of ${job.repo_full_name}: "${sanitizeUntrusted(job.issue_title)}"${body ? `\n\n${body}` : ""}`;
}

function statusText(task: TaskRecord): string {
  const parts = [`task \`${task._id}\` is in phase ${task.phase} (status ${task.status})`];
  if (task.pr_url) parts.push(`pull request: ${task.pr_url}`);
  if (task.error) parts.push(`error: ${task.error}`);
  if (task.status === "awaiting_approval") parts.push("reply `/approve` or `/reject`");
  if (task.status === "awaiting_diff_approval")
    parts.push("reply `/approve-diff` or `/reject-diff`");
  const text = parts.join("; ");
  return `${text.charAt(0).toUpperCase()}${text.slice(1)}.`;
}
