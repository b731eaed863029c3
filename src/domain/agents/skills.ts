import { afterFilter, type SortKey } from "../../util/paging.js";
import { collectionOf, type Models, type SkillDoc } from "../../db/models.js";
import { isDuplicateKey } from "../../util/duplicate-key.js";
import { errors } from "../../errors.js";
import { newId } from "../../util/ids.js";

/** The driver collections this module uses, typed by their records (db/models.ts). */
const skillsOf = (models: Models) => collectionOf<SkillRecord>(models.Skill);

/*
 * Skills: named instruction additions attached to a task (docs/api.md, "Skills"). Built-ins
 * live in code and are the same for every account; an account's own skills are documents whose
 * `_id` is `${account}:${name}`, so a duplicate name is a duplicate-key error (409), atomic on
 * every MongoDB-compatible server. The marketplace (release 1.2.0, an extension here) lists the
 * skills their owners published; installing one copies it into the installer's account.
 */

export interface SkillDefinition {
  name: string;
  description: string;
  system_prompt_addition: string;
}

export const BUILTIN_SKILLS: readonly SkillDefinition[] = [
  {
    name: "add-tests",
    description: "Add focused automated tests for the code the task touches.",
    system_prompt_addition:
      "Add automated tests with the repository's existing test framework and layout. Cover the behaviour the task changes, including one failure or edge case per function, and keep tests deterministic (no network, no sleeps, no real clocks). Do not change production code except to make it testable, and say so in the plan when you do.",
  },
  {
    name: "add-openapi-docs",
    description: "Document HTTP endpoints with an OpenAPI description kept next to the code.",
    system_prompt_addition:
      "Document every HTTP endpoint the task touches in the repository's OpenAPI description (create one at the conventional place if none exists): path, method, parameters, request body schema, every response status with its schema, and examples. Derive the schemas from the code's validation, never invent fields.",
  },
  {
    name: "dependency-audit",
    description: "Review dependencies for known vulnerabilities, abandonment and needless weight.",
    system_prompt_addition:
      "Audit the declared dependencies: flag versions with known vulnerabilities, unmaintained packages and dependencies used in one place that the standard library covers. Propose minimal, compatible upgrades, update lockfiles with the repository's own package manager, and never upgrade across a major version without saying why in the plan.",
  },
  {
    name: "add-logging",
    description: "Add structured, useful logging at the boundaries of the code the task touches.",
    system_prompt_addition:
      "Add structured logging with the logger the repository already uses (add none if there is one): one line per request, job or external call at its boundary, with a fixed message and a metadata object. Never log secrets, tokens, passwords or personal data, and do not log inside hot loops.",
  },
  {
    name: "add-error-handling",
    description: "Make failures explicit: validated input, clear errors, no swallowed exceptions.",
    system_prompt_addition:
      "Find places where errors are swallowed, ignored or turned into generic messages and handle them explicitly: validate input at boundaries, raise or return errors that say what failed and what to do, clean up resources on failure, and keep the existing error types and conventions of the repository.",
  },
  {
    name: "refactor-for-readability",
    description: "Simplify code without changing behaviour.",
    system_prompt_addition:
      "Refactor for readability without changing behaviour: smaller functions with clear names, removed duplication and dead code, consistent naming. Keep public interfaces unchanged and rely on the existing tests to prove behaviour is unchanged.",
  },
  {
    name: "performance-pass",
    description: "Find and fix measurable performance problems in the touched code.",
    system_prompt_addition:
      "Look for measurable performance problems in the code the task touches: repeated work in loops, N+1 queries, unbounded memory, synchronous I/O on hot paths. Fix only what you can justify, and keep behaviour identical.",
  },
  {
    name: "add-input-validation",
    description: "Validate every input at the boundary where it enters the code the task touches.",
    system_prompt_addition:
      "Validate input where it enters the code the task touches (HTTP handlers, CLI arguments, message consumers, file and environment readers) with the validation library the repository already uses. Reject bad input with an error that names the field and the rule, check types, ranges, lengths and formats, and add a test for one valid and one invalid input per boundary. Do not duplicate validation deeper inside the code.",
  },
  {
    name: "document-public-api",
    description:
      "Write doc comments for the public functions, types and endpoints the task adds or changes.",
    system_prompt_addition:
      "Every public function, type and endpoint the task adds or changes gets a doc comment in the repository's existing style: what it does, its parameters, what it returns, the errors it raises and, when usage is not obvious, a short example. Keep comments true to the code and do not comment private helpers whose names already say what they do.",
  },
  {
    name: "strict-typing",
    description: "Keep the change fully typed: no any, no unchecked casts, typed boundaries.",
    system_prompt_addition:
      "Keep the change fully typed: no any, no unchecked casts or type-ignore comments, no non-null assertions where a check is possible. Give public functions explicit parameter and return types, model variants as unions, and check data from outside (JSON, HTTP, environment) before treating it as a typed value. The type checker must pass without new suppressions.",
  },
  {
    name: "secure-coding",
    description:
      "Apply secure-coding defaults to the change: no injection, no secrets, least privilege.",
    system_prompt_addition:
      "Apply secure defaults to everything the change touches: parameterised queries, commands as argument arrays without a shell, escaped output, paths confined to their base folder, secrets read from configuration and never logged, least-privilege permissions, and safe failure (deny on error). Call out in the plan any security-relevant decision the change makes.",
  },
  {
    name: "minimal-diff",
    description:
      "Make the smallest change that does the task; no drive-by refactors or reformatting.",
    system_prompt_addition:
      "Make the smallest change that fully does the task. Do not reformat, rename, reorder imports or refactor code the task does not need to touch, and do not add dependencies unless the task cannot be done without them. If you notice other problems, mention them in the plan summary instead of fixing them.",
  },
];

