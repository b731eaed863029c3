import { createHash } from "node:crypto";
import { lookup } from "node:dns/promises";
import ipaddr from "ipaddr.js";
import type { Version3Client } from "jira.js";
import { z } from "zod";
import { markerKind } from "../../durable/markers.js";
import type { TaskRecord } from "../../db/models.js";
import type { TaskDeps } from "../../domain/tasks/model.js";
import { errors } from "../../errors.js";
import { sanitizeUntrusted } from "../../text/sanitize.js";
import type { Logger } from "../../util/logger.js";
import { redactText } from "../../util/redact.js";
import { guardedAxiosConfig, PUBLIC_ADDRESSES, type AddressPolicy } from "../../util/outbound.js";
import { findIntegration, type IntegrationRecord } from "../../domain/integrations/store.js";
import type { JiraSecrets, JiraSettings } from "../../domain/integrations/kinds.js";
import type { TaskSource } from "../../domain/integrations/types.js";
import {
  claimDelivery,
  commentCommand,
  deliveryKey,
  deliveryMarkers,
  queuedAnswer,
  completes,
  takeFeedbackComment,
  takeGateComment,
  issueText,
  trackerNotice,
  type NoticeKind,
} from "../shared/tracker.js";
import { deliveryTaskId, type RequestTask } from "../shared/task-request.js";
import {
  checkReplayWindow,
  hmacHexValid,
  signedObject,
  signedShape,
  type ReplayWindow,
} from "../shared/signed-request.js";

/** A Jira webhook delivery. */
export const jiraDeliveryMarker = markerKind(
  "jira",
  "jira-delivery",
  (integrationId: string, deliveryId: string) => [integrationId, deliveryId],
);

/*
 * The Jira Cloud door: one admin webhook (issue created/updated, comment created). Adding the
 * integration's label to an issue of a mapped project creates a task on that project's
 * repository; the plan, the change and the result come back as comments, and a user who may
 * transition the issue takes the gates with `/approve`, `/reject`, `/approve-diff`,
 * `/reject-diff` comments. The issue takes the transitions named in the settings when the
 * plan is posted (`started`) and when the task's pull request is merged (`done`; a task
 * that ends without a pull request takes it when it is done). Deliveries are checked
 * against the webhook secret (X-Hub-Signature: sha256=HMAC-SHA256 of the raw body) and their
 * signed `timestamp` (within JIRA_WINDOW: Jira Cloud delivers retries up to 30 minutes late)
 * before anything is read, its body read with the schema below (a 400 for one that does not
 * fit, signed-request.ts), and acted on once (claimDelivery: the
 * X-Atlassian-Webhook-Identifier, which Jira keeps across retries, and the signed body).
 */

/**
 * How far a delivery's signed `timestamp` may be from this clock: 35 minutes old (Jira
 * retries for up to 30 minutes), 5 minutes ahead (clock skew).
 */
const JIRA_WINDOW: ReplayWindow = {
  pastMs: 35 * 60_000,
  futureMs: 5 * 60_000,
  words: "the window of 35 minutes back and 5 minutes ahead",
};

export interface JiraDeps {
  tasks: TaskDeps;
  logger: Logger;
  /** Queues a task asked for here (the task request job creates it). */
  requestTask: RequestTask;
  /** Lets site_url be http:// or a non-public host (ALLOW_LOCAL_REPOS: development, tests). */
  allowLocal?: boolean | undefined;
}

export interface JiraRequest {
  rawBody: string;
  signature: string;
  delivery?: string | undefined;
}

/** Jira sends text fields as strings (wiki markup) or as Atlassian Document Format. */
const textField = z.unknown().transform((value) => adfText(value));

function adfText(value: unknown): string {
  if (typeof value === "string") return value;
  if (!value || typeof value !== "object") return "";
  const node = value as { type?: string; text?: unknown; content?: unknown };
  if (node.type === "text" && typeof node.text === "string") return node.text;
  if (node.type === "hardBreak") return "\n";
  const inner = Array.isArray(node.content) ? node.content.map(adfText).join("") : "";
  return node.type === "paragraph" || node.type === "heading" ? `${inner}\n\n` : inner;
}

