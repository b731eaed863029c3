import { z } from "zod";
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
