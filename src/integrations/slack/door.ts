import { WebClient, type Block, type KnownBlock } from "@slack/web-api";
import { z } from "zod";
import type { TaskRecord } from "../../db/models.js";
import { claimMarker, markerKind } from "../../durable/markers.js";
import { decide, type Decision } from "../../domain/tasks/gates.js";
import { getTask, integrationTasks, setReportThread } from "../../domain/tasks/store.js";
import { type TaskDeps } from "../../domain/tasks/model.js";
import { chatThreadTasks, respondToConversation } from "../../domain/tasks/conversations.js";
import { errors, isAppError } from "../../errors.js";
import { sanitizeUntrusted } from "../../text/sanitize.js";
import type { Logger } from "../../util/logger.js";
import { redactText } from "../../util/redact.js";
import { deliveryKey, outcomeSentence } from "../shared/tracker.js";
import {
  deliveryTaskId,
  noRepoText,
  REPO_NAME,
  usageText,
  type RequestTask,
  type SlackTaskRequest,
} from "../shared/task-request.js";
import {
  findIntegration,
  findSlackInstall,
  type IntegrationRecord,
} from "../../domain/integrations/store.js";
import type { SlackSecrets, SlackSettings } from "../../domain/integrations/kinds.js";
import type { TaskSource } from "../../domain/integrations/types.js";
import {
  checkReplayWindow,
  signedJson,
  signedShape,
  type ReplayWindow,
} from "../shared/signed-request.js";

/** A Slack event, slash command or button press. */
export const slackDeliveryMarker = markerKind(
  "slack",
  "slack-delivery",
  (integrationId: string, deliveryId: string) => [integrationId, deliveryId],
);

/*
 * The Slack door: a slash command (`/foreman task [owner/repo] <what>`, `status`, `help`) and
 * app mentions ask for tasks (queued at once, created by the task request job: Slack wants its
 * answer within 3 s); the task reports in a thread (plan and change summary with
 * Approve / Reject buttons, the result, failures); only Slack users the integration allows
 * may press a gate button. Every request is checked before anything is read from it: its
 * timestamp within 5 minutes of this clock either way (Slack's replay window; Bolt's
 * verifier only refuses old ones), then Slack's signature (Bolt's verifier: HMAC of the raw
 * body with the signing secret); a body that is not what the endpoint takes is a 400
 * (shared/signed-request.ts). Each delivery is acted on once.
 */

export interface SlackDeps {
  tasks: TaskDeps;
  logger: Logger;
  /** Queues a task asked for here (the task request job creates it). */
  requestTask: RequestTask;
  /** Slack's Web API base (tests point it at a fake); https://slack.com/api/ by default. */
  apiUrl?: string | undefined;
}

export const SLACK_ENDPOINTS = ["commands", "interactions", "events"] as const;
export type SlackEndpoint = (typeof SLACK_ENDPOINTS)[number];

export interface DoorAnswer {
  status: number;
  body: unknown;
}

const GATE_ACTIONS: Record<string, Decision> = {
  "gate:approve": "approve",
  "gate:reject": "reject",
  "gate:approve-diff": "approve-diff",
  "gate:reject-diff": "reject-diff",
};

/** A Web API client for the integration's bot, with Slack's own retry and backoff. */
export function slackClient(integration: IntegrationRecord, apiUrl?: string): WebClient {
  const secrets = integration.secrets as SlackSecrets;
  return new WebClient(secrets.bot_token, {
    ...(apiUrl ? { slackApiUrl: apiUrl } : {}),
    retryConfig: { retries: 3, factor: 2, minTimeout: 200, maxTimeout: 2000 },
    rejectRateLimitedCalls: false,
  });
}

function helpText(settings: SlackSettings): string {
  const c = settings.command;
  return [
    `*${c} task [owner/repo] <what to change>*: start a task (the channel's repository when none is named).`,
    `*${c} status [task id]*: where a task is, or the last tasks started here.`,
    `*${c} help*: this text.`,
    "Mention me with the change to start a task in a thread. The plan and the change come back here with Approve / Reject buttons.",
  ].join("\n");
}

