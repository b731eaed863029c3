import { randomBytes } from "node:crypto";
import { createLookupBatcher, type BatchedLookup } from "../../db/lookup-batcher.js";
import { collectionOf, type ApiKeyDoc, type Models, type Tier } from "../../db/models.js";
import { errors } from "../../errors.js";
import { newId, sha256 } from "../../util/ids.js";
import { afterFilter, type PageRequest } from "../../util/paging.js";
import { currentUsage, monthlyLimitFor, utcMonth } from "./quota.js";
import type { AccountView, AccountViewCache } from "./views.js";

export const KEY_PREFIX = "fmn_";

export interface Principal {
  accountId: string;
  keyId: string;
  keyName: string;
  keyCreatedAt: Date;
}

export interface NewKey {
  id: string;
  key: string;
  name: string;
  created_at: string;
}

/** A key value: 256 random bits, base64url, behind a recognisable prefix. */
export function generateKeyValue(): string {
  return `${KEY_PREFIX}${randomBytes(32).toString("base64url")}`;
}

/**
 * Creates a key for an account; the value is returned here once and stored only hashed.
 * With `maxKeys` (KEYS_PER_ACCOUNT), an account that already has that many unrevoked keys
 * gets 409 `conflict`: a state the caller changes by revoking one, not by waiting.
 */
export async function createKey(
  models: Models,
  accountId: string,
  name: string,
  maxKeys?: number,
): Promise<NewKey> {
  const active = () => models.ApiKey.countDocuments({ account_id: accountId, revoked_at: null });
  if (maxKeys !== undefined && (await active()) >= maxKeys) throw tooManyKeys(maxKeys);
  const key = generateKeyValue();
  const doc = await models.ApiKey.create({
    _id: sha256(key),
    key_id: newId("key"),
    account_id: accountId,
    name,
    prefix: key.slice(0, KEY_PREFIX.length + 6),
  });
  // Concurrent creations all passed the count above: each counts again after its insert,
  // and one that finds the account over the bound takes its own key back (two such may both
  // do; the account is never left over it). Nobody has seen this key's value yet.
  if (maxKeys !== undefined && (await active()) > maxKeys) {
    await models.ApiKey.deleteOne({ _id: doc._id });
    throw tooManyKeys(maxKeys);
  }
  return { id: doc.key_id, key, name: doc.name, created_at: doc.created_at.toISOString() };
}

function tooManyKeys(maxKeys: number) {
  return errors.conflict(
    `This account already has ${maxKeys} API keys, its bound (KEYS_PER_ACCOUNT); revoke one (DELETE /keys/{key_id}) before creating another.`,
  );
}

/** Creates an account on the free tier together with its first key. */
export async function createAccountWithKey(
  models: Models,
  name: string,
): Promise<NewKey & { account_id: string }> {
  const accountId = newId("acct");
  await models.Account.create({ _id: accountId, tier: "free" });
  const key = await createKey(models, accountId, name);
  return { ...key, account_id: accountId };
}

/** Resolves a presented key value to its principal; unknown or revoked keys give null. */
type KeyRow = ApiKeyDoc & { _id: string; created_at: Date };
/** When a key was last used, kept apart from the key (db/models.ts, keyUseSchema). */
interface KeyUseRow {
  _id: string;
  last_used_at: Date;
}
const keysOf = (models: Models) => collectionOf<KeyRow>(models.ApiKey);
const keyUsesOf = (models: Models) => collectionOf<KeyUseRow>(models.KeyUse);
const keyLookups = new WeakMap<Models, BatchedLookup<KeyRow>>();

export async function authenticateKey(models: Models, value: string): Promise<Principal | null> {
  if (!value.startsWith(KEY_PREFIX) || value.length > 200) return null;
  // This runs on every authenticated request: the lookups of concurrent requests go to the
  // database together (db/lookup-batcher.ts), and each still reads the key's current state,
  // so a revoked key answers 401 at once in every process.
  let lookup = keyLookups.get(models);
  if (!lookup) {
    lookup = createLookupBatcher<KeyRow>(collectionOf<{ _id: string }>(models.ApiKey), {
      key_id: 1,
      account_id: 1,
      name: 1,
      revoked_at: 1,
      created_at: 1,
    });
    keyLookups.set(models, lookup);
  }
  const doc = await lookup(sha256(value));
  if (!doc || doc.revoked_at) return null;
  noteKeyUse(models, doc);
  return {
    accountId: doc.account_id,
    keyId: doc.key_id,
    keyName: doc.name,
    keyCreatedAt: doc.created_at,
  };
}

