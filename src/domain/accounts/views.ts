import type { Models, Tier } from "../../db/models.js";
import { generationMarker } from "../../durable/markers.js";
import { bumpMarker, bumpMarkerSoon, MarkerCache } from "../../durable/marker-cache.js";

/*
 * Per-process cache of what GET /keys/me reports about an account (tier, tasks this month).
 * The key itself is always looked up (revocation takes effect at once); the account view is
 * served from memory while the shared "accounts generation" marker is unchanged. Every write
 * to a tier or to usage bumps the marker and clears this process's entry at once; other
 * processes see the bump on their next poll (ACCOUNT_VIEW_POLL_MS). Quota claims never read
 * this cache: the limit is always decided on the database.
 */

const GENERATION_ID = generationMarker("accounts-generation");
/** Changes on unlimited tiers (one per task created) reach other processes this late at most. */
const COALESCE_MS = 100;

export interface AccountView {
  tier: Tier;
  tasksThisMonth: number;
  month: string;
}

const local = new Set<(accountId: string) => void>();

/**
 * Records that an account's tier or usage changed: clears the entry in this process and
 * bumps the shared marker for the others.
 */
export async function accountChanged(models: Models, accountId: string): Promise<void> {
  for (const listener of local) listener(accountId);
  await bumpMarker(models, GENERATION_ID);
}

/**
 * Like accountChanged, for frequent changes (task creation on unlimited tiers): this
 * process's entry is cleared at once, and the shared marker is bumped at most once per
 * COALESCE_MS for all of them.
 */
export function accountChangedSoon(models: Models, accountId: string): void {
  for (const listener of local) listener(accountId);
  bumpMarkerSoon(models, GENERATION_ID, COALESCE_MS);
}

export class AccountViewCache {
  private readonly cache: MarkerCache<AccountView>;
  private readonly listener = (accountId: string) => this.cache.forget(accountId);

  constructor(
    models: Models,
    private readonly load: (accountId: string, now: Date) => Promise<AccountView | null>,
    pollMs: number,
  ) {
    this.cache = new MarkerCache(models, GENERATION_ID, pollMs, (id) => load(id, new Date()));
  }

  /** Reads the marker once, then keeps polling it until `stop`. */
  async start(): Promise<void> {
    local.add(this.listener);
    await this.cache.start();
  }

  stop(): void {
    local.delete(this.listener);
    this.cache.stop();
  }

  /** The account's view, from memory when it is still current and of the month asked. */
  async get(accountId: string, month: string, now: Date): Promise<AccountView | null> {
    const view = await this.cache.get(accountId, (id) => this.load(id, now));
    if (!view || view.month === month) return view;
    this.cache.forget(accountId);
    return this.cache.get(accountId, (id) => this.load(id, now));
  }
}
