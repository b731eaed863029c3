import { accountChanged } from "./views.js";
import { bumpMarker } from "../../durable/marker-cache.js";
import { TIERS_MARKER } from "./quota.js";
import { collectionOf, TIERS, type Models, type Tier } from "../../db/models.js";
import { errors } from "../../errors.js";
import { listKeys, type KeyListing } from "./keys.js";
import { currentUsage, monthlyLimitFor } from "./quota.js";

/*
 * Operator views and actions on accounts. Nothing here is reachable over HTTP: the
 * operator CLI (src/cli/admin.ts) is the only caller.
 */

export interface AccountSummary {
  id: string;
  tier: Tier;
  created_at: string;
  tasks_this_month: number;
  monthly_limit: number | null;
  active_keys: number;
}

export interface AccountDetail extends AccountSummary {
  updated_at: string;
  keys: KeyListing[];
}

export interface TierChange {
  id: string;
  previous_tier: Tier;
  tier: Tier;
  monthly_limit: number | null;
}

export interface RevokedKey {
  id: string;
  account_id: string;
  name: string;
  revoked_at: string;
  /** True when the key had been revoked before this call; its revocation time is kept. */
  already_revoked: boolean;
}

interface AccountRecord {
  _id: string;
  tier: string;
  usage?: { month?: string | null; hint?: number | null } | null;
  created_at: Date;
  updated_at: Date;
}

/** An account's tier by id, or null for an unknown account (read on every task creation). */
export async function findTier(models: Models, accountId: string): Promise<Tier | null> {
  const account = await collectionOf<AccountRecord>(models.Account).findOne(
    { _id: accountId },
    { projection: { tier: 1 } },
  );
  return account && isTier(account.tier) ? account.tier : null;
}

/** True for the names of the account tiers ("free", "pro"). */
export function isTier(value: string): value is Tier {
  return (TIERS as readonly string[]).includes(value);
}

async function summarize(
  models: Models,
  account: AccountRecord,
  activeKeys: number,
  now: Date,
): Promise<AccountSummary> {
  const tier = account.tier as Tier;
  return {
    id: account._id,
    tier,
    created_at: account.created_at.toISOString(),
    tasks_this_month: await currentUsage(models, account, now),
    monthly_limit: monthlyLimitFor(tier),
    active_keys: activeKeys,
  };
}

/** Every account, oldest first, with its tier, this month's task count and active key count. */
export async function listAccounts(models: Models, now = new Date()): Promise<AccountSummary[]> {
  const [accounts, keys] = await Promise.all([
    models.Account.find({}, { tier: 1, usage: 1, created_at: 1, updated_at: 1 })
      .sort({ created_at: 1, _id: 1 })
      .lean<AccountRecord[]>(),
    models.ApiKey.find({ revoked_at: null }, { account_id: 1 }).lean(),
  ]);
  const activeKeys = new Map<string, number>();
  for (const key of keys) activeKeys.set(key.account_id, (activeKeys.get(key.account_id) ?? 0) + 1);
  return Promise.all(accounts.map((a) => summarize(models, a, activeKeys.get(a._id) ?? 0, now)));
}

/** One account with its figures and all its keys; throws not_found for an unknown id. */
export async function getAccount(
  models: Models,
  accountId: string,
  now = new Date(),
): Promise<AccountDetail> {
  const account = await models.Account.findById(accountId, {
    tier: 1,
    usage: 1,
    created_at: 1,
    updated_at: 1,
  }).lean<AccountRecord>();
  if (!account) throw errors.notFound("account");
  const keys = await listKeys(models, accountId);
  const active = keys.filter((k) => k.revoked_at === null).length;
  return {
    ...(await summarize(models, account, active, now)),
    updated_at: account.updated_at.toISOString(),
    keys,
  };
}

/** Moves an account to `tier`; the new allowance applies at once. Throws not_found for an unknown id. */
export async function setTier(models: Models, accountId: string, tier: Tier): Promise<TierChange> {
  if (!isTier(tier)) {
    throw errors.validation([{ path: "tier", message: `must be one of ${TIERS.join(", ")}` }]);
  }
  const before = await models.Account.findOneAndUpdate(
    { _id: accountId },
    { $set: { tier } },
    { runValidators: true, returnDocument: "before" },
  ).lean<{ _id: string; tier: string }>();
  if (!before) throw errors.notFound("account");
  await accountChanged(models, accountId);
  await bumpMarker(models, TIERS_MARKER);
  return {
    id: accountId,
    previous_tier: before.tier as Tier,
    tier,
    monthly_limit: monthlyLimitFor(tier),
  };
}

/**
 * Revokes any key by id, whatever its account (operator power). Revoking a revoked key is a
 * no-op that reports `already_revoked`; an unknown id throws not_found.
 */
export async function revokeAnyKey(
  models: Models,
  keyId: string,
  now = new Date(),
): Promise<RevokedKey> {
  const result = await models.ApiKey.updateOne(
    { key_id: keyId, revoked_at: null },
    { $set: { revoked_at: now } },
  );
  const doc = await models.ApiKey.findOne(
    { key_id: keyId },
    { key_id: 1, account_id: 1, name: 1, revoked_at: 1 },
  ).lean();
  if (!doc) throw errors.notFound("key");
  return {
    id: doc.key_id,
    account_id: doc.account_id,
    name: doc.name,
    revoked_at: (doc.revoked_at ?? now).toISOString(),
    already_revoked: result.matchedCount === 0,
  };
}
