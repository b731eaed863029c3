import { randomBytes } from "node:crypto";
import type { Models, Tier } from "../db/models.js";

/*
 * Per-process cache of what GET /keys/me reports about an account (tier, tasks this month).
 * The key itself is always looked up (revocation takes effect at once); the account view is
 * served from memory while the shared "accounts generation" marker is unchanged. Every write
 * to a tier or to usage bumps the marker and clears this process's entry at once; other
 * processes see the bump on their next poll (ACCOUNT_VIEW_POLL_MS). Quota claims never read
 * this cache: the limit is always decided on the database.
 */

const GENERATION_ID = "accounts-generation";
const MAX_AGE_MS = 30_000;

export interface AccountView {
  tier: Tier;
  tasksThisMonth: number;
  month: string;
}

interface Entry extends AccountView {
  generation: string | undefined;
  loadedAt: number;
}

const local = new Set<(accountId: string) => void>();

/**
 * Records that an account's tier or usage changed: clears the entry in this process and
 * bumps the shared marker for the others.
 */
export async function accountChanged(models: Models, accountId: string): Promise<void> {
  for (const listener of local) listener(accountId);
  try {
    await models.Once.collection.updateOne(
      { _id: GENERATION_ID as unknown as never },
      {
        $set: {
          scope: "account-views",
          value: randomBytes(8).toString("hex"),
          updated_at: new Date(),
        },
      },
      { upsert: true },
    );
  } catch (error) {
    // A concurrent first upsert may collide on _id; the marker changed either way.
    if ((error as { code?: unknown }).code !== 11000) throw error;
  }
}

const pending = new Map<Models, NodeJS.Timeout>();
const COALESCE_MS = 100;

/**
 * Like accountChanged, for frequent changes (task creation on unlimited tiers): this
 * process's entry is cleared at once, and the shared marker is bumped at most once per
 * COALESCE_MS for all of them, so other processes see the change within COALESCE_MS plus
 * their poll interval.
 */
export function accountChangedSoon(models: Models, accountId: string): void {
  for (const listener of local) listener(accountId);
  if (pending.has(models)) return;
  const timer = setTimeout(() => {
    pending.delete(models);
    accountChanged(models, accountId).catch(() => undefined);
  }, COALESCE_MS);
  timer.unref();
  pending.set(models, timer);
}

export class AccountViewCache {
  private readonly entries = new Map<string, Entry>();
  private generation: string | undefined;
  private timer: NodeJS.Timeout | undefined;
  private readonly listener = (accountId: string) => this.entries.delete(accountId);

  constructor(
    private readonly models: Models,
    private readonly load: (accountId: string, now: Date) => Promise<AccountView | null>,
    private readonly pollMs: number,
  ) {}

  /** Reads the marker once, then keeps polling it until `stop`. */
  async start(): Promise<void> {
    local.add(this.listener);
    await this.poll();
    this.timer = setInterval(() => void this.poll().catch(() => this.entries.clear()), this.pollMs);
    this.timer.unref();
  }

  stop(): void {
    local.delete(this.listener);
    if (this.timer) clearInterval(this.timer);
    this.entries.clear();
  }

  private async poll(): Promise<void> {
    const doc = await this.models.Once.collection.findOne(
      { _id: GENERATION_ID as unknown as never },
      { projection: { value: 1 } },
    );
    const value = typeof doc?.value === "string" ? doc.value : undefined;
    if (value !== this.generation) {
      this.generation = value;
      this.entries.clear();
    }
  }

  /** The account's view, from memory when it is still current. */
  async get(accountId: string, month: string, now: Date): Promise<AccountView | null> {
    const entry = this.entries.get(accountId);
    if (
      entry &&
      entry.generation === this.generation &&
      entry.month === month &&
      Date.now() - entry.loadedAt < MAX_AGE_MS
    ) {
      return entry;
    }
    // Remember the generation the load started under: a change during the load makes the
    // stored entry stale at once instead of serving it until the next change.
    const generation = this.generation;
    const view = await this.load(accountId, now);
    if (!view) return null;
    if (this.entries.size > 10_000) this.entries.clear();
    this.entries.set(accountId, { ...view, generation, loadedAt: Date.now() });
    return view;
  }
}
