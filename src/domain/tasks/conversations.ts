import { type Models, type TaskRecord } from "../../db/models.js";
import { type TaskDeps } from "./model.js";
import { conversationTasks } from "./store.js";
import { followUpTask, reviseTask } from "./revisions.js";

/*
 * A person answering a task where it reports (docs/api.md, "Revisions, follow-ups and
 * retries", "From chat and trackers"): a comment on its pull request, a reply in its Slack
 * thread, a comment on its Linear or Jira issue. Every door asks `respondToConversation` what the
 * words do: a revision while the conversation's newest task waits at a gate, a follow-up task on
 * the branch of its newest task that ended DONE with one, otherwise nothing, with the reason to
 * answer.
 */

/** The longest follow-up description and revision feedback (docs/api.md, "Revisions,
 * follow-ups and retries"). */
const MAX_DESCRIPTION = 20_000;
const MAX_FEEDBACK = 10_000;

/** What a person's words in a task's conversation did, and the answer to post there. */
export interface ConversationOutcome {
  action: "revised" | "followed_up" | "busy" | "nothing";
  /** The task revised, or the follow-up created. */
  task_id?: string;
  /** One or two sentences for the conversation (Markdown with `code` spans). */
  reply: string;
}

export interface ConversationInput {
  /** What the person wrote (the door strips its own markup; sanitized again below). */
  text: string;
  /** Who wrote it, as the task's events and the reply name them ("@ann", "Slack user <@U1>"). */
  by: string;
  /** How the reply names them, when shorter than `by` ("@ann"); `by` by default. */
  name?: string | undefined;
  /** The door (`github`, `slack`, `linear`, `jira`): the follow-up's source. */
  source: string;
  /** What the follow-up answers when it ends (inline comments, who asked, from where). */
  origin?: Record<string, unknown> | undefined;
  /** Where a follow-up answers, when not where its parent answered (a pull request thread). */
  thread?: NonNullable<TaskRecord["thread"]> | undefined;
}

/**
 * Acts on a person's words in the conversation of `tasks` (newest first): revises the newest
 * task at its gate, else follows up the newest task that ended DONE with a branch, else
 * answers why nothing happened (still working, nothing to follow up).
 */
export async function respondToConversation(
  deps: TaskDeps,
  accountId: string,
  tasks: readonly TaskRecord[],
  input: ConversationInput,
): Promise<ConversationOutcome> {
  const name = input.name ?? input.by;
  const newest = tasks[0];
  if (newest?.status === "awaiting_approval" || newest?.status === "awaiting_diff_approval") {
    const gate = newest.status === "awaiting_approval" ? "plan" : "diff";
    await reviseTask(deps, accountId, newest._id, {
      feedback: input.text.slice(0, MAX_FEEDBACK),
      by: input.by,
    });
    return {
      action: "revised",
      task_id: newest._id,
      reply: `Task \`${newest._id}\` was waiting for ${gate} approval: revising its ${gate} with ${name}'s feedback. The new ${gate} will be posted here.`,
    };
  }
  if (newest && (newest.status === "queued" || newest.status === "running"))
    return {
      action: "busy",
      task_id: newest._id,
      reply: `Task \`${newest._id}\` is still working (phase ${newest.phase}); send the feedback again when it waits for approval or has finished.`,
    };
  const parent = tasks.find((t) => t.status === "completed" && t.branch);
  if (!parent)
    return {
      action: "nothing",
      reply: newest
        ? `Task \`${newest._id}\` ended ${newest.status} without a branch to follow up; start a new task instead.`
        : "No task here to revise or follow up.",
    };
  const task = await followUpTask(deps, accountId, parent._id, {
    description: input.text.slice(0, MAX_DESCRIPTION),
    auto_approve: parent.auto_approve,
    source: input.source,
    origin: input.origin,
    thread: input.thread,
  });
  return {
    action: "followed_up",
    task_id: task._id,
    reply: `Follow-up task \`${task._id}\` created for ${name}'s feedback. It works on branch \`${parent.branch}\` from its current head and will push new commits to ${parent.pr_url ? "the same pull request" : "that branch"}${parent.auto_approve ? "" : " after the plan and the change are approved here"}.`,
  };
}

/**
 * The tasks of a Slack thread an integration's task reports in, newest first: the task that
 * opened it and its follow-ups (which keep reporting there).
 */
export function chatThreadTasks(
  models: Models,
  accountId: string,
  integrationId: string,
  channel: string,
  threadTs: string,
  limit = 20,
): Promise<TaskRecord[]> {
  return conversationTasks(
    models,
    accountId,
    integrationId,
    { channel, thread_ts: threadTs },
    limit,
  );
}

/** The tasks an integration started from one tracker issue and their follow-ups, newest first. */
export function trackerIssueTasks(
  models: Models,
  accountId: string,
  integrationId: string,
  issueId: string,
  limit = 20,
): Promise<TaskRecord[]> {
  return conversationTasks(models, accountId, integrationId, { issue_id: issueId }, limit);
}
