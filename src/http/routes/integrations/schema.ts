import { z } from "zod";
import { INTEGRATION_KINDS } from "../../../domain/integrations/kinds.js";
import { INTEGRATION_TYPES } from "../../../domain/integrations/types.js";
import { label, opaqueId, timestamp } from "../../schemas.js";

const create = <T extends keyof typeof INTEGRATION_KINDS>(type: T) =>
  z.strictObject({
    type: z.literal(type),
    name: label(100),
    enabled: z.boolean().default(true),
    settings: INTEGRATION_KINDS[type].settings,
    secrets: INTEGRATION_KINDS[type].secrets.describe("write-only: never answered"),
  });

export const createIntegrationBody = z.discriminatedUnion("type", [
  create("slack"),
  create("linear"),
  create("jira"),
]);

export const patchIntegrationBody = z
  .strictObject({
    name: label(100).optional(),
    enabled: z.boolean().optional(),
    settings: z
      .record(z.string(), z.unknown())
      .optional()
      .describe("replaces the settings as a whole"),
    secrets: z
      .record(z.string(), z.string())
      .optional()
      .describe("replaces only the secrets named; write-only"),
  })
  .describe("Any fields; the result is validated as a whole, like a POST body.");

export const integrationParams = z.strictObject({ id: opaqueId });

export const integration = z
  .object({
    id: z.string(),
    type: z.enum(INTEGRATION_TYPES),
    name: z.string(),
    enabled: z.boolean(),
    settings: z.record(z.string(), z.unknown()),
    secrets_set: z
      .array(z.string())
      .describe("names of the secrets that are set; values are never answered"),
    endpoints: z
      .record(z.string(), z.string())
      .describe("paths on this service to enter in the vendor's app settings"),
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: "Integration" });