/**
 * Queues a task asked for in Slack (a command's `task …`, a mention): answers what to tell
 * the requester now: a refusal saying what the request lacks, `queued`, or `duplicate` for a
 * retry of a delivery queued before. What needs the database (the delivery's claim, a named repository, the
 * allowance, the task) happens in the task request job, which answers in Slack itself.
 */
async function queueTask(
  deps: SlackDeps,
  integration: IntegrationRecord,
  input: {
    text: string;
    user: string;
    channel: string;
    thread_ts?: string | undefined;
    via: "command" | "mention";
    /** Slack's id of this delivery (trigger_id, event_id): its retries carry it. */
    delivery: string;
  },
): Promise<{ refusal: string } | "queued" | "duplicate"> {
  const settings = integration.settings as SlackSettings;
  const words = sanitizeUntrusted(input.text).split(/\s+/).filter(Boolean);
  const first = words[0] ?? "";
  const namesRepo = REPO_NAME.test(first);
  if (words.length === 0 || (namesRepo && words.length === 1))
    return { refusal: usageText(settings) };
  if (!namesRepo && !settings.channels[input.channel] && !settings.default_repo)
    return { refusal: noRepoText(settings, input.channel) };
  const queued = await deps.requestTask({
    type: "slack",
    integration_id: integration._id,
    task_id: deliveryTaskId(integration._id, input.delivery),
    claims: [slackDeliveryMarker(integration._id, input.delivery)],
    text: words.join(" "),
    user: input.user,
    channel: input.channel,
    ...(input.thread_ts ? { thread_ts: input.thread_ts } : {}),
    via: input.via,
  });
  return queued ? "queued" : "duplicate";
}

async function statusText(
  deps: SlackDeps,
  integration: IntegrationRecord,
  words: string[],
): Promise<string> {
  const id = words[0];
  if (id) {
    try {
      const task = await getTask(deps.tasks.models, integration.account_id, id);
      return `Task \`${task._id}\`: *${task.status}* (${task.phase})${task.pr_url ? ` — ${task.pr_url}` : ""}${task.error ? `\n${task.error}` : ""}`;
    } catch {
      return `No task \`${id}\` here.`;
    }
  }
  const recent = await integrationTasks(
    deps.tasks.models,
    integration.account_id,
    integration._id,
    5,
  );
  if (recent.length === 0) return "No tasks were started from Slack yet.";
  return recent
    .map((t) => `• \`${t._id}\` *${t.status}* (${t.phase}): ${t.description.slice(0, 80)}`)
    .join("\n");
}

const commandForm = z.looseObject({
  text: z.string().default(""),
  user_id: z.string().min(1),
  channel_id: z.string().min(1),
  team_id: z.string().optional(),
  trigger_id: z.string().optional(),
});

const interactionPayload = z.looseObject({
  type: z.string(),
  user: z.looseObject({ id: z.string() }),
  team: z.looseObject({ id: z.string() }).nullish(),
  channel: z.looseObject({ id: z.string() }).nullish(),
  trigger_id: z.string().optional(),
  actions: z
    .array(z.looseObject({ action_id: z.string(), value: z.string().optional() }))
    .default([]),
});

/** The event this door acts on; other event types have fields of other shapes (a `user_change`'s `user` is an object) and are only acknowledged. */
const mentionEvent = z.looseObject({
  type: z.literal("app_mention"),
  user: z.string().optional(),
  text: z.string().optional(),
  channel: z.string().optional(),
  ts: z.string().optional(),
  thread_ts: z.string().optional(),
  bot_id: z.string().optional(),
});

/** A message in a channel (message.channels): a reply in a task's thread is feedback. */
const messageEvent = z.looseObject({
  type: z.literal("message"),
  subtype: z.string().optional(),
  user: z.string().optional(),
  text: z.string().optional(),
  channel: z.string().optional(),
  ts: z.string().optional(),
  thread_ts: z.string().optional(),
  bot_id: z.string().optional(),
});

