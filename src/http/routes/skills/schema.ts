import { z } from "zod";
import { pageFields } from "../../paging.js";
import { opaqueId, timestamp } from "../../schemas.js";

/** A skill's handle (docs/api.md, "POST /skills"): kebab-case, 1..64 characters. */
export const skillName = z
  .string()
  .min(1)
  .max(64)
  .regex(
    /^[a-z0-9]+(-[a-z0-9]+)*$/,
    "must be kebab-case: lowercase letters and digits in words joined by single hyphens",
  );

export const createSkillBody = z.strictObject({
  name: skillName,
  description: z.string().trim().min(1).max(1000),
  system_prompt_addition: z
    .string()
    .trim()
    .min(1)
    .max(10_000)
    .describe("instruction text added to the system prompt of every task that names the skill"),
});

/** Any path name is looked up (404 when unknown); only a malformed one is 400. */
export const skillParams = z.strictObject({ name: opaqueId });

const skillFields = {
  id: z.string().describe("`builtin:<name>` for built-ins"),
  name: z.string(),
  description: z.string(),
  created_at: timestamp.describe("a fixed date for built-ins"),
  builtin: z.boolean().describe("extension: true for the service's built-in skills"),
  published: z.boolean().describe("extension: listed in the skill marketplace"),
  installed_from: z
    .string()
    .nullable()
    .describe("extension: the marketplace listing this skill was installed from, or null"),
};

export const skillSummary = z.object(skillFields).meta({ id: "SkillSummary" });

export const skill = z
  .object({ ...skillFields, system_prompt_addition: z.string() })
  .meta({ id: "Skill" });

const listingFields = {
  id: z.string().describe("the listing id, used to read and install it"),
  name: z.string(),
  description: z.string(),
  published_at: timestamp,
  installs: z.number().int().describe("how many times it was installed"),
  owned: z.boolean().describe("true when it is one of the caller's own skills"),
};

export const listingSummary = z.object(listingFields).meta({ id: "MarketplaceSkillSummary" });

export const listing = z
  .object({ ...listingFields, system_prompt_addition: z.string() })
  .meta({ id: "MarketplaceSkill" });

export const listListingsQuery = z.strictObject({
  ...pageFields,
  before: opaqueId
    .optional()
    .describe("a listing id: the page continues after it (older form of `cursor`)"),
  q: z
    .string()
    .trim()
    .min(1)
    .max(100)
    .optional()
    .describe("only listings whose name or description contains this text (case-insensitive)"),
});

export const listingParams = z.strictObject({ id: opaqueId });

export const installListingBody = z.strictObject({
  name: skillName
    .optional()
    .describe("install under this name instead of the listing's (to avoid a conflict)"),
});