/** `last_used_at` is kept to the minute: at most one write per key and minute, not per request. */
const LAST_USED_RESOLUTION_MS = 60_000;
const recentWrites = new Map<string, number>();

/** Records a use of the key at most once a minute per key and process (a separate document). */
function noteKeyUse(models: Models, doc: KeyRow, now = Date.now()): void {
  if (now - (recentWrites.get(doc._id) ?? 0) < LAST_USED_RESOLUTION_MS) return;
  if (recentWrites.size > 10_000) recentWrites.clear();
  recentWrites.set(doc._id, now);
  // Not awaited: the request does not wait for bookkeeping. Two processes inserting the
  // first use at once collide on `_id`; either time is right, so the loser is ignored.
  keyUsesOf(models)
    .updateOne({ _id: doc._id }, { $set: { last_used_at: new Date(now) } }, { upsert: true })
    .catch(() => undefined);
}

export interface KeyUsage {
  id: string;
  name: string;
  tier: Tier;
  tasks_this_month: number;
  monthly_limit: number | null;
  created_at: string;
}

/** The usage view of GET /keys/me: the account's tier and allowance seen through one key. */
export async function describeKey(
  models: Models,
  principal: Principal,
  views?: AccountViewCache,
  now = new Date(),
): Promise<KeyUsage> {
  const view = views
    ? await views.get(principal.accountId, utcMonth(now), now)
    : await loadAccountView(models, principal.accountId, now);
  if (!view) throw errors.unauthorized();
  return {
    id: principal.keyId,
    name: principal.keyName,
    tier: view.tier,
    tasks_this_month: view.tasksThisMonth,
    monthly_limit: monthlyLimitFor(view.tier),
    created_at: principal.keyCreatedAt.toISOString(),
  };
}

/** Reads an account's tier and this month's usage from the database. */
export async function loadAccountView(
  models: Models,
  accountId: string,
  now = new Date(),
): Promise<AccountView | null> {
  const account = await models.Account.findById(accountId, { tier: 1, usage: 1 }).lean();
  if (!account) return null;
  return {
    tier: account.tier as Tier,
    tasksThisMonth: await currentUsage(models, account, now),
    month: utcMonth(now),
  };
}

/** Revokes a key of the caller's account; another account's key is reported as unknown. */
/** True when the key (by its public id) is revoked or gone: open streams on it close. */
export async function isKeyWithdrawn(models: Models, keyId: string): Promise<boolean> {
  const key = await keysOf(models).findOne({ key_id: keyId }, { projection: { revoked_at: 1 } });
  return !key || Boolean(key.revoked_at);
}

export async function revokeKey(models: Models, accountId: string, keyId: string): Promise<void> {
  const result = await models.ApiKey.updateOne(
    { key_id: keyId, account_id: accountId, revoked_at: null },
    { $set: { revoked_at: new Date() } },
  );
  if (result.matchedCount === 0) throw errors.notFound("key");
}

export interface KeyListing {
  id: string;
  name: string;
  prefix: string;
  created_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
}

/**
 * The keys of an account, newest first, after `page.after` (`[created_at, id]`) and at most
 * `limit + 1` of them (http/paging.ts cuts the page). Values are never shown again.
 */
export async function listKeys(
  models: Models,
  accountId: string,
  page?: PageRequest,
): Promise<KeyListing[]> {
  const docs = await keysOf(models)
    .find({ account_id: accountId, ...afterFilter(page?.after, "created_at", "key_id") })
    .sort({ created_at: -1, key_id: -1 })
    .limit(page ? page.limit + 1 : 0)
    .toArray();
  const uses = await keyUsesOf(models)
    .find({ _id: { $in: docs.map((d) => d._id) } })
    .toArray();
  const lastUse = new Map(uses.map((u) => [u._id, u.last_used_at]));
  return docs.map((d) => ({
    id: d.key_id,
    name: d.name,
    prefix: d.prefix,
    created_at: d.created_at.toISOString(),
    last_used_at: lastUse.get(d._id)?.toISOString() ?? null,
    revoked_at: d.revoked_at ? d.revoked_at.toISOString() : null,
  }));
}