const eventEnvelope = z.looseObject({
  type: z.string(),
  challenge: z.string().optional(),
  team_id: z.string().optional(),
  event_id: z.string().optional(),
  event: z
    .union([
      mentionEvent,
      messageEvent,
      z.looseObject({ type: z.string().refine((t) => t !== "app_mention" && t !== "message") }),
    ])
    .optional(),
});

function isMention(event: { type: string }): event is z.infer<typeof mentionEvent> {
  return event.type === "app_mention";
}

function isMessage(event: { type: string }): event is z.infer<typeof messageEvent> {
  return event.type === "message";
}

/**
 * Whether a message is the integration's own (or another app's): a bot's message carries
 * `bot_id` (or the `bot_message` subtype), and the installed bot's user is ours. Such messages
 * never act, so nothing the service posts in a thread answers itself.
 */
function writtenByBot(
  integration: IntegrationRecord,
  event: { bot_id?: string | undefined; user?: string | undefined; subtype?: string | undefined },
): boolean {
  const botUser = integration.install?.bot_user_id;
  return Boolean(
    event.bot_id || event.subtype === "bot_message" || (botUser && event.user === botUser),
  );
}

/**
 * A person's reply in the thread a task reports in: feedback through the domain's one answer
 * to a conversation (respondToConversation: a revision at a gate, a follow-up after the
 * change), answered in the thread. Only users allowed to take the gates act; a mention from
 * anyone else is told so, other messages are left alone. The message is acted on once, though
 * Slack sends a mention in a thread both as `app_mention` and as `message`.
 */
async function answerInThread(
  deps: SlackDeps,
  integration: IntegrationRecord,
  tasks: TaskRecord[],
  input: { text: string; user: string; channel: string; thread_ts: string; ts: string },
  mention: boolean,
  logger: Logger,
): Promise<void> {
  const settings = integration.settings as SlackSettings;
  const say = (text: string) =>
    slackClient(integration, deps.apiUrl)
      .chat.postMessage({
        channel: input.channel,
        thread_ts: input.thread_ts,
        text: redactText(text),
      })
      .then(() => undefined)
      .catch((err: unknown) => logger.warn({ err }, "slack reply failed"));
  if (!settings.allowed_users.includes(input.user)) {
    logger.info({ user: input.user, task: tasks[0]?._id }, "slack thread feedback refused");
    if (mention)
      await say(
        "Only the Slack users allowed to approve this integration's tasks may revise or follow them up.",
      );
    return;
  }
  if (
    !(await claimMarker(
      deps.tasks.models,
      slackDeliveryMarker(integration._id, `msg:${input.channel}:${input.ts}`),
    ))
  )
    return;
  let answer: string;
  try {
    answer = (
      await respondToConversation(deps.tasks, integration.account_id, tasks, {
        text: sanitizeUntrusted(input.text),
        by: `Slack user <@${input.user}>`,
        name: `<@${input.user}>`,
        source: "slack",
      })
    ).reply;
  } catch (error) {
    if (!(isAppError(error) && error.status < 500)) throw error;
    answer = `Could not act on the feedback: ${error.message}`;
  }
  await say(answer);
}

/** The request comes from another Slack team than the one installed (or set) here. */
function wrongTeam(integration: IntegrationRecord, team: string | undefined): boolean {
  const expected = integration.install?.team_id ?? (integration.settings as SlackSettings).team_id;
  return Boolean(expected && team && team !== expected);
}

export interface SlackRequest {
  rawBody: string;
  signature: string;
  timestamp: string;
  contentType: string;
}

/** Slack's replay window: 5 minutes either way (https://api.slack.com/authentication/verifying-requests-from-slack). */
const SLACK_WINDOW: ReplayWindow = {
  pastMs: 5 * 60_000,
  futureMs: 5 * 60_000,
  words: "the 5-minute window",
};

const badSignature = () =>
  errors.unauthorized("The Slack request signature or timestamp is missing or invalid.");