const jiraIssue = z.looseObject({
  id: z.string(),
  key: z.string(),
  fields: z
    .looseObject({
      summary: z.string().default(""),
      description: textField.optional(),
      labels: z.array(z.string()).default([]),
      project: z.looseObject({ key: z.string() }).optional(),
    })
    .default({ summary: "", labels: [] }),
});

const jiraEvent = z.looseObject({
  webhookEvent: z.string(),
  timestamp: z.number().optional(),
  issue: jiraIssue.optional(),
  changelog: z
    .looseObject({
      items: z
        .array(
          z.looseObject({
            field: z.string(),
            fromString: z.string().nullish(),
            toString: z.string().nullish(),
          }),
        )
        .default([]),
    })
    .optional(),
  comment: z
    .looseObject({
      id: z.string(),
      body: textField.optional(),
      author: z.looseObject({ accountId: z.string(), displayName: z.string().optional() }),
    })
    .optional(),
});

/**
 * The site is the account's to name, so the service checks it before calling it: https and
 * a host resolving only to addresses the policy allows (public ones: the clone URL policy's
 * address check), so an integration cannot make the service call its own network.
 */
async function checkSite(siteUrl: string, policy: AddressPolicy): Promise<void> {
  const url = new URL(siteUrl);
  if (url.protocol !== "https:") throw new Error("The Jira site_url must be an https:// URL.");
  const host = url.hostname.replace(/^\[|\]$/g, "");
  const port = Number(url.port || 443);
  const addresses = ipaddr.isValid(host)
    ? [host]
    : (await lookup(host, { all: true, verbatim: true })).map((a) => a.address);
  for (const address of addresses) {
    const problem = policy.refuse(address, port);
    if (problem) throw new Error(`The Jira site ${host} resolves to ${problem}.`);
  }
}

/**
 * A client for the integration's site. Unless local sites are allowed (ALLOW_LOCAL_REPOS:
 * development), the check above is made again at every connection the client opens, and
 * it follows no redirect and speaks no plain http (util/outbound.ts): no hop goes where the
 * first was not checked to go. `policy` is for tests (a local HTTPS fake); the default
 * allows public addresses only.
 */
export async function jiraClient(
  integration: IntegrationRecord,
  allowLocal = false,
  policy: AddressPolicy = PUBLIC_ADDRESSES,
): Promise<Version3Client> {
  const settings = integration.settings as JiraSettings;
  if (!allowLocal) await checkSite(settings.site_url, policy);
  const secrets = integration.secrets as JiraSecrets;
  // Loaded at the first Jira call, not at import: 0.4 s of every process's start otherwise.
  const jira = await import("jira.js");
  return new jira.Version3Client({
    host: settings.site_url,
    authentication: { basic: { email: settings.email, apiToken: secrets.api_token } },
    ...(allowLocal ? {} : { baseRequestConfig: guardedAxiosConfig(policy) }),
  });
}

/** Markdown-ish text as a Jira document: blank lines split paragraphs, lines break. */
function adfDocument(text: string) {
  return {
    type: "doc" as const,
    version: 1 as const,
    content: text.split(/\n{2,}/).map((para) => ({
      type: "paragraph" as const,
      content: para
        .split("\n")
        .flatMap((line, i) => [
          ...(i > 0 ? [{ type: "hardBreak" as const }] : []),
          ...(line ? [{ type: "text" as const, text: line }] : []),
        ]),
    })),
  };
}

export async function commentOnJiraIssue(client: Version3Client, issueKey: string, text: string) {
  await client.issueComments.addComment({
    issueIdOrKey: issueKey,
    comment: adfDocument(redactText(text)),
  });
}

/**
 * Takes the issue's transition (or the one to the status) with this name, if configured. A
 * name the issue does not offer (already moved, or misconfigured) is answered as a note for
 * the comment rather than an error, so a retried notice does not stall on it.
 */