const BUILTIN_BY_NAME = new Map(BUILTIN_SKILLS.map((s) => [s.name, s]));

/** Built-ins show this fixed creation time (they are part of the release, not of an account). */
export const BUILTIN_CREATED_AT = "2026-11-21T00:00:00.000Z";

/** A built-in skill by name, or undefined. */
export function findBuiltinSkill(name: string): SkillDefinition | undefined {
  return BUILTIN_BY_NAME.get(name);
}

export type SkillRecord = Omit<SkillDoc, "_id"> & {
  _id: string;
  created_at: Date;
  updated_at: Date;
};

/** A skill as lists show it: without its instruction text. */
export interface SkillSummaryView {
  id: string;
  name: string;
  description: string;
  created_at: string;
  builtin: boolean;
  published: boolean;
  installed_from: string | null;
}

/** One skill, with its instruction text. */
export interface SkillView extends SkillSummaryView {
  system_prompt_addition: string;
}

/** A published skill as the marketplace lists it: without its instruction text. */
export interface ListingSummaryView {
  id: string;
  name: string;
  description: string;
  published_at: string;
  installs: number;
  owned: boolean;
}

/** One published skill, with its instruction text. */
export interface ListingView extends ListingSummaryView {
  system_prompt_addition: string;
}

function skillKey(accountId: string, name: string): string {
  return `${accountId}:${name}`;
}

function builtinView(skill: SkillDefinition): SkillView {
  return {
    id: `builtin:${skill.name}`,
    name: skill.name,
    description: skill.description,
    system_prompt_addition: skill.system_prompt_addition,
    created_at: BUILTIN_CREATED_AT,
    builtin: true,
    published: false,
    installed_from: null,
  };
}

/** An account's skill as the API shows it. */
export function toSkillView(doc: SkillRecord): SkillView {
  return {
    id: doc.id,
    name: doc.name,
    description: doc.description,
    system_prompt_addition: doc.system_prompt_addition,
    created_at: new Date(doc.created_at).toISOString(),
    builtin: false,
    published: doc.published ?? false,
    installed_from: doc.installed_from ?? null,
  };
}

/** A skill as lists show it: `system_prompt_addition` left out. */
function skillSummary(view: SkillView): SkillSummaryView {
  const { system_prompt_addition: _addition, ...summary } = view;
  return summary;
}

