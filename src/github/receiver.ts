import { verify } from "@octokit/webhooks-methods";
import type { Probot } from "probot";
import type { Models } from "../db/models.js";
import { errors } from "../errors.js";
import type { Logger } from "../util/logger.js";
import type { GithubReceiver } from "../http/types.js";
import { isDuplicateKey } from "../db/duplicate-key.js";

/**
 * The door for GitHub deliveries: verify the signature (401 on mismatch), acknowledge a
 * delivery id seen before without acting on it (a unique insert decides, across
 * processes), then hand the event to Probot, whose handlers only enqueue work.
 */
export function createGithubReceiver(deps: {
  probot: Probot;
  secret: string;
  models: Models;
  logger: Logger;
}): GithubReceiver {
  return {
    async receive({ id, name, signature, rawBody }) {
      if (!signature || !(await verify(deps.secret, rawBody, signature).catch(() => false))) {
        throw errors.unauthorized("The webhook signature does not match the configured secret.");
      }
      if (!id || !name) {
        throw errors.validation([
          { path: "headers", message: "X-GitHub-Delivery and X-GitHub-Event are required." },
        ]);
      }
      let payload: unknown;
      try {
        payload = JSON.parse(rawBody);
      } catch {
        throw errors.invalidJson();
      }
      try {
        // The driver directly: no document hydration on the path GitHub waits on.
        const now = new Date();
        await deps.models.Once.collection.insertOne({
          _id: `delivery:${id}` as never,
          scope: "github-delivery",
          expires_at: null,
          created_at: now,
          updated_at: now,
        });
      } catch (error) {
        if (isDuplicateKey(error)) {
          deps.logger.info({ deliveryId: id, event: name }, "duplicate delivery ignored");
          return "duplicate";
        }
        throw error;
      }
      try {
        // Probot's own types want a specific event name; the signature was checked above.
        await deps.probot.receive({ id, name, payload } as Parameters<Probot["receive"]>[0]);
      } catch (error) {
        // Handling failed: forget the delivery so GitHub's redelivery is processed.
        await deps.models.Once.deleteOne({ _id: `delivery:${id}` }).catch(() => undefined);
        throw error;
      }
      return "accepted";
    },
  };
}