export async function transitionJiraIssue(
  client: Version3Client,
  issueKey: string,
  name: string | undefined,
): Promise<string> {
  if (!name) return "";
  const { transitions = [] } = await client.issues.getTransitions({ issueIdOrKey: issueKey });
  const wanted = name.toLowerCase();
  const transition = transitions.find(
    (t) => t.name?.toLowerCase() === wanted || t.to?.name?.toLowerCase() === wanted,
  );
  if (!transition?.id)
    return `\n\n(The issue offers no transition named "${name}"; it was not moved.)`;
  await client.issues.doTransition({ issueIdOrKey: issueKey, transition: { id: transition.id } });
  return "";
}

/** Whether `header` (X-Hub-Signature) is `sha256=` HMAC-SHA256 of the raw body under `secret`. */
function jiraSignatureValid(secret: string, rawBody: string, header: string): boolean {
  return /^sha256=/i.test(header) && hmacHexValid(secret, rawBody, header.slice(7));
}

function labelAdded(event: z.infer<typeof jiraEvent>, label: string): boolean {
  const wanted = label.toLowerCase();
  const has = (labels: string[]) => labels.some((l) => l.toLowerCase() === wanted);
  if (!event.issue || !has(event.issue.fields.labels)) return false;
  if (event.webhookEvent === "jira:issue_created") return true;
  if (event.webhookEvent !== "jira:issue_updated") return false;
  const change = event.changelog?.items.find((i) => i.field.toLowerCase() === "labels");
  if (!change) return false;
  const words = (s: string | null | undefined) => (s ?? "").split(/\s+/).filter(Boolean);
  return has(words(change.toString)) && !has(words(change.fromString));
}

/** The account of each integration's API token (its own comments), by integration and token. */
const ownAccounts = new Map<string, Promise<string>>();

/**
 * The Jira account the integration's API token acts as (GET /rest/api/3/myself): the author of
 * every comment the service posts. Asked once per integration, email and token.
 */
export function ownAccountId(
  integration: IntegrationRecord,
  client: Version3Client,
): Promise<string> {
  const { email } = integration.settings as JiraSettings;
  const token = (integration.secrets as JiraSecrets).api_token;
  const key = `${integration._id}:${createHash("sha256").update(`${email}\0${token}`).digest("hex")}`;
  let found = ownAccounts.get(key);
  if (!found) {
    found = client.myself.getCurrentUser().then((me) => {
      if (!me.accountId) throw new Error("Jira did not say whose API token this is.");
      return me.accountId;
    });
    // A failed lookup is asked again next time.
    found.catch(() => ownAccounts.delete(key));
    ownAccounts.set(key, found);
  }
  return found;
}

const OK = { status: 200, body: { ok: true } };

