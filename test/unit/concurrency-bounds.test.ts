import { describe, expect, it, vi } from "vitest";
import { AppError } from "../../src/errors.js";
import { ConcurrencyBounds } from "../../src/util/concurrency-bounds.js";

const limits = {
  what: "waits",
  perKey: 2,
  perKeySetting: "PER_KEY",
  perAccount: 3,
  perAccountSetting: "PER_ACCOUNT",
  retryAfterS: 7,
};
const a1 = { keyId: "k1", accountId: "a" };
const a2 = { keyId: "k2", accountId: "a" };
const b1 = { keyId: "k3", accountId: "b" };

function refusal(fn: () => unknown): AppError {
  try {
    fn();
  } catch (error) {
    if (error instanceof AppError) return error;
    throw error;
  }
  throw new Error("not refused");
}

describe("ConcurrencyBounds", () => {
  it("refuses a key past its bound, then its account past its own, never another account", () => {
    const bounds = new ConcurrencyBounds(limits);
    bounds.acquire(a1);
    bounds.acquire(a1);
    const byKey = refusal(() => bounds.acquire(a1));
    expect(byKey).toMatchObject({
      status: 429,
      code: "rate_limited",
      details: { scope: "key", limit: 2, setting: "PER_KEY" },
      headers: { "Retry-After": "7" },
    });
    expect(byKey.message).toMatch(
      /^This API key already holds 2 waits .*PER_KEY.*retry in 7 seconds\.$/,
    );
    bounds.acquire(a2);
    expect(refusal(() => bounds.acquire(a2)).details).toMatchObject({ scope: "account", limit: 3 });
    expect(() => bounds.acquire(b1)).not.toThrow();
    expect(bounds.held(a1)).toEqual({ key: 2, account: 3 });
  });

  it("gives a place back once however often it is released", () => {
    const bounds = new ConcurrencyBounds(limits);
    const release = bounds.acquire(a1);
    bounds.acquire(a1);
    release();
    release();
    expect(bounds.held(a1)).toEqual({ key: 1, account: 1 });
    bounds.acquire(a1);
    expect(() => bounds.acquire(a1)).toThrow(AppError);
  });

  it("names the end of the earliest hold as Retry-After when holds say when they end", () => {
    vi.useFakeTimers({ now: 1_000_000 });
    try {
      const bounds = new ConcurrencyBounds(limits);
      bounds.acquire(a1, 1_000_000 + 40_000);
      bounds.acquire(a1, 1_000_000 + 12_500);
      expect(refusal(() => bounds.acquire(a1)).headers).toEqual({ "Retry-After": "13" });
    } finally {
      vi.useRealTimers();
    }
  });

  it("asks its owner for Retry-After when a function is given", () => {
    const seen: string[] = [];
    const bounds = new ConcurrencyBounds({
      ...limits,
      retryAfterS: (scope) => (seen.push(scope), 0.2),
    });
    bounds.acquire(a1);
    bounds.acquire(a1);
    expect(refusal(() => bounds.acquire(a1)).headers).toEqual({ "Retry-After": "1" });
    expect(seen).toEqual(["key"]);
  });
});
