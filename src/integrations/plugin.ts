import type { z } from "zod";
import type { Config } from "../config/env.js";
import type { TaskRecord } from "../db/models.js";
import type {
  VendorAnswer,
  VendorEndpoint,
  VendorInstall,
  VendorRequest,
} from "../domain/integrations/endpoint.js";
import type { IntegrationRecord } from "../domain/integrations/store.js";
import type { IntegrationKind, IntegrationType, TaskSource } from "../domain/integrations/types.js";
import type { Marker } from "../durable/markers.js";
import type { CreateTaskInput } from "../domain/tasks/create.js";
import type { TaskDeps } from "../domain/tasks/model.js";
import type { JobKind } from "../queue/scheduler.js";
import type { Logger } from "../util/logger.js";
import type { TaskRequest, RequestTask } from "./shared/task-request.js";
import type { NoticeKind } from "./shared/tracker.js";

/*
 * What a vendor (Slack, Linear, Jira, the next one) is to the service: one folder exporting
 * one `IntegrationPlugin`, listed once in registry.ts. The HTTP door mounts and documents
 * its routes, the scheduler defines its jobs, and the shared jobs (shared/notices.ts,
 * shared/task-requests.ts) report back through it, all from the registry: nothing outside
 * the vendor's folder names the vendor. Its settings and secrets (domain/integrations/
 * kinds.ts) stay below the doors, where the integration store needs them; its once-marker
 * kinds are declared in its folder (`markerKind`, durable/once.ts), the install states beside
 * the install flow that claims them (slack/install.ts); the plugin names them all.
 *
 * An inbound handler gets the task operations (`deps.tasks`), so what a vendor's message
 * asks of a task (a gate decision today; a revision or follow-up from a reply in the task's
 * thread or on its issue later) is one call of a domain function from the handler.
 */

/** What every vendor's handlers and jobs get, built once by src/context.ts from the config. */
export interface IntegrationDeps {
  tasks: TaskDeps;
  logger: Logger;
  /** Queues a task asked for at a vendor (the task request job creates it). */
  requestTask: RequestTask;
  /**
   * Each vendor's own settings, by type, as its plugin's `settings` reads them from the
   * config (registry.ts); the vendor's folder reads its entry (tests set it directly).
   */
  vendors: VendorSettings;
  /** Waits between attempts of the shared jobs (ms); tests shorten it. */
  backoffMs?: number;
}

/** Each vendor's settings from the config (its API base, its app's secret...), by type. */
export type VendorSettings = Readonly<Partial<Record<IntegrationType, object>>>;

/** What the shared jobs need: the vendors' settings, without the door's request queue. */
export type IntegrationJobDeps = Omit<IntegrationDeps, "requestTask">;

/** A vendor endpoint's handler as its plugin declares it: the service's parts first. */
export type PluginHandler = (
  deps: IntegrationDeps,
  request: VendorRequest,
) => Promise<VendorAnswer>;

/** One vendor: everything the service knows of it goes through this shape. */
export interface IntegrationPlugin<T extends IntegrationType = IntegrationType> {
  type: T;
  /** Its settings and write-only secrets (zod), as the /integrations resource checks them. */
  kind: IntegrationKind<z.ZodType, z.ZodType>;
  /** Its signed endpoints (no API key), mounted and documented by the HTTP door. */
  routes: readonly VendorEndpoint<PluginHandler, T>[];
  /** Its settings from the service's configuration (`IntegrationDeps.vendors[type]`). */
  settings(config: Config): object;
  /**
   * Defines its own background jobs on the scheduler (none of today's vendors has one: the
   * task request and notice jobs are shared, shared/task-requests.ts and shared/notices.ts).
   */
  jobs(deps: IntegrationJobDeps, define: <D>(kind: JobKind<D>) => void): void;
  /**
   * How its app is installed through the vendor's OAuth flow, when it has one (Slack: the
   * routes of /integrations/{id}/slack/install in http/routes/integrations call
   * slack/install.ts through `HttpDeps.vendorInstalls`); null when an account pastes its
   * secrets.
   */
  install: VendorInstall | null;
  /** Whether the pull request's merge is news for it (a tracker moves the issue to done). */
  reportsMerges: boolean;
  /** Posts a task's notice (its plan, its change, its end) where the task was asked for. */
  notice(
    deps: IntegrationJobDeps,
    integration: IntegrationRecord,
    task: TaskRecord & { report_to: TaskSource },
    kind: NoticeKind,
  ): Promise<void>;
  /**
   * The task a queued request asks for (shared/task-requests.ts creates it), or the text
   * saying why it cannot be one (no repository mapped, nothing asked).
   */
  taskInput(
    deps: IntegrationJobDeps,
    integration: IntegrationRecord,
    request: TaskRequest,
  ): Promise<CreateTaskInput | { text: string }>;
  /** Tells the vendor a requested task exists (Slack: the message that opens its thread). */
  announce(
    deps: IntegrationJobDeps,
    integration: IntegrationRecord,
    request: TaskRequest,
    repo: string,
  ): Promise<void>;
  /** Says something to whoever asked for a task, where they asked (a refusal, a failure). */
  reply(
    deps: IntegrationJobDeps,
    integration: IntegrationRecord,
    request: TaskRequest,
    text: string,
  ): Promise<void>;
  /** The once-marker kinds it owns (declared with `markerKind`, durable/once.ts). */
  markers: readonly ((...args: never[]) => Marker)[];
}
