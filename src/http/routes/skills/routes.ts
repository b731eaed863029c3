import { z } from "zod";
import {
  createSkill,
  deleteSkill,
  getListing,
  getSkill,
  installListing,
  listListings,
  listSkills,
  setPublished,
  BUILTIN_SKILLS,
  type ListingSummaryView,
  type SkillSummaryView,
  type SkillView,
} from "../../../domain/agents/skills.js";
import { pageQuery, positionKey } from "../../paging.js";
import { route, type AnyRoute } from "../../route.js";
import {
  createSkillBody,
  installListingBody,
  listing,
  listingParams,
  listingSummary,
  listListingsQuery,
  skill,
  skillParams,
  skillSummary,
} from "./schema.js";

export const skillRoutes: AnyRoute[] = [
  route({
    method: "get",
    path: "/skills",
    operationId: "listSkills",
    tag: "skills",
    summary: "The account's skills and the built-ins",
    description:
      "The account's own skills, newest first, then the built-ins. Items leave out `system_prompt_addition`; GET /skills/{name} has it.",
    auth: "key",
    query: pageQuery,
    status: 200,
    response: { description: "Skills", schema: z.array(skillSummary) },
    // Own skills by (created_at, id), then the built-ins by their fixed position.
    page: {
      key: (s: SkillSummaryView) =>
        s.builtin
          ? ["0", positionKey(BUILTIN_SKILLS.findIndex((b) => b.name === s.name))]
          : ["1", s.created_at, s.id],
    },
    async handler(_ctx, { principal, deps }) {
      return listSkills(deps.models, principal.accountId);
    },
  }),
  route({
    method: "post",
    path: "/skills",
    operationId: "createSkill",
    tag: "skills",
    summary: "Create a skill",
    description:
      "`name` is kebab-case, 1–64 characters, unique within the account and never a built-in's name (409 `conflict` otherwise).",
    auth: "key",
    body: createSkillBody,
    status: 201,
    response: { description: "The new skill", schema: skill },
    errors: [409],
    location: (s: SkillView) => `/skills/${s.name}`,
    async handler(_ctx, { body, principal, deps }) {
      return createSkill(deps.models, principal.accountId, body);
    },
  }),
  route({
    method: "get",
    path: "/skills/:name",
    operationId: "getSkill",
    tag: "skills",
    summary: "One skill, with its system_prompt_addition",
    description:
      "The account's own skill of that name, else the built-in; another account's is 404.",
    auth: "key",
    params: skillParams,
    status: 200,
    response: { description: "The skill", schema: skill },
    errors: [404],
    async handler(_ctx, { params, principal, deps }) {
      return getSkill(deps.models, principal.accountId, params.name);
    },
  }),
  route({
    method: "delete",
    path: "/skills/:name",
    operationId: "deleteSkill",
    tag: "skills",
    summary: "Delete one of the account's skills",
    description:
      "204. A built-in is 403 `forbidden`. Deleting a published skill removes it from the marketplace; copies other accounts installed stay theirs.",
    auth: "key",
    params: skillParams,
    status: 204,
    response: { description: "Deleted" },
    errors: [403, 404],
    async handler(_ctx, { params, principal, deps }) {
      await deleteSkill(deps.models, principal.accountId, params.name);
    },
  }),
  route({
    method: "post",
    path: "/skills/:name/publish",
    operationId: "publishSkill",
    tag: "marketplace",
    summary: "Publish one of the account's skills in the marketplace (extension)",
    description:
      "Every account can then read and install it under GET /marketplace/skills. Idempotent. A built-in is 403; a name the account has no skill of (another account's included) is 404.",
    auth: "key",
    params: skillParams,
    status: 200,
    response: { description: "The skill, `published: true`", schema: skill },
    errors: [403, 404],
    async handler(_ctx, { params, principal, deps }) {
      return setPublished(deps.models, principal.accountId, params.name, true);
    },
  }),
  route({
    method: "post",
    path: "/skills/:name/unpublish",
    operationId: "unpublishSkill",
    tag: "marketplace",
    summary: "Withdraw one of the account's skills from the marketplace (extension)",
    description:
      "It can no longer be read or installed; copies already installed stay with their accounts. Idempotent.",
    auth: "key",
    params: skillParams,
    status: 200,
    response: { description: "The skill, `published: false`", schema: skill },
    errors: [403, 404],
    async handler(_ctx, { params, principal, deps }) {
      return setPublished(deps.models, principal.accountId, params.name, false);
    },
  }),
  route({
    method: "get",
    path: "/marketplace/skills",
    operationId: "listMarketplaceSkills",
    tag: "marketplace",
    summary: "Browse published skills of every account (extension)",
    description:
      "Most recently published first, paged with `limit` and `before` (the last id of the previous page); `q` filters by name or description. Items leave out `system_prompt_addition`, and never show which account published them.",
    auth: "key",
    query: listListingsQuery,
    status: 200,
    response: { description: "Published skills", schema: z.array(listingSummary) },
    page: { key: (l: ListingSummaryView) => [l.published_at, l.id] },
    async handler(_ctx, { query, principal, deps, page }) {
      const filter = { ...query, limit: page.limit + 1, after: page.after };
      return listListings(deps.models, principal.accountId, filter);
    },
  }),
  route({
    method: "get",
    path: "/marketplace/skills/:id",
    operationId: "getMarketplaceSkill",
    tag: "marketplace",
    summary: "One published skill, with its system_prompt_addition (extension)",
    auth: "key",
    params: listingParams,
    status: 200,
    response: { description: "The published skill", schema: listing },
    errors: [404],
    async handler(_ctx, { params, principal, deps }) {
      return getListing(deps.models, principal.accountId, params.id);
    },
  }),
  route({
    method: "post",
    path: "/marketplace/skills/:id/install",
    operationId: "installMarketplaceSkill",
    tag: "marketplace",
    summary: "Install a published skill: a copy owned by the account (extension)",
    description:
      "Body `{}` or `{name}` to install under another name. The copy is the account's own skill: later changes to the original, its unpublishing or deletion do not affect it. 409 `conflict` when the account already has a skill of that name; 404 when the listing is unknown or no longer published.",
    auth: "key",
    params: listingParams,
    body: installListingBody,
    status: 201,
    response: { description: "The installed copy", schema: skill },
    errors: [404, 409],
    location: (s: SkillView) => `/skills/${s.name}`,
    async handler(_ctx, { params, body, principal, deps }) {
      return installListing(deps.models, principal.accountId, params.id, body.name);
    },
  }),
];
