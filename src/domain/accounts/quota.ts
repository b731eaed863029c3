import {
  collectionOf,
  type AccountDoc,
  type Models,
  type QuotaSlotRecord,
  type Tier,
} from "../../db/models.js";
import { generationMarker } from "../../durable/markers.js";
import { unslottedTaskCount } from "../tasks/store.js";
import { errors } from "../../errors.js";
import { accountChanged, accountChangedSoon } from "./views.js";
import { isDuplicateKey } from "../../util/duplicate-key.js";

/*
 * Monthly task allowance. Each counted task holds one slot document whose `_id` is
 * `${account}:${month}:${slot}`; inserting it is the claim. A unique `_id` insert is atomic
 * on every MongoDB-compatible server (conditional updates are not on FerretDB), so the limit
 * holds however many processes create tasks at once. The account keeps a hint of the highest
 * slot so the next claim and the usage read start near the top.
 */

const LIMITS: Record<Tier, number | null> = { free: 10, pro: null };

/** The driver collections quotas use, typed by their records (db/models.ts). */
const slotsOf = (models: Models) => collectionOf<QuotaSlotRecord>(models.QuotaSlot);
const accountsOf = (models: Models) => collectionOf<AccountDoc>(models.Account);

/** The marker bumped by every tier change; caches of account tiers watch it. */
export const TIERS_MARKER = generationMarker("account-tiers-generation");

export function monthlyLimitFor(tier: Tier): number | null {
  return LIMITS[tier];
}

/** The UTC calendar month, `YYYY-MM`. */
export function utcMonth(date = new Date()): string {
  return date.toISOString().slice(0, 7);
}

function slotId(accountId: string, month: string, slot: number): string {
  return `${accountId}:${month}:${String(slot).padStart(9, "0")}`;
}

interface AccountUsage {
  _id: string;
  usage?: { month?: string | null; hint?: number | null } | null;
}

function hintFor(account: AccountUsage, month: string): number {
  return account.usage?.month === month ? Math.max(0, account.usage.hint ?? 0) : 0;
}

/**
 * Tasks counted for the account in the month of `now`: the slots of limited tiers plus the
 * tasks created without a slot (tiers without a limit claim none, see claimQuota).
 */
export async function currentUsage(
  models: Models,
  account: AccountUsage,
  now = new Date(),
): Promise<number> {
  const month = utcMonth(now);
  let top = hintFor(account, month);
  // The hint trails the truth by at most the claims that raced it; walk up to the top slot.
  while (
    await slotsOf(models).findOne(
      { _id: slotId(account._id, month, top + 1) },
      { projection: { _id: 1 } },
    )
  )
    top += 1;
  // Tasks of the month created on an unlimited tier hold no slot.
  return top + (await unslottedTaskCount(models, account._id, month));
}

export interface QuotaClaim {
  accountId: string;
  month: string;
  slots: number[];
  /** Gives the slots back, for a creation that failed after the claim. */
  release(): Promise<void>;
}

/**
 * Claims `count` tasks of the account's monthly allowance, all or nothing. Throws
 * `monthly_limit_reached` (429) when fewer than `count` remain. Every task creator calls this.
 */
/** How often a batch claim that lost the last slots to a concurrent claim tries again. */
const BATCH_RETRIES = 4;

export async function claimQuota(
  models: Models,
  accountId: string,
  count = 1,
  now = new Date(),
  options: { cachedTier?: Tier | undefined } = {},
): Promise<QuotaClaim> {
  if (!Number.isInteger(count) || count < 1) throw new Error(`invalid quota claim count ${count}`);
  const month = utcMonth(now);
  // Unlimited tiers have nothing to enforce: the tasks themselves (quota.slot null) are the
  // count, and only the account views need to hear of them (other processes in batches).
  const unlimited = (): QuotaClaim => {
    accountChangedSoon(models, accountId);
    return {
      accountId,
      month,
      slots: [],
      release: async () => accountChangedSoon(models, accountId),
    };
  };
  // A tier from a cache that follows tier changes within ACCOUNT_VIEW_POLL_MS: no read.
  if (options.cachedTier && monthlyLimitFor(options.cachedTier) === null) return unlimited();
  const account = await accountsOf(models).findOne(
    { _id: accountId },
    { projection: { tier: 1, usage: 1 } },
  );
  if (!account) throw errors.unauthorized();
  const limit = monthlyLimitFor(account.tier);
  if (limit === null) return unlimited();
  // Tasks created this month while the account was on an unlimited tier count too.
  const room = limit - (await unslottedTaskCount(models, accountId, month));
  if (count > room) throw errors.monthlyLimit(limit);

  const claimed: number[] = [];
  const release = async () => {
    if (claimed.length === 0) return;
    const lowest = Math.min(...claimed);
    await models.QuotaSlot.deleteMany({
      _id: { $in: claimed.map((s) => slotId(accountId, month, s)) },
    });
    claimed.length = 0;
    // Usage is read upward from the hint, so the hint must not stay above freed slots.
    await models.Account.updateOne(
      { _id: accountId, "usage.month": month, "usage.hint": { $gte: lowest } },
      { $set: { "usage.hint": lowest - 1 } },
    );
    await accountChanged(models, accountId);
  };

  let slot = hintFor(account, month);
  let rescanned = false;
  // A slot above the hint taken by someone else: another claim is running at the same time.
  let contended = false;
  let retries = 0;
  while (claimed.length < count) {
    slot += 1;
    if (slot > room) {
      // Above the limit. A released claim may have left a hole below it; look once from 1.
      if (!rescanned) {
        rescanned = true;
        slot = 0;
        continue;
      }
      await release();
      // Batches racing for the last slots can each hold part and all give up, so that none
      // gets in where one fits. A batch that met another claim tries again, apart in time.
      if (count > 1 && contended && retries < BATCH_RETRIES) {
        retries += 1;
        contended = false;
        rescanned = false;
        slot = 0;
        await new Promise((r) => setTimeout(r, 5 + Math.random() * 25 * retries));
        continue;
      }
      throw errors.monthlyLimit(limit);
    }
    try {
      const now_ = new Date();
      await slotsOf(models).insertOne({
        _id: slotId(accountId, month, slot),
        account_id: accountId,
        month,
        slot,
        created_at: now_,
        updated_at: now_,
      });
      claimed.push(slot);
    } catch (error) {
      if (!isDuplicateKey(error)) {
        await release();
        throw error;
      }
      if (!rescanned) contended = true;
    }
  }

  const top = Math.max(...claimed);
  // Best effort: a lost race here only leaves the hint low, which currentUsage walks past.
  await models.Account.updateOne(
    { _id: accountId, $or: [{ "usage.month": { $ne: month } }, { "usage.hint": { $lt: top } }] },
    { $set: { usage: { month, hint: top } } },
  );
  await accountChanged(models, accountId);
  return { accountId, month, slots: [...claimed], release };
}
