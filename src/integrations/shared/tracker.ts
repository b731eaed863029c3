import { createHash } from "node:crypto";
import type { Models, TaskRecord } from "../../db/models.js";
import { claimMarkers, type Marker } from "../../durable/markers.js";
import type { TaskSource } from "../../domain/integrations/types.js";
import { decide, type Decision } from "../../domain/tasks/gates.js";
import { trackerIssueTask } from "../../domain/tasks/store.js";
import { respondToConversation, trackerIssueTasks } from "../../domain/tasks/conversations.js";
import { type TaskDeps } from "../../domain/tasks/model.js";
import { isAppError } from "../../errors.js";
import type { Logger } from "../../util/logger.js";
import { redactText } from "../../util/redact.js";

/*
 * What the issue-tracker doors (Linear, Jira) share: claiming a delivery once, the comment
 * commands that take a gate, and the Markdown a task posts on its issue at a gate or at its
 * end.
 */

/**
 * The once-markers of a signed delivery: the vendor's delivery id, which its retries keep,
 * and a hash of the signed body, because the delivery id is an unsigned header that a
 * replayed body could carry changed. In this order: a retry of a delivery already acted on
 * (the vendors keep the id, not always the body) leaves its body claimed, so that body is not
 * acted on under another id either.
 */
export function deliveryMarkers(
  marker: (id: string) => Marker,
  deliveryId: string | undefined,
  rawBody: string,
): Marker[] {
  const body = marker(bodyKey(rawBody));
  return deliveryId ? [body, marker(deliveryId.slice(0, 200))] : [body];
}

/** What identifies a delivery across the vendor's retries: its id, or its signed body. */
export function deliveryKey(deliveryId: string | undefined, rawBody: string): string {
  return deliveryId ? `id-${deliveryId.slice(0, 200)}` : bodyKey(rawBody);
}

/** A signed body's name among a delivery's once-markers and keys: its sha256. */
function bodyKey(rawBody: string): string {
  return `body-${createHash("sha256").update(rawBody).digest("base64url")}`;
}

/**
 * Claims a signed delivery before it acts (the unique insert of its once-markers, so of two
 * concurrent identical deliveries exactly one goes on): true for the one that claimed it.
 */
export async function claimDelivery(
  models: Models,
  marker: (id: string) => Marker,
  deliveryId: string | undefined,
  rawBody: string,
): Promise<boolean> {
  return claimMarkers(models, deliveryMarkers(marker, deliveryId, rawBody));
}

/**
 * The answer to a delivery that asks for a task: queued (the task request job creates it
 * under `task_id`, or says on the issue why it could not), or a retry of one queued before.
 */
export function queuedAnswer(fresh: boolean, taskId: string) {
  return { status: 200, body: fresh ? { ok: true, task_id: taskId } : { ok: true } };
}

/** The gate command a comment starts with (`/approve`, `/approve-diff`, `/reject`, `/reject-diff`). */
export function commentCommand(body: string): Decision | null {
  const match = /^\s*\/(approve-diff|approve|reject-diff|reject)(?![\w-])/i.exec(body);
  return match ? (match[1]!.toLowerCase() as Decision) : null;
}

/** One line of plain text from an issue's title and description, for the task. */
export function issueText(title: string, description: string | null | undefined): string {
  return [title.trim(), (description ?? "").trim()].filter(Boolean).join("\n\n");
}

export type NoticeKind = "plan" | "diff" | "end" | "merged";

/**
 * Whether this notice moves the issue to done: the merge of the task's pull request, or the
 * end of a completed task that opened none (a pushed branch, no change needed), since no
 * merge will follow.
 */
export function completes(task: Pick<TaskRecord, "status" | "pr_url">, kind: NoticeKind): boolean {
  if (kind === "merged") return true;
  return kind === "end" && task.status === "completed" && !task.pr_url;
}

/** The comment a task posts on its issue (Markdown; secrets redacted, size capped). */
export function trackerNotice(task: TaskRecord, kind: NoticeKind): string {
  let text: string;
  if (kind === "plan") {
    const steps = (task.plan ?? []).map((s) => `${s.step}. **${s.title}**: ${s.description}`);
    text = [
      `Plan for task \`${task._id}\`: ${task.plan_summary ?? ""}`,
      steps.join("\n") || "(no steps)",
      "Reply `/approve` to implement it or `/reject` to cancel the task.",
    ].join("\n\n");
  } else if (kind === "diff") {
    const files =
      (task.diff ?? "").match(/^diff --git a\/\S+ b\/(\S+)$/gm)?.map((l) => l.split(" b/")[1]) ??
      [];
    const checks = task.checks?.results ?? [];
    text = [
      `Change ready for task \`${task._id}\`: ${task.implement_summary ?? ""}`,
      files.length ? `Files: ${files.map((f) => `\`${f}\``).join(", ")}` : "",
      checks.length
        ? `Checks: ${checks.map((c) => `${c.ok ? "passed" : "failed"} ${c.name}`).join(", ")}`
        : "",
      "Reply `/approve-diff` to open the pull request or `/reject-diff` to cancel the task.",
    ]
      .filter(Boolean)
      .join("\n\n");
  } else if (kind === "merged")
    text = `The pull request of task \`${task._id}\` was merged${task.pr_url ? `: ${task.pr_url}` : "."}`;
  else text = outcomeSentence(task);
  return redactText(text).slice(0, 30_000);
}