async function findOwnSkill(
  models: Models,
  accountId: string,
  name: string,
): Promise<SkillRecord | null> {
  return skillsOf(models).findOne({ _id: skillKey(accountId, name) });
}

/**
 * The skill a name means for an account: its own skill of that name, else the built-in.
 * Own skills come first so one created before a later release added a built-in of the same
 * name stays reachable (new ones can never take a built-in's name).
 */
export async function findSkill(
  models: Models,
  accountId: string,
  name: string,
): Promise<SkillDefinition | undefined> {
  const own = await findOwnSkill(models, accountId, name);
  return own ?? findBuiltinSkill(name);
}

/** The skill a task names, with its instruction text, or undefined (none, or deleted since). */
export async function skillForTask(
  models: Models,
  task: { account_id: string; skill_name?: string | null | undefined },
): Promise<SkillDefinition | undefined> {
  if (!task.skill_name) return undefined;
  const skill = await findSkill(models, task.account_id, task.skill_name);
  return skill
    ? {
        name: skill.name,
        description: skill.description,
        system_prompt_addition: skill.system_prompt_addition,
      }
    : undefined;
}

/** The account's own skills, newest first, then the built-ins a name of theirs does not hide. */
export async function listSkills(models: Models, accountId: string): Promise<SkillSummaryView[]> {
  const docs = await skillsOf(models)
    .find({ account_id: accountId })
    .sort({ created_at: -1, _id: -1 })
    .toArray();
  const own = new Set(docs.map((d) => d.name));
  return [
    ...docs.map((d) => skillSummary(toSkillView(d))),
    ...BUILTIN_SKILLS.filter((s) => !own.has(s.name)).map((s) => skillSummary(builtinView(s))),
  ];
}

/** One skill with its instruction text; unknown (or another account's) is `not_found`. */
export async function getSkill(
  models: Models,
  accountId: string,
  name: string,
): Promise<SkillView> {
  const own = await findOwnSkill(models, accountId, name);
  if (own) return toSkillView(own);
  const builtin = findBuiltinSkill(name);
  if (builtin) return builtinView(builtin);
  throw errors.notFound("skill");
}

export interface CreateSkillInput {
  name: string;
  description: string;
  system_prompt_addition: string;
}

/**
 * Creates a skill owned by the account. A built-in's name, or a name the account already
 * uses, is 409 `conflict`; the check is the unique `_id`, so it holds under concurrency.
 */
export async function createSkill(
  models: Models,
  accountId: string,
  input: CreateSkillInput,
  installedFrom: string | null = null,
): Promise<SkillView> {
  if (findBuiltinSkill(input.name))
    throw errors.conflict(`"${input.name}" is the name of a built-in skill; choose another name.`);
  try {
    const doc = await models.Skill.create({
      _id: skillKey(accountId, input.name),
      id: newId("skill"),
      account_id: accountId,
      name: input.name,
      description: input.description,
      system_prompt_addition: input.system_prompt_addition,
      installed_from: installedFrom,
    });
    return toSkillView(doc.toObject() as SkillRecord);
  } catch (error) {
    if (isDuplicateKey(error))
      throw errors.conflict(`This account already has a skill named "${input.name}".`);
    throw error;
  }
}

/**
 * Deletes one of the account's skills (and so its marketplace listing; copies others
 * installed stay theirs). A built-in is 403 `forbidden`, anything else unknown 404.
 */
export async function deleteSkill(models: Models, accountId: string, name: string): Promise<void> {
  const result = await skillsOf(models).deleteOne({
    _id: skillKey(accountId, name),
  });
  if (result.deletedCount > 0) return;
  if (findBuiltinSkill(name))
    throw errors.forbidden(`"${name}" is a built-in skill; built-in skills cannot be deleted.`);
  throw errors.notFound("skill");
}

/**
 * Publishes or unpublishes one of the account's own skills in the marketplace. Idempotent;
 * a built-in is 403 (every account has it already), another account's skill 404.
 */
