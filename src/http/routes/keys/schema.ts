import { z } from "zod";
import { pageQuery } from "../../paging.js";
import { label, opaqueId, timestamp } from "../../schemas.js";

export const generateKeyBody = z.strictObject({ name: label(100) });

export const newKey = z
  .object({
    id: z.string(),
    key: z.string().describe("the secret value; shown only in this response"),
    name: z.string(),
    created_at: timestamp,
  })
  .meta({ id: "NewApiKey" });

export const keyUsage = z
  .object({
    id: z.string(),
    name: z.string(),
    tier: z.enum(["free", "pro"]),
    tasks_this_month: z.number().int(),
    monthly_limit: z.number().int().nullable().describe("null means unlimited"),
    created_at: timestamp,
  })
  .meta({ id: "KeyUsage" });

export const keyParams = z.strictObject({ key_id: opaqueId });

export const keyListing = z
  .object({
    id: z.string(),
    name: z.string(),
    prefix: z
      .string()
      .describe("the first characters of the key, to recognise it; never the secret part"),
    created_at: timestamp,
    last_used_at: timestamp
      .nullable()
      .describe("when the key last authenticated a request, to the minute; null: never"),
    revoked_at: timestamp.nullable(),
  })
  .meta({ id: "ApiKey" });

export const listKeysQuery = pageQuery;