/** How a task ended, in one sentence (every door's last notice). */
export function outcomeSentence(
  task: Pick<TaskRecord, "_id" | "status" | "pr_url" | "branch" | "error">,
): string {
  return task.status === "completed"
    ? task.pr_url
      ? `Task \`${task._id}\` is done: ${task.pr_url}`
      : task.branch
        ? `Task \`${task._id}\` is done: pushed branch \`${task.branch}\`.`
        : `Task \`${task._id}\` is done: no change was needed.`
    : task.status === "cancelled"
      ? `Task \`${task._id}\` was cancelled. ${task.error ?? ""}`
      : `Task \`${task._id}\` failed: ${task.error ?? "no reason was recorded"}`;
}

/** A gate command commented on a tracker issue, and how its door checks and answers it. */
export interface GateComment {
  tasks: TaskDeps;
  accountId: string;
  integrationId: string;
  issueId: string;
  decision: Decision;
  /** Who decided, as the task's events say it ("Linear user Ann"). */
  decidedBy: string;
  /** The author's id, for the log line of a refusal. */
  author: string;
  /** "linear", "jira": in log lines. */
  vendor: string;
  /** Whether the author may take the task's gates (a team member, a user who may transition). */
  mayDecide(task: TrackerTask): Promise<boolean>;
  /** The answer to an author who may not. */
  refusal: string;
  reply(text: string): Promise<void>;
  /** Claims the delivery (once per comment); false when it was acted on before. */
  claim(): Promise<boolean>;
  logger: Logger;
}

export type TrackerTask = TaskRecord & { report_to: TaskSource };

/**
 * Takes a gate decided by a comment on a tracker issue: the issue's newest task, if the
 * author may decide, once per delivery. A refusal, and a decision the task cannot take now
 * (409, or 404 for a task gone), are answered on the issue with `reply` instead of failing the
 * delivery, so the tracker does not redeliver it.
 */
export async function takeGateComment(c: GateComment): Promise<void> {
  const task = await trackerIssueTask(c.tasks.models, c.accountId, c.integrationId, c.issueId);
  if (!task?.report_to) return;
  const onReplyError = (err: unknown) => c.logger.warn({ err }, `${c.vendor} reply failed`);
  if (!(await c.mayDecide(task as TrackerTask))) {
    c.logger.info({ user: c.author, task: task._id }, `${c.vendor} gate comment refused`);
    await c.reply(c.refusal).catch(onReplyError);
    return;
  }
  if (!(await c.claim())) return;
  try {
    await decide(c.tasks, c.accountId, task._id, c.decision, c.decidedBy);
  } catch (error) {
    if (isAppError(error) && (error.status === 409 || error.status === 404)) {
      await c.reply(redactText(error.message)).catch(onReplyError);
      return;
    }
    throw error;
  }
}

/** A comment on a tracker issue that is not a gate command: feedback for the issue's task. */
export interface FeedbackComment extends Omit<GateComment, "decision" | "decidedBy"> {
  /** The comment's visible text (sanitized by the door). */
  text: string;
  /** Who wrote it, as the task's events say it ("Linear user Ann"). */
  by: string;
  /**
   * Whether the integration's own user wrote it (its plan, change and result comments, its
   * answers): those never act, or every answer would answer itself. Throws when it cannot
   * tell; the comment is then ignored.
   */
  writtenBySelf(): Promise<boolean>;
}

/**
 * Acts on a comment on a tracker issue whose tasks the integration started: through the
 * domain's one answer to a conversation (respondToConversation) it revises the newest task at
 * its gate, follows up a task that ended DONE with a branch, or says why neither, answered on
 * the issue. Comments of the integration's own user, of people who may not decide, and of
 * issues without a task do nothing (the refused are told so).
 */
export async function takeFeedbackComment(c: FeedbackComment): Promise<void> {
  const tasks = await trackerIssueTasks(c.tasks.models, c.accountId, c.integrationId, c.issueId);
  const newest = tasks[0];
  if (!newest?.report_to || !c.text.trim()) return;
  const onReplyError = (err: unknown) => c.logger.warn({ err }, `${c.vendor} reply failed`);
  let self: boolean;
  try {
    self = await c.writtenBySelf();
  } catch (err) {
    c.logger.warn({ err, task: newest._id }, `${c.vendor} comment ignored: its author is unknown`);
    return;
  }
  if (self) return;
  if (!(await c.mayDecide(newest as TrackerTask))) {
    c.logger.info({ user: c.author, task: newest._id }, `${c.vendor} feedback comment refused`);
    await c.reply(c.refusal).catch(onReplyError);
    return;
  }
  if (!(await c.claim())) return;
  let answer: string;
  try {
    answer = (
      await respondToConversation(c.tasks, c.accountId, tasks, {
        text: c.text,
        by: c.by,
        source: c.vendor,
      })
    ).reply;
  } catch (error) {
    if (!(isAppError(error) && error.status < 500)) throw error;
    answer = `Could not act on the comment: ${error.message}`;
  }
  await c.reply(redactText(answer)).catch(onReplyError);
}
