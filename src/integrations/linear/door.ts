import { createHash } from "node:crypto";
import {
  CreateCommentMutation,
  LinearClient,
  Team_MembersQuery,
  Team_StatesQuery,
  UpdateIssueMutation,
} from "@linear/sdk";
import { z } from "zod";
import { markerKind } from "../../durable/markers.js";
import type { TaskRecord } from "../../db/models.js";
import type { TaskDeps } from "../../domain/tasks/model.js";
import { errors } from "../../errors.js";
import { sanitizeUntrusted } from "../../text/sanitize.js";
import type { Logger } from "../../util/logger.js";
import { redactText } from "../../util/redact.js";
import { findIntegration, type IntegrationRecord } from "../../domain/integrations/store.js";
import type { LinearSecrets, LinearSettings } from "../../domain/integrations/kinds.js";
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
  type TrackerTask,
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

/** A Linear webhook delivery. */
export const linearDeliveryMarker = markerKind(
  "linear",
  "linear-delivery",
  (integrationId: string, deliveryId: string) => [integrationId, deliveryId],
);

/*
 * The Linear door: one webhook (Issue and Comment events). Adding the integration's label
 * (or assigning the agent user) to an issue of a mapped team creates a task on that team's
 * repository; the plan, the change and the result come back as comments on the issue, and a
 * team member takes the gates with `/approve`, `/reject`, `/approve-diff`, `/reject-diff`
 * comments. The issue moves to the team's first "started" state when the plan is posted and
 * to its first "completed" state when the task's pull request is merged (when the task is
 * done, if it opened none). Every delivery is checked as Linear documents it before
 * anything is read (HMAC-SHA256 of the raw body in Linear-Signature, then the signed
 * webhookTimestamp within 60 s of this clock, either way), its body read with the schemas
 * below (a 400 for one that does not fit), and acted on once (claimDelivery: the
 * Linear-Delivery id and the signed body). The SDK's LinearWebhookClient checks the same,
 * but folds a bad signature, a stale time and a body that is not JSON into one exception,
 * so its caller cannot answer each as what it is (shared/signed-request.ts).
 */

export interface LinearDeps {
  tasks: TaskDeps;
  logger: Logger;
  /** Queues a task asked for here (the task request job creates it). */
  requestTask: RequestTask;
  /** Linear's GraphQL endpoint (tests point it at a fake); https://api.linear.app/graphql by default. */
  apiUrl?: string | undefined;
}

export interface LinearRequest {
  rawBody: string;
  signature: string;
  delivery?: string | undefined;
}

const labelList = z.array(z.looseObject({ id: z.string(), name: z.string() })).default([]);

const issueEvent = z.looseObject({
  type: z.literal("Issue"),
  action: z.string(),
  webhookId: z.string().optional(),
  data: z.looseObject({
    id: z.string(),
    identifier: z.string().optional(),
    title: z.string().default(""),
    description: z.string().nullish(),
    url: z.string().optional(),
    teamId: z.string().optional(),
    team: z.looseObject({ id: z.string(), key: z.string().optional() }).nullish(),
    labels: labelList,
    labelIds: z.array(z.string()).optional(),
    assigneeId: z.string().nullish(),
    creatorId: z.string().nullish(),
  }),
  updatedFrom: z
    .looseObject({ labelIds: z.array(z.string()).optional(), assigneeId: z.string().nullish() })
    .optional(),
});

const commentEvent = z.looseObject({
  type: z.literal("Comment"),
  action: z.string(),
  data: z.looseObject({
    id: z.string(),
    body: z.string().default(""),
    // Absent on comments of project updates and documents: those are acknowledged only.
    issueId: z.string().optional(),
    userId: z.string().nullish(),
    user: z.looseObject({ id: z.string(), name: z.string().optional() }).nullish(),
  }),
});

/** A GraphQL client for the integration's API key, pointed at the configured endpoint. */
export function linearClient(integration: IntegrationRecord, apiUrl?: string): LinearClient {
  const secrets = integration.secrets as LinearSecrets;
  return new LinearClient({ apiKey: secrets.api_key, ...(apiUrl ? { apiUrl } : {}) });
}

/** The SDK's requester for the integration's client: its generated operations use it. */
function requester(client: LinearClient) {
  return <T>(query: string, variables?: Record<string, unknown>) =>
    client.client.request<T, Record<string, unknown>>(query, variables);
}

/**
 * Comments on an issue. This and the other calls below use the SDK's own operations, which
 * Linear generates from its GraphQL schema. So the requests have the shape the API
 * describes, and the compiler checks their inputs against the schema's types.
 */
export async function commentOnIssue(client: LinearClient, issueId: string, body: string) {
  const res = await new CreateCommentMutation(requester(client)).fetch({
    issueId,
    body: redactText(body),
  });
  if (!res.success) throw new Error("Linear did not create the comment.");
}