/**
 * Slack's checks, before anything is read: the timestamp within the replay window (either
 * way), then the signature (Bolt's verifier: HMAC of "v0:<timestamp>:<raw body>"). Bolt is
 * loaded at the first Slack request, not at import: with Express under it, it took 0.4 s of
 * every process's start.
 */
async function checkSigned(secret: string | undefined, request: SlackRequest): Promise<void> {
  if (!/^\d{1,12}$/.test(request.timestamp)) throw badSignature();
  checkReplayWindow(
    Number(request.timestamp) * 1000,
    SLACK_WINDOW,
    "The Slack request's timestamp (X-Slack-Request-Timestamp)",
  );
  const { isValidSlackRequest } = await import("@slack/bolt");
  const valid =
    secret &&
    isValidSlackRequest({
      signingSecret: secret,
      body: request.rawBody,
      headers: {
        "x-slack-signature": request.signature,
        "x-slack-request-timestamp": Number(request.timestamp),
      },
    });
  if (!valid) throw badSignature();
}

/** A signed Slack request's body, read as its endpoint sends it. */
type SlackBody =
  | { endpoint: "events"; envelope: z.infer<typeof eventEnvelope> }
  | { endpoint: "commands"; command: z.infer<typeof commandForm> }
  | { endpoint: "interactions"; payload: z.infer<typeof interactionPayload> };

/**
 * Reads a signed body: events are JSON, commands a form, interactions a form whose `payload`
 * field is JSON. Anything else is a 400 (`invalid_json`, `validation_failed`).
 */
function readBody(endpoint: SlackEndpoint, rawBody: string): SlackBody {
  if (endpoint === "events")
    return {
      endpoint,
      envelope: signedShape(
        eventEnvelope,
        signedJson(rawBody, "Slack event"),
        "body",
        "Slack event",
      ),
    };
  const form = Object.fromEntries(new URLSearchParams(rawBody));
  if (endpoint === "commands")
    return {
      endpoint,
      command: signedShape(commandForm, form, "body", "Slack slash command"),
    };
  if (typeof form.payload !== "string")
    throw errors.validation([{ path: "body.payload", message: "Required" }]);
  return {
    endpoint,
    payload: signedShape(
      interactionPayload,
      signedJson(form.payload, "Slack interaction payload"),
      "payload",
      "Slack interaction",
    ),
  };
}

/** Handles one signed Slack request for an integration; the answer is what Slack gets. */
export async function handleSlack(
  deps: SlackDeps,
  integrationId: string,
  endpoint: SlackEndpoint,
  request: SlackRequest,
): Promise<DoorAnswer> {
  const integration = await findIntegration(deps.tasks.models, integrationId, "slack");
  const secrets = integration?.secrets as SlackSecrets | undefined;
  // One answer for an unknown integration and a bad signature: nothing is revealed.
  await checkSigned(secrets?.signing_secret, request);
  if (!integration) throw badSignature();
  return actOn(deps, integration, readBody(endpoint, request.rawBody), request);
}

/** The Slack team a request comes from, as each endpoint carries it. */
function teamOf(body: SlackBody): string | undefined {
  if (body.endpoint === "events") return body.envelope.team_id;
  if (body.endpoint === "commands") return body.command.team_id;
  return body.payload.team?.id;
}

/**
 * Handles one request to the Slack app's own URLs (`/integrations/slack/<endpoint>`), signed
 * with the app's signing secret (SLACK_SIGNING_SECRET): the app installed through Slack into
 * many workspaces, each request routed to the integration installed in its team.
 */
