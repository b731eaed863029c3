import type { Config } from "../config/env.js";
import type { IntegrationType } from "../domain/integrations/types.js";
import type { JobKind } from "../queue/scheduler.js";
import { jiraPlugin } from "./jira/index.js";
import { linearPlugin } from "./linear/index.js";
import type {
  IntegrationDeps,
  IntegrationJobDeps,
  IntegrationPlugin,
  VendorAnswer,
  VendorRequest,
  VendorRoute,
} from "./plugin.js";
import { slackPlugin } from "./slack/index.js";

/*
 * The vendors, one line each. Adding one is its folder (an `IntegrationPlugin`) and a line
 * here; a type of domain/integrations/types.ts without its line is a compile error.
 */
export const INTEGRATION_PLUGINS = {
  slack: slackPlugin,
  linear: linearPlugin,
  jira: jiraPlugin,
} satisfies { [T in IntegrationType]: IntegrationPlugin<T> };

/** The plugin of an integration type. */
export function pluginOf(type: IntegrationType): IntegrationPlugin {
  return INTEGRATION_PLUGINS[type];
}

/** Every vendor's plugin, in the registry's order. */
export function integrationPlugins(): IntegrationPlugin[] {
  return Object.values(INTEGRATION_PLUGINS);
}

/**
 * What the configuration sets for the vendors (config/env.ts): their API bases (tests point
 * them at fakes), the Slack app's signing secret, whether a Jira site may be local.
 */
export function vendorSettings(
  config: Config,
): Omit<IntegrationDeps, "tasks" | "logger" | "requestTask" | "backoffMs"> {
  return {
    slackApiUrl: config.slackApiUrl,
    slackSigningSecret: config.slackOAuth.signingSecret,
    linearApiUrl: config.linearApiUrl,
    allowLocalSites: config.allowLocalRepos,
  };
}

/** A vendor route bound to the service's parts: what the HTTP door mounts and documents. */
export type BoundVendorRoute = Omit<VendorRoute, "handle"> & {
  /** The folder all of the vendor's paths are under (`/integrations/{id}/<type>/`). */
  type: IntegrationType;
  handle(request: VendorRequest): Promise<VendorAnswer>;
};

/** Every vendor's routes, bound to `deps` once (src/context.ts), mounted by the HTTP door. */
export function vendorRoutes(deps: IntegrationDeps): BoundVendorRoute[] {
  return integrationPlugins().flatMap((plugin) =>
    plugin.routes.map(({ handle, ...spec }) => ({
      ...spec,
      type: plugin.type,
      handle: (request: VendorRequest) => handle(deps, request),
    })),
  );
}

/** Defines every vendor's own jobs on the scheduler. */
export function defineVendorJobs(
  deps: IntegrationJobDeps,
  define: <D>(kind: JobKind<D>) => void,
): void {
  for (const plugin of integrationPlugins()) plugin.jobs(deps, define);
}