export async function setPublished(
  models: Models,
  accountId: string,
  name: string,
  published: boolean,
): Promise<SkillView> {
  const own = await findOwnSkill(models, accountId, name);
  if (!own) {
    if (findBuiltinSkill(name))
      throw errors.forbidden(
        `"${name}" is a built-in skill: every account has it, so it cannot be published or unpublished.`,
      );
    throw errors.notFound("skill");
  }
  if ((own.published ?? false) !== published) {
    const set = published
      ? { published: true, published_at: new Date(), updated_at: new Date() }
      : { published: false, published_at: null, updated_at: new Date() };
    await skillsOf(models).updateOne({ _id: own._id }, { $set: set });
  }
  const now = await findOwnSkill(models, accountId, name);
  if (!now) throw errors.notFound("skill"); // deleted meanwhile
  return toSkillView(now);
}

function toListingView(doc: SkillRecord, accountId: string): ListingView {
  return {
    id: doc.id,
    name: doc.name,
    description: doc.description,
    system_prompt_addition: doc.system_prompt_addition,
    published_at: new Date(doc.published_at ?? doc.created_at).toISOString(),
    installs: doc.install_count ?? 0,
    owned: doc.account_id === accountId,
  };
}

/** A published skill as the marketplace lists it: `system_prompt_addition` left out. */
function listingSummary(view: ListingView): ListingSummaryView {
  const { system_prompt_addition: _addition, ...summary } = view;
  return summary;
}

export interface ListingFilter {
  limit: number;
  before?: string | undefined;
  /** A cursor key `[published_at, id]` (util/paging.ts): the page continues after it. */
  after?: SortKey | undefined;
  q?: string | undefined;
}

function escapeRegex(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** Published skills of every account, most recently published first. */
export async function listListings(
  models: Models,
  accountId: string,
  filter: ListingFilter,
): Promise<ListingSummaryView[]> {
  const and: Record<string, unknown>[] = [{ published: true }];
  if (filter.q) {
    const pattern = { $regex: escapeRegex(filter.q), $options: "i" };
    and.push({ $or: [{ name: pattern }, { description: pattern }] });
  }
  if (filter.after) {
    and.push(afterFilter(filter.after, "published_at", "id"));
  } else if (filter.before) {
    const cursor = await skillsOf(models).findOne({
      id: filter.before,
      published: true,
    });
    if (!cursor)
      throw errors.validation([{ path: "query.before", message: "No such published skill." }]);
    and.push({
      $or: [
        { published_at: { $lt: cursor.published_at } },
        { published_at: cursor.published_at, id: { $lt: cursor.id } },
      ],
    });
  }
  const docs = await skillsOf(models)
    .find({ $and: and })
    .sort({ published_at: -1, id: -1 })
    .limit(filter.limit)
    .toArray();
  return docs.map((d) => listingSummary(toListingView(d, accountId)));
}

async function findListing(models: Models, listingId: string): Promise<SkillRecord> {
  const doc = await skillsOf(models).findOne({
    id: listingId,
    published: true,
  });
  if (!doc) throw errors.notFound("published skill");
  return doc;
}

/** One published skill with its instruction text (so it can be read before installing). */
export async function getListing(
  models: Models,
  accountId: string,
  listingId: string,
): Promise<ListingView> {
  return toListingView(await findListing(models, listingId), accountId);
}

/**
 * Installs a published skill: a copy owned by the installing account, under `name` or the
 * listing's name (409 when the account already has that name). The copy does not follow
 * later changes to the original, and outlives its unpublishing or deletion.
 */
export async function installListing(
  models: Models,
  accountId: string,
  listingId: string,
  name?: string,
): Promise<SkillView> {
  const listing = await findListing(models, listingId);
  const copy = await createSkill(
    models,
    accountId,
    {
      name: name ?? listing.name,
      description: listing.description,
      system_prompt_addition: listing.system_prompt_addition,
    },
    listing.id,
  );
  // A statistic: failing to count an install must not fail the install.
  await skillsOf(models)
    .updateOne({ id: listing.id }, { $inc: { install_count: 1 } })
    .catch(() => undefined);
  return copy;
}