export async function handleSlackApp(
  deps: SlackDeps & { signingSecret: string | undefined },
  endpoint: SlackEndpoint,
  request: SlackRequest,
): Promise<DoorAnswer> {
  await checkSigned(deps.signingSecret, request);
  const body = readBody(endpoint, request.rawBody);
  if (body.endpoint === "events" && body.envelope.type === "url_verification")
    return { status: 200, body: { challenge: body.envelope.challenge } };
  const team = teamOf(body);
  const integration = team ? await findSlackInstall(deps.tasks.models, team) : null;
  if (!integration) {
    deps.logger.info({ team, slack: endpoint }, "slack request from a team no integration has");
    return {
      status: 200,
      body:
        endpoint === "commands"
          ? {
              response_type: "ephemeral",
              text: "This Slack workspace is not connected to a foreman account yet: add a Slack integration and install the app from it (POST /integrations/{id}/slack/install).",
            }
          : {},
    };
  }
  return actOn(deps, integration, body, request);
}

/** Acts on a verified Slack request for `integration`. */
async function actOn(
  deps: SlackDeps,
  integration: IntegrationRecord,
  body: SlackBody,
  request: SlackRequest,
): Promise<DoorAnswer> {
  const settings = integration.settings as SlackSettings;
  const logger = deps.logger.child({ integration: integration._id, slack: body.endpoint });
  if (!integration.enabled) return { status: 200, body: { text: "This integration is disabled." } };
  if (body.endpoint === "events")
    return actOnEvent(deps, integration, body.envelope, request, logger);
  if (body.endpoint === "commands")
    return actOnCommand(deps, integration, body.command, request, settings);
  return actOnGatePress(deps, integration, body.payload, settings, logger);
}

/** An event: a reply in a task's thread is feedback for it; a mention elsewhere asks for a task. */
async function actOnEvent(
  deps: SlackDeps,
  integration: IntegrationRecord,
  envelope: z.infer<typeof eventEnvelope>,
  request: SlackRequest,
  logger: Logger,
): Promise<DoorAnswer> {
  const { type, challenge, event, event_id, team_id } = envelope;
  if (type === "url_verification") return { status: 200, body: { challenge } };
  if (type !== "event_callback" || !event || !(isMention(event) || isMessage(event)))
    return { status: 200, body: {} };
  if (writtenByBot(integration, event)) return { status: 200, body: {} };
  if (wrongTeam(integration, team_id)) {
    logger.warn({ team: team_id }, "slack event from another team ignored");
    return { status: 200, body: {} };
  }
  if (!event.channel) return { status: 200, body: {} };
  const text = (event.text ?? "").replace(/<@[A-Z0-9]+>/g, " ").trim();
  // A reply in a thread a task reports in (a mention there too) is feedback for its task.
  const reply = event.thread_ts && event.ts && event.thread_ts !== event.ts && event.user;
  const conversation = reply
    ? await chatThreadTasks(
        deps.tasks.models,
        integration.account_id,
        integration._id,
        event.channel,
        event.thread_ts!,
      )
    : [];
  if (conversation.length > 0) {
    // Edits, deletions, joins: only a person's new message is feedback.
    if (isMention(event) || !event.subtype || event.subtype === "thread_broadcast")
      await answerInThread(
        deps,
        integration,
        conversation,
        {
          text,
          user: event.user!,
          channel: event.channel,
          thread_ts: event.thread_ts!,
          ts: event.ts!,
        },
        isMention(event),
        logger,
      );
    return { status: 200, body: {} };
  }
  // Outside a task's thread, only a mention asks for something.
  if (!isMention(event)) return { status: 200, body: {} };
  const thread_ts = event.thread_ts ?? event.ts;
  const answer = await queueTask(deps, integration, {
    text: text.replace(/^task\s+/i, ""),
    user: event.user ?? "unknown",
    channel: event.channel,
    thread_ts,
    via: "mention",
    delivery: deliveryKey(event_id ?? `${event.channel}:${event.ts}`, request.rawBody),
  });
  // What the request lacks is said in its thread (the request itself is answered at once);
  // a queued task announces itself there.
  if (typeof answer === "object")
    await slackClient(integration, deps.apiUrl)
      .chat.postMessage({ channel: event.channel, thread_ts, text: answer.refusal })
      .catch((err: unknown) => logger.warn({ err }, "slack reply failed"));
  return { status: 200, body: {} };
}

