import type { Config } from "../config/env.js";
import type { IntegrationType } from "../domain/integrations/types.js";
import type { JobKind } from "../queue/scheduler.js";
import { jiraPlugin } from "./jira/index.js";
import { linearPlugin } from "./linear/index.js";
import type { VendorEndpoint, VendorInstalls } from "../domain/integrations/endpoint.js";
import type {
  IntegrationDeps,
  IntegrationJobDeps,
  IntegrationPlugin,
  VendorSettings,
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

/** Each vendor's settings read from the config by its own plugin, by type. */
export function vendorSettings(config: Config): VendorSettings {
  return Object.fromEntries(integrationPlugins().map((p) => [p.type, p.settings(config)]));
}

/** The install flows of the vendors that have one, for the HTTP door's install routes. */
export function vendorInstalls(): VendorInstalls {
  return Object.fromEntries(
    integrationPlugins().flatMap((p) => (p.install ? [[p.type, p.install]] : [])),
  );
}

/** Every vendor's routes, bound to `deps` once (src/context.ts), mounted by the HTTP door. */
export function vendorRoutes(deps: IntegrationDeps): VendorEndpoint[] {
  return integrationPlugins().flatMap((plugin) =>
    plugin.routes.map(({ handle, ...spec }): VendorEndpoint => ({
      ...spec,
      handle: (request) => handle(deps, request),
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