/** Moves an issue to its team's first workflow state of a type ("started", "completed"). */
export async function moveIssue(
  client: LinearClient,
  issueId: string,
  teamId: string,
  type: "started" | "completed",
): Promise<void> {
  const states = await new Team_StatesQuery(requester(client), teamId, { first: 100 }).fetch();
  // A team has a handful of states; a page that adds nothing ends the walk.
  for (let page = 1; states.pageInfo.hasNextPage && page < 10; page++) {
    const before = states.nodes.length;
    await states.fetchNext();
    if (states.nodes.length === before) break;
  }
  const state = states.nodes
    .filter((s) => s.type === type)
    .sort((a, b) => a.position - b.position)[0];
  if (!state) throw new Error(`The Linear team has no "${type}" workflow state.`);
  const res = await new UpdateIssueMutation(requester(client)).fetch(issueId, {
    stateId: state.id,
  });
  if (!res.success) throw new Error("Linear did not move the issue.");
}

/** Members asked for per page (Linear's largest page). */
const MEMBERS_PAGE = 250;

/**
 * Whether a user is a member of a team: the team's members page by page (the SDK's
 * connection and its fetchNext), until the user is found or the pages end, so teams larger
 * than one page work.
 */
export async function isTeamMember(
  client: LinearClient,
  teamId: string,
  userId: string,
): Promise<boolean> {
  const members = await new Team_MembersQuery(requester(client), teamId, {
    first: MEMBERS_PAGE,
  }).fetch();
  let seen = 0;
  for (;;) {
    if (members.nodes.slice(seen).some((m) => m.id === userId)) return true;
    if (!members.pageInfo.hasNextPage) return false;
    seen = members.nodes.length;
    await members.fetchNext();
    // A page that adds nothing would loop forever.
    if (members.nodes.length === seen) return false;
  }
}

/** The user of each integration's API key (its own comments), by integration and key. */
const viewers = new Map<string, Promise<string>>();

/**
 * The id of the Linear user the integration's API key acts as: the author of every comment
 * the service posts. Asked once per integration and key (a rotated key may be another user).
 */
export function viewerId(integration: IntegrationRecord, client: LinearClient): Promise<string> {
  const apiKey = (integration.secrets as LinearSecrets).api_key;
  const key = `${integration._id}:${createHash("sha256").update(apiKey).digest("hex")}`;
  let found = viewers.get(key);
  if (!found) {
    found = requester(client)<{ viewer?: { id?: string } }>(
      "query ForemanViewer { viewer { id } }",
    ).then((data) => {
      if (!data.viewer?.id) throw new Error("Linear did not say who its API key's user is.");
      return data.viewer.id;
    });
    // A failed lookup is asked again next time.
    found.catch(() => viewers.delete(key));
    viewers.set(key, found);
  }
  return found;
}

const OK = { status: 200, body: { ok: true } };

/** Linear's replay window: the signed webhookTimestamp within a minute, either way. */
const LINEAR_WINDOW: ReplayWindow = {
  pastMs: 60_000,
  futureMs: 60_000,
  words: "the 60-second window",
};

/** What every Linear delivery carries; Issue and Comment events are read further below. */
const envelope = z.looseObject({ type: z.string(), action: z.string() });

/** Handles one signed Linear webhook delivery for an integration. */
export async function handleLinear(
  deps: LinearDeps,
  integrationId: string,
  request: LinearRequest,
): Promise<{ status: number; body: unknown }> {
  const integration = await findIntegration(deps.tasks.models, integrationId, "linear");
  const secrets = integration?.secrets as LinearSecrets | undefined;
  // One answer for an unknown integration and a bad signature.
  if (
    !integration ||
    !secrets ||
    !hmacHexValid(secrets.webhook_secret, request.rawBody, request.signature)
  )
    throw errors.unauthorized("The Linear webhook signature is missing or invalid.");
  const payload = signedObject(request.rawBody, "Linear webhook body");
  const sent = payload.webhookTimestamp;
  checkReplayWindow(
    typeof sent === "number" ? sent : Number.NaN,
    LINEAR_WINDOW,
    "The Linear delivery's signed webhookTimestamp",
  );
  const { type } = signedShape(envelope, payload, "body", "Linear webhook body");
  if (!integration.enabled) return OK;
  const delivery = linearDelivery(deps, integration, request);
  if (type === "Issue") return onIssue(delivery, payload);
  if (type === "Comment") await onComment(delivery, payload);
  return OK;
}

/** One verified delivery of an enabled integration, as the event handlers below take it. */
interface LinearDelivery {
  deps: LinearDeps;
  integration: IntegrationRecord;
  request: LinearRequest;
  settings: LinearSettings;
  logger: Logger;
  marker: (id: string) => ReturnType<typeof linearDeliveryMarker>;
  /** Claims the delivery: true the first time. */
  once: () => Promise<boolean>;
  taskId: string;
}

function linearDelivery(
  deps: LinearDeps,
  integration: IntegrationRecord,
  request: LinearRequest,
): LinearDelivery {
  const marker = (id: string) => linearDeliveryMarker(integration._id, id);
  return {
    deps,
    integration,
    request,
    settings: integration.settings as LinearSettings,
    logger: deps.logger.child({ integration: integration._id, linear: "webhook" }),
    marker,
    once: () => claimDelivery(deps.tasks.models, marker, request.delivery, request.rawBody),
    taskId: deliveryTaskId(integration._id, deliveryKey(request.delivery, request.rawBody)),
  };
}