/** A slash command: `task …` asks for a task, `status` lists tasks, anything else is help. */
async function actOnCommand(
  deps: SlackDeps,
  integration: IntegrationRecord,
  cmd: z.infer<typeof commandForm>,
  request: SlackRequest,
  settings: SlackSettings,
): Promise<DoorAnswer> {
  if (wrongTeam(integration, cmd.team_id))
    return {
      status: 200,
      body: {
        response_type: "ephemeral",
        text: "This integration belongs to another Slack workspace.",
      },
    };
  const [verb = "help", ...words] = sanitizeUntrusted(cmd.text).split(/\s+/).filter(Boolean);
  if (verb.toLowerCase() === "task") {
    const answer = await queueTask(deps, integration, {
      text: words.join(" "),
      user: cmd.user_id,
      channel: cmd.channel_id,
      via: "command",
      // Slack gives every invocation its own trigger_id; the signed body is the fallback.
      delivery: deliveryKey(cmd.trigger_id, request.rawBody),
    });
    // A retry of a delivery queued before is answered as Slack's retries expect: nothing.
    if (answer === "duplicate") return { status: 200, body: {} };
    const text =
      answer === "queued"
        ? "On it: the task is being created; it will post here with its plan for approval."
        : answer.refusal;
    return { status: 200, body: { response_type: "ephemeral", text } };
  }
  if (verb.toLowerCase() === "status")
    return {
      status: 200,
      body: { response_type: "ephemeral", text: await statusText(deps, integration, words) },
    };
  return { status: 200, body: { response_type: "ephemeral", text: helpText(settings) } };
}

/** An interaction: a gate button pressed by an allowed user decides the task's gate. */
async function actOnGatePress(
  deps: SlackDeps,
  integration: IntegrationRecord,
  payload: z.infer<typeof interactionPayload>,
  settings: SlackSettings,
  logger: Logger,
): Promise<DoorAnswer> {
  const action = payload.actions[0];
  const decision = action ? GATE_ACTIONS[action.action_id] : undefined;
  if (payload.type !== "block_actions" || !action?.value || !decision)
    return { status: 200, body: {} };
  const client = slackClient(integration, deps.apiUrl);
  const channel = payload.channel?.id;
  const ephemeral = (text: string) =>
    channel
      ? client.chat
          .postEphemeral({ channel, user: payload.user.id, text })
          .then(() => undefined)
          .catch((err: unknown) => logger.warn({ err }, "slack ephemeral failed"))
      : Promise.resolve();
  if (
    wrongTeam(integration, payload.team?.id) ||
    !settings.allowed_users.includes(payload.user.id)
  ) {
    logger.info({ user: payload.user.id, task: action.value }, "slack gate press refused");
    await ephemeral(
      "You are not allowed to approve or reject tasks of this integration. Ask an account owner to add your Slack user to `allowed_users`.",
    );
    return { status: 200, body: {} };
  }
  if (
    payload.trigger_id &&
    !(await claimMarker(
      deps.tasks.models,
      slackDeliveryMarker(integration._id, payload.trigger_id),
    ))
  )
    return { status: 200, body: {} };
  try {
    await decide(
      deps.tasks,
      integration.account_id,
      action.value,
      decision,
      `Slack user <@${payload.user.id}>`,
    );
  } catch (error) {
    if (isAppError(error) && (error.status === 409 || error.status === 404)) {
      await ephemeral(redactText(error.message));
      return { status: 200, body: {} };
    }
    throw error;
  }
  const task = await getTask(deps.tasks.models, integration.account_id, action.value);
  const ref = (task.report_to as TaskSource | null | undefined)?.ref;
  if (channel)
    await client.chat
      .postMessage({
        channel,
        ...(ref?.thread_ts ? { thread_ts: ref.thread_ts } : {}),
        text: `<@${payload.user.id}> pressed *${decision}* on task \`${task._id}\`.`,
      })
      .catch((err: unknown) => logger.warn({ err }, "slack confirmation failed"));
  return { status: 200, body: {} };
}

type Blocks = (KnownBlock | Block)[];

