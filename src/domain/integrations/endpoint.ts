import type { Config } from "../../config/env.js";
import type { Models } from "../../db/models.js";
import type { Logger } from "../../util/logger.js";
import type { IntegrationType } from "./types.js";

/*
 * A vendor's signed endpoint, one shape for every part that sees it: the vendor's plugin
 * declares it (its handler takes the service's parts first), integrations/registry.ts binds
 * it to those parts once, the HTTP door mounts and documents it in a loop.
 */

/** A vendor request as its route reads it: the raw signed body, its path values and headers. */
export interface VendorRequest {
  params: Readonly<Record<string, string>>;
  /** Reads the raw body (413 over 1 MiB); a handler reads it once it knows the path holds. */
  readBody(): Promise<string>;
  /** A request header's value, "" when absent. */
  header(name: string): string;
}

/** What the vendor is answered. */
export interface VendorAnswer {
  status: number;
  body: unknown;
}

/** A bound handler: what the HTTP door calls. */
export type VendorHandler = (request: VendorRequest) => Promise<VendorAnswer>;

/**
 * One signed vendor endpoint, described for the OpenAPI document. The body is read raw (up
 * to 1 MiB) and checked by the handler: signature first (401), then its shape (400). `H` is
 * its handler: bound (the default), or in the vendor's plugin taking the service's parts.
 */
export interface VendorEndpoint<H = VendorHandler, T extends IntegrationType = IntegrationType> {
  method: "post";
  /** Koa-router style path, e.g. `/integrations/:id/linear/webhook`. */
  path: string;
  /** The vendor: every path under `/integrations/{id}/<type>/` is read raw. */
  type: T;
  operationId: string;
  summary: string;
  description: string;
  /** The path values, each with its description (and its values, when they are few). */
  params: Readonly<Record<string, { description: string; values?: readonly string[] }>>;
  /** The headers the vendor signs and identifies a delivery with; the signature is required. */
  headers: Readonly<Record<string, { description: string; required: boolean }>>;
  /** The media types the vendor sends the body as. */
  contentTypes: readonly string[];
  /** What a 200 answers. */
  ok: string;
  handle: H;
}

/** What a vendor's OAuth install flow uses of the service. */
export interface InstallParts {
  models: Models;
  config: Config;
  logger: Logger;
}

/**
 * A vendor's OAuth install flow, in its folder; the HTTP door's install routes call it
 * (bound by src/context.ts). `start` and `callback` are the routes' paths.
 */
export interface VendorInstall {
  start: string;
  callback: string;
  /** A single-use state for one of the account's integrations, and where to send the user. */
  begin(parts: InstallParts, accountId: string, integrationId: string): Promise<unknown>;
  /** The vendor's redirect: the state used once, the app's credentials stored. */
  complete(
    parts: InstallParts,
    query: { state?: string | undefined; code?: string | undefined; error?: string | undefined },
  ): Promise<unknown>;
}

/** The install flows of the vendors that have one, by type. */
export type VendorInstalls = Readonly<Partial<Record<IntegrationType, VendorInstall>>>;