/** An Issue event: a labelled (or assigned) issue asks for a task. */
async function onIssue(
  { deps, integration, request, settings, logger, marker, taskId }: LinearDelivery,
  payload: Record<string, unknown>,
): Promise<{ status: number; body: unknown }> {
  const event = signedShape(issueEvent, payload, "body", "Linear Issue event");
  const { data } = event;
  if (!startsTask(settings, event)) return OK;
  const teamId = data.team?.id ?? data.teamId ?? "";
  const target =
    (data.team?.key ? settings.teams[data.team.key] : undefined) ?? settings.teams[teamId];
  // An unmapped team makes no task; its issue is answered with what to set (by the job).
  const unmapped = target ? undefined : (data.team?.key ?? teamId);
  if (unmapped)
    logger.info(
      { team: unmapped, issue: data.identifier ?? data.id },
      "linear issue of an unmapped team: no task, the issue is told what to set",
    );
  const fresh = await deps.requestTask({
    type: "linear",
    integration_id: integration._id,
    task_id: taskId,
    claims: deliveryMarkers(marker, request.delivery, request.rawBody),
    target: target ?? null,
    ...(unmapped ? { unmapped } : {}),
    description: issueText(
      sanitizeUntrusted(data.title),
      sanitizeUntrusted(data.description ?? ""),
    ),
    origin: {
      integration_id: integration._id,
      linear_issue: data.identifier ?? data.id,
      ...(data.url ? { url: data.url } : {}),
    },
    report_to: {
      integration_id: integration._id,
      type: "linear",
      ref: {
        issue_id: data.id,
        team_id: teamId,
        ...(data.identifier ? { identifier: data.identifier } : {}),
      },
    },
  });
  return unmapped ? OK : queuedAnswer(fresh, taskId);
}

/** Whether an Issue event starts a task: the label added, or the agent user assigned. */
function startsTask(settings: LinearSettings, event: z.infer<typeof issueEvent>): boolean {
  const { action, data, updatedFrom } = event;
  const label = settings.label.toLowerCase();
  const labelled = data.labels.find((l) => l.name.toLowerCase() === label);
  return Boolean(
    (labelled &&
      (action === "create" ||
        (action === "update" &&
          updatedFrom?.labelIds !== undefined &&
          !updatedFrom.labelIds.includes(labelled.id)))) ||
    (settings.agent_user_id &&
      data.assigneeId === settings.agent_user_id &&
      (action === "create" ||
        (action === "update" &&
          updatedFrom !== undefined &&
          "assigneeId" in updatedFrom &&
          updatedFrom.assigneeId !== data.assigneeId))),
  );
}

/** A Comment event: a gate command, or feedback for the issue's task. */
async function onComment(
  { deps, integration, logger, once }: LinearDelivery,
  payload: Record<string, unknown>,
): Promise<void> {
  const comment = signedShape(commentEvent, payload, "body", "Linear Comment event");
  if (comment.action === "create") {
    const { data } = comment;
    const decision = commentCommand(data.body);
    const userId = data.userId ?? data.user?.id;
    const issueId = data.issueId;
    if (!userId || !issueId) return;
    const client = linearClient(integration, deps.apiUrl);
    const common = {
      tasks: deps.tasks,
      accountId: integration.account_id,
      integrationId: integration._id,
      issueId,
      author: userId,
      vendor: "linear",
      mayDecide: (task: TrackerTask) =>
        isTeamMember(client, task.report_to.ref.team_id ?? "", userId),
      reply: (text: string) => commentOnIssue(client, issueId, text),
      claim: once,
      logger,
    };
    const by = `Linear user ${data.user?.name ?? userId}`;
    if (decision)
      await takeGateComment({
        ...common,
        decision,
        decidedBy: by,
        refusal: "Only members of the issue's team may approve or reject this task.",
      });
    // Any other comment is feedback: a revision at a gate, a follow-up after the change.
    else
      await takeFeedbackComment({
        ...common,
        text: sanitizeUntrusted(data.body),
        by,
        refusal: "Only members of the issue's team may revise or follow up this task.",
        writtenBySelf: async () => userId === (await viewerId(integration, client)),
      });
  }
}

/**
 * Posts a task's notice on its Linear issue, moving the issue's state first (idempotent):
 * "started" with the plan, "completed" when the pull request is merged (or when the task
 * is done without one).
 */
export async function postLinearNotice(
  deps: Pick<LinearDeps, "apiUrl">,
  integration: IntegrationRecord,
  task: TaskRecord & { report_to: TaskSource },
  kind: NoticeKind,
): Promise<void> {
  const client = linearClient(integration, deps.apiUrl);
  const { issue_id, team_id } = task.report_to.ref;
  if (!issue_id) return;
  if (team_id && kind === "plan") await moveIssue(client, issue_id, team_id, "started");
  if (team_id && completes(task, kind)) await moveIssue(client, issue_id, team_id, "completed");
  await commentOnIssue(client, issue_id, trackerNotice(task, kind));
}