function buttons(
  taskId: string,
  approve: Decision,
  reject: Decision,
  labels: [string, string],
): KnownBlock {
  return {
    type: "actions",
    elements: [
      {
        type: "button",
        style: "primary",
        text: { type: "plain_text", text: labels[0] },
        action_id: `gate:${approve}`,
        value: taskId,
      },
      {
        type: "button",
        style: "danger",
        text: { type: "plain_text", text: labels[1] },
        action_id: `gate:${reject}`,
        value: taskId,
      },
    ],
  };
}

const section = (text: string): KnownBlock => ({
  type: "section",
  text: { type: "mrkdwn", text: redactText(text).slice(0, 2900) },
});

/** What a task says in its Slack thread at a gate or at its end. */
export function slackNotice(
  task: TaskRecord,
  kind: "plan" | "diff" | "end",
): { text: string; blocks: Blocks } {
  if (kind === "plan") {
    const steps = (task.plan ?? [])
      .map((s) => `${s.step}. *${s.title}*: ${s.description}`)
      .join("\n");
    const text = `Plan for task \`${task._id}\`: ${task.plan_summary ?? ""}`;
    return {
      text,
      blocks: [
        section(`${text}\n${steps || "(no steps)"}`),
        buttons(task._id, "approve", "reject", ["Approve", "Reject"]),
      ],
    };
  }
  if (kind === "diff") {
    const files =
      (task.diff ?? "").match(/^diff --git a\/\S+ b\/(\S+)$/gm)?.map((l) => l.split(" b/")[1]) ??
      [];
    const checks = task.checks?.results ?? [];
    const text = `Change ready for task \`${task._id}\`: ${task.implement_summary ?? ""}`;
    return {
      text,
      blocks: [
        section(
          [
            text,
            files.length ? `Files: ${files.map((f) => `\`${f}\``).join(", ")}` : "",
            checks.length
              ? `Checks: ${checks.map((c) => `${c.ok ? "passed" : "failed"} ${c.name}`).join(", ")}`
              : "",
          ]
            .filter(Boolean)
            .join("\n"),
        ),
        buttons(task._id, "approve-diff", "reject-diff", ["Approve diff", "Reject diff"]),
      ],
    };
  }
  const text = outcomeSentence(task);
  return { text, blocks: [section(text)] };
}

/**
 * Answers a task request that could not become a task: a mention in its thread, a command
 * only to its user (as Slack shows the command's own errors).
 */
export async function replyInSlack(
  integration: IntegrationRecord,
  request: SlackTaskRequest,
  text: string,
  apiUrl?: string,
): Promise<void> {
  const client = slackClient(integration, apiUrl);
  const safe = redactText(text);
  if (request.via === "mention")
    await client.chat.postMessage({
      channel: request.channel,
      ...(request.thread_ts ? { thread_ts: request.thread_ts } : {}),
      text: safe,
    });
  else
    await client.chat.postEphemeral({ channel: request.channel, user: request.user, text: safe });
}

/** Posts a notice in the task's Slack thread; the first post opens the thread. */
export async function postSlackNotice(
  deps: Pick<SlackDeps, "tasks" | "logger" | "apiUrl">,
  integration: IntegrationRecord,
  task: TaskRecord & { report_to: TaskSource },
  kind: "plan" | "diff" | "end",
): Promise<void> {
  if (!(integration.secrets as SlackSecrets).bot_token)
    throw new Error(
      "the Slack integration has no bot token yet: install the app (POST /integrations/{id}/slack/install) or set secrets.bot_token",
    );
  const client = slackClient(integration, deps.apiUrl);
  const { text, blocks } = slackNotice(task, kind);
  const ref = task.report_to.ref;
  const res = await client.chat.postMessage({
    channel: ref.channel!,
    ...(ref.thread_ts ? { thread_ts: ref.thread_ts } : {}),
    text: redactText(text),
    blocks,
  });
  if (!ref.thread_ts && res.ts) await setReportThread(deps.tasks.models, task._id, res.ts);
}
