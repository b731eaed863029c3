import { z } from "zod";
import {
  createAutomation,
  deleteAutomation,
  evaluateWebhook,
  getAutomation,
  listAutomations,
  mergePatch,
  toAutomationView,
  updateAutomation,
  type AutomationView,
} from "../../../domain/automations/automations.js";
import { errors } from "../../../errors.js";
import { parseInput, reservedKeys } from "../../middleware/validate.js";
import type { AppContext } from "../../types.js";
import { pageQuery } from "../../paging.js";
import { consume } from "../../rate-limit.js";
import { countWebhook } from "../../../metrics/index.js";
import { route, tasksOf, type AnyRoute } from "../../route.js";
import { noContent } from "../../schemas.js";
import {
  automation,
  automationBody,
  automationParams,
  patchAutomationBody,
  webhookPayload,
  webhookResult,
} from "./schema.js";

/**
 * Refuses `$`-keys and `__proto__`/`constructor`/`prototype` keys anywhere in the raw
 * trigger_config: the schema would drop a `__proto__` match rule silently (leaving an
 * automation that matches every payload), so the raw body is checked, not the parsed one.
 */
function refuseReservedKeys(ctx: AppContext): void {
  const raw = ctx.state.body as { trigger_config?: unknown } | undefined;
  const bad = reservedKeys(raw?.trigger_config, "body.trigger_config");
  if (bad.length > 0)
    throw errors.validation(
      bad.map((path) => ({
        path,
        message: "Keys may not start with $ or be __proto__, constructor or prototype.",
      })),
    );
}

export const automationRoutes: AnyRoute[] = [
  route({
    method: "post",
    path: "/automations",
    operationId: "createAutomation",
    tag: "automations",
    summary: "Create an automation",
    description:
      "A rule that creates tasks on a repository of the account: `cron` (a five-field schedule in an IANA time zone), `webhook` (payloads posted to /automations/webhook that match) or `ci_failure` (failed GitHub checks). Each firing claims one task of the account's monthly allowance. 404 when the repository is not one of the account's.",
    auth: "key",
    body: automationBody,
    status: 201,
    response: { description: "The new automation", schema: automation },
    errors: [404],
    location: (a: AutomationView) => `/automations/${a.id}`,
    async handler(ctx, { body, principal, deps }) {
      refuseReservedKeys(ctx);
      const created = await createAutomation(deps.models, deps.cron, principal.accountId, body);
      return toAutomationView(created);
    },
  }),
  route({
    method: "get",
    path: "/automations",
    operationId: "listAutomations",
    tag: "automations",
    summary: "The account's automations, newest first",
    description: "Paged (see Paging).",
    auth: "key",
    query: pageQuery,
    status: 200,
    response: { description: "Automations", schema: z.array(automation) },
    page: { key: (a: AutomationView) => [a.created_at, a.id] },
    async handler(_ctx, { principal, deps, page }) {
      const now = new Date();
      return (await listAutomations(deps.models, principal.accountId, page)).map((a) =>
        toAutomationView(a, now),
      );
    },
  }),
  // Before the /automations/:id routes, so "webhook" is never taken for an id.
  route({
    method: "post",
    path: "/automations/webhook",
    operationId: "automationWebhook",
    tag: "automations",
    summary: "Deliver an event to the webhook automations",
    description:
      "No key. Evaluates every enabled webhook automation (of every account) against the JSON payload and fires those that match; an automation with a `secret` matches only a body signed `X-Hub-Signature-256: sha256=<HMAC-SHA256 of the raw body>`. A payload that matches nothing is not an error. Rate-limited per client address (429 `rate_limited`).",
    auth: "none",
    body: webhookPayload,
    status: 200,
    response: { description: "What the payload fired", schema: webhookResult },
    errors: [413, 429],
    rateLimited: true,
    async handler(ctx, { body, deps }) {
      const deliver = async () => {
        await consume(ctx, deps.limiters.incomingWebhook, ctx.ip);
        return evaluateWebhook(
          tasksOf(deps),
          {
            payload: body,
            rawBody: ctx.state.rawBody ?? "",
            signature: ctx.get("x-hub-signature-256") || undefined,
          },
          deps.logger,
        );
      };
      return countWebhook("automation", deliver, (r) => (r.matched > 0 ? "matched" : "no_match"));
    },
  }),
  route({
    method: "get",
    path: "/automations/:id",
    operationId: "getAutomation",
    tag: "automations",
    summary: "One automation (extension)",
    auth: "key",
    params: automationParams,
    status: 200,
    response: { description: "The automation", schema: automation },
    errors: [404],
    async handler(_ctx, { params, principal, deps }) {
      return toAutomationView(await getAutomation(deps.models, principal.accountId, params.id));
    },
  }),
  route({
    method: "patch",
    path: "/automations/:id",
    operationId: "updateAutomation",
    tag: "automations",
    summary: "Change an automation",
    description:
      "Only the fields given change; `trigger_config`, when given, replaces the whole configuration. The automation that results is validated as a whole (400 like a POST). Changing a cron schedule, time zone or `enabled` re-schedules its job; the next slot counts from the change.",
    auth: "key",
    params: automationParams,
    body: patchAutomationBody,
    status: 200,
    response: { description: "The updated automation", schema: automation },
    errors: [404],
    async handler(ctx, { params, body, principal, deps }) {
      refuseReservedKeys(ctx);
      const current = await getAutomation(deps.models, principal.accountId, params.id);
      if (Object.keys(body).length === 0) return toAutomationView(current);
      const input = parseInput(automationBody, mergePatch(current, body), "body");
      const repoChanged = body.repo_id !== undefined || body.workspace_id !== undefined;
      const updated = await updateAutomation(deps.models, deps.cron, current, input, repoChanged);
      return toAutomationView(updated);
    },
  }),
  route({
    method: "delete",
    path: "/automations/:id",
    operationId: "deleteAutomation",
    tag: "automations",
    summary: "Delete an automation",
    description: "Also removes a cron automation's job. Tasks it created stay.",
    auth: "key",
    params: automationParams,
    status: 204,
    response: { description: "Deleted", schema: noContent },
    errors: [404],
    async handler(_ctx, { params, principal, deps }) {
      await deleteAutomation(deps.models, deps.cron, principal.accountId, params.id);
    },
  }),
];
