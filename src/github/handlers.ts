import type { Probot } from "probot";
import { autoReviewHandlers } from "./auto-review.js";
import { ciHandlers } from "./ci.js";
import { commandHandlers } from "./commands.js";
import type { GithubHandlerDeps, HandlerGroup } from "./deps.js";
import { followUpHandlers } from "./follow-ups.js";
import { installationHandlers } from "./installations.js";
import { labelHandlers } from "./issues.js";
import { outcomeHandlers } from "./outcomes.js";

/** Every handler group of the App; each registers the events it handles. */
const GROUPS: HandlerGroup[] = [
  installationHandlers,
  commandHandlers,
  labelHandlers,
  ciHandlers,
  outcomeHandlers,
  autoReviewHandlers,
  followUpHandlers,
];

/**
 * Registers the App's event handlers (docs/api.md, "Events the App handles") on the Probot
 * instance.
 */
export function registerHandlers(probot: Probot, deps: GithubHandlerDeps): void {
  for (const group of GROUPS) group(probot, deps);
}
