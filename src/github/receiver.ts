import { verify } from "@octokit/webhooks-methods";
import type { Probot } from "probot";
import type { Models } from "../db/models.js";
import { errors } from "../errors.js";
import { countWebhook } from "../metrics/index.js";
import type { Logger } from "../util/logger.js";
import type { GithubReceiver } from "../github-api/receiver.js";
import { inDelivery } from "./delivery.js";
import { payloadProblems } from "./payloads.js";

/**
 * The door for GitHub deliveries: verify the signature (401 on mismatch), then hand the
 * event to Probot, whose handlers only enqueue work. A delivery seen before acts on nothing
 * and is answered `duplicate` (unique inserts decide, across processes: github/delivery.ts).
 */

export function createGithubReceiver(deps: {
  probot: Probot;
  secret: string;
  models: Models;
  logger: Logger;
}): GithubReceiver {
  const receiver: GithubReceiver = {
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
      const problems = payloadProblems(name, payload);
      if (problems.length > 0) {
        deps.logger.warn(
          { deliveryId: id, event: name, problems },
          "signed GitHub delivery with a malformed body refused",
        );
        throw errors.validation(
          problems,
          `The ${name} delivery's body does not have the shape GitHub sends.`,
        );
      }
      // Duplicates are recognised where a delivery acts (github/delivery.ts), so a delivery
      // that acts on nothing costs no database write.
      const outcome = await inDelivery(deps.models, () =>
        // Probot's own types want a specific event name; the signature was checked above.
        deps.probot.receive({ id, name, payload } as Parameters<Probot["receive"]>[0]),
      );
      if (outcome.duplicate) {
        deps.logger.info({ deliveryId: id, event: name }, "duplicate delivery ignored");
        return "duplicate";
      }
      return "accepted";
    },
  };
  return {
    receive: (d) =>
      countWebhook(
        "github",
        () => receiver.receive(d),
        (outcome) => outcome,
      ),
  };
}
