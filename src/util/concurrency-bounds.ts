import { AppError } from "../errors.js";

/*
 * Bounds on what one API key, and one account, may hold open at once in this process:
 * MCP wait_for_task calls, MCP sessions, WebSocket task streams (docs/operations.md,
 * "Bounds per key and account"). They are counted per process because what they hold
 * (requests, sockets, memory) is the process's: behind several web processes a key may
 * hold the bound in each.
 */

/** Who holds a slot. */
export interface Holder {
  keyId: string;
  accountId: string;
}

export interface BoundLimits {
  /** What is held, plural, for the refusal's message ("wait_for_task calls"). */
  what: string;
  perKey: number;
  /** The setting that sets `perKey`, named in the refusal. */
  perKeySetting: string;
  perAccount: number;
  perAccountSetting: string;
  /**
   * Retry-After when no hold of the full scope says when it ends: seconds, or asked of the
   * owner (which may know when a slot can be freed) for the scope that is full.
   */
  retryAfterS: number | ((scope: "key" | "account", holder: Holder) => number);
}

interface Hold {
  /** When the hold ends at the latest (ms since the epoch), when known. */
  endsAt: number | undefined;
}

/** The longest Retry-After a refusal names: a client checks back at least this often. */
const MAX_RETRY_AFTER_S = 600;

/** 429 `rate_limited` for a bound that is full (docs/api.md, "Bounds per key and account"). */
export function boundReached(message: string, retryAfterS: number, details?: unknown): AppError {
  return new AppError(
    429,
    "rate_limited",
    `${message}; retry in ${retryAfterS} second${retryAfterS === 1 ? "" : "s"}.`,
    details,
    { "Retry-After": String(retryAfterS) },
  );
}

/**
 * Counts the holds of each key and each account and refuses one past either bound. Cheap
 * and synchronous: a refusal costs no database call, so a flood is turned away before it
 * reaches anything shared.
 */
export class ConcurrencyBounds {
  private readonly scopes = new Map<string, Set<Hold>>();

  constructor(private readonly limits: BoundLimits) {}

  /** Holds of the key / account now (tests, metrics). */
  held(holder: Holder): { key: number; account: number } {
    return {
      key: this.scopes.get(`key:${holder.keyId}`)?.size ?? 0,
      account: this.scopes.get(`account:${holder.accountId}`)?.size ?? 0,
    };
  }

  /**
   * Takes one slot for the holder, ending at `endsAt` at the latest when known (it sets the
   * Retry-After of later refusals), or throws 429 `rate_limited`. The returned release may
   * be called any number of times.
   */
  acquire(holder: Holder, endsAt?: number): () => void {
    const { limits } = this;
    const keyScope = `key:${holder.keyId}`;
    const accountScope = `account:${holder.accountId}`;
    const full = (scope: string, limit: number) => (this.scopes.get(scope)?.size ?? 0) >= limit;
    if (full(keyScope, limits.perKey))
      throw this.refusal(holder, keyScope, `This API key already holds ${limits.perKey}`, {
        scope: "key",
        limit: limits.perKey,
        setting: limits.perKeySetting,
      });
    if (full(accountScope, limits.perAccount))
      throw this.refusal(holder, accountScope, `This account already holds ${limits.perAccount}`, {
        scope: "account",
        limit: limits.perAccount,
        setting: limits.perAccountSetting,
      });
    const hold: Hold = { endsAt };
    const scopes = [keyScope, accountScope];
    for (const scope of scopes) {
      const set = this.scopes.get(scope) ?? new Set<Hold>();
      set.add(hold);
      this.scopes.set(scope, set);
    }
    return () => {
      for (const scope of scopes) {
        const set = this.scopes.get(scope);
        if (!set?.delete(hold)) continue;
        if (set.size === 0) this.scopes.delete(scope);
      }
    };
  }

  private refusal(
    holder: Holder,
    scope: string,
    prefix: string,
    details: { scope: "key" | "account"; limit: number; setting: string },
  ): AppError {
    const now = Date.now();
    let first = Infinity;
    for (const hold of this.scopes.get(scope) ?? [])
      if (hold.endsAt !== undefined) first = Math.min(first, hold.endsAt);
    const { retryAfterS } = this.limits;
    const seconds = Number.isFinite(first)
      ? (first - now) / 1000
      : typeof retryAfterS === "number"
        ? retryAfterS
        : retryAfterS(details.scope, holder);
    const retry = Math.min(MAX_RETRY_AFTER_S, Math.max(1, Math.ceil(seconds)));
    return boundReached(
      `${prefix} ${this.limits.what} open in this process, its bound (${details.setting})`,
      retry,
      details,
    );
  }
}