/** Handles one Jira webhook delivery for an integration. */
export async function handleJira(
  deps: JiraDeps,
  integrationId: string,
  request: JiraRequest,
): Promise<{ status: number; body: unknown }> {
  const integration = await findIntegration(deps.tasks.models, integrationId, "jira");
  const secrets = integration?.secrets as JiraSecrets | undefined;
  if (
    !integration ||
    !secrets ||
    !jiraSignatureValid(secrets.webhook_secret, request.rawBody, request.signature)
  )
    throw errors.unauthorized("The Jira webhook signature is missing or invalid.");
  const logger = deps.logger.child({ integration: integration._id, jira: "webhook" });
  if (!integration.enabled) return OK;
  // Stale or replayed: the signed timestamp is the event's time (ms), kept across retries.
  const json = signedObject(request.rawBody, "Jira webhook body");
  checkReplayWindow(
    typeof json.timestamp === "number" ? json.timestamp : Number.NaN,
    JIRA_WINDOW,
    "The Jira delivery's signed timestamp",
  );
  const event = signedShape(jiraEvent, json, "body", "Jira webhook body");
  const settings = integration.settings as JiraSettings;
  const marker = (id: string) => jiraDeliveryMarker(integration._id, id);
  const once = () => claimDelivery(deps.tasks.models, marker, request.delivery, request.rawBody);
  const taskId = deliveryTaskId(integration._id, deliveryKey(request.delivery, request.rawBody));
  const issue = event.issue;
  if (!issue) return OK;

  if (event.webhookEvent.startsWith("jira:issue_")) {
    if (!labelAdded(event, settings.label)) return OK;
    const project = issue.fields.project?.key ?? issue.key.split("-")[0] ?? "";
    const target = settings.projects[project];
    // An unmapped project makes no task; its issue is answered with what to set (by the job).
    if (!target)
      logger.info(
        { project, issue: issue.key },
        "jira issue of an unmapped project: no task, the issue is told what to set",
      );
    const fresh = await deps.requestTask({
      type: "jira",
      integration_id: integration._id,
      task_id: taskId,
      claims: deliveryMarkers(marker, request.delivery, request.rawBody),
      target: target ?? null,
      ...(target ? {} : { unmapped: project }),
      description: issueText(
        sanitizeUntrusted(issue.fields.summary),
        sanitizeUntrusted(issue.fields.description ?? ""),
      ),
      origin: { integration_id: integration._id, jira_issue: issue.key },
      report_to: {
        integration_id: integration._id,
        type: "jira",
        ref: { issue_id: issue.id, issue_key: issue.key, project_key: project },
      },
    });
    return target ? queuedAnswer(fresh, taskId) : OK;
  }

  if (event.webhookEvent === "comment_created" && event.comment) {
    const text = event.comment.body ?? "";
    const decision = commentCommand(text);
    const author = event.comment.author;
    // Built once a task is found: checking the site resolves its name.
    let clientOnce: Promise<Version3Client> | undefined;
    const client = () => (clientOnce ??= jiraClient(integration, deps.allowLocal));
    const common = {
      tasks: deps.tasks,
      accountId: integration.account_id,
      integrationId: integration._id,
      issueId: issue.id,
      author: author.accountId,
      vendor: "jira",
      // A project member here is a user Jira lets transition the issue.
      mayDecide: async () => {
        const allowed = await (
          await client()
        ).userSearch.findUsersWithAllPermissions({
          permissions: "TRANSITION_ISSUES",
          issueKey: issue.key,
          accountId: author.accountId,
        });
        return allowed.some((u) => u.accountId === author.accountId);
      },
      reply: async (text: string) => commentOnJiraIssue(await client(), issue.key, text),
      claim: once,
      logger,
    };
    const by = `Jira user ${author.displayName ?? author.accountId}`;
    if (decision)
      await takeGateComment({
        ...common,
        decision,
        decidedBy: by,
        refusal: "Only users who may transition this issue may approve or reject its task.",
      });
    // Any other comment is feedback: a revision at a gate, a follow-up after the change.
    else
      await takeFeedbackComment({
        ...common,
        text: sanitizeUntrusted(text),
        by,
        refusal: "Only users who may transition this issue may revise or follow up its task.",
        writtenBySelf: async () =>
          author.accountId === (await ownAccountId(integration, await client())),
      });
  }
  return OK;
}

/**
 * Posts a task's notice on its Jira issue, taking the configured transition first: `started`
 * with the plan, `done` when the pull request is merged (or the task is done without one).
 */
export async function postJiraNotice(
  deps: Pick<JiraDeps, "allowLocal">,
  integration: IntegrationRecord,
  task: TaskRecord & { report_to: TaskSource },
  kind: NoticeKind,
): Promise<void> {
  const client = await jiraClient(integration, deps.allowLocal);
  const key = task.report_to.ref.issue_key;
  if (!key) return;
  const { transitions } = integration.settings as JiraSettings;
  let note = "";
  if (kind === "plan") note = await transitionJiraIssue(client, key, transitions.started);
  if (completes(task, kind)) note = await transitionJiraIssue(client, key, transitions.done);
  await commentOnJiraIssue(client, key, trackerNotice(task, kind) + note);
}
