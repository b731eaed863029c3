import { performance } from "node:perf_hooks";

/** Runs `work` and gives the longest the event loop went without running a 5 ms timer. */
export async function longestStall<T>(
  work: () => Promise<T>,
): Promise<{ value: T; stallMs: number }> {
  let last = performance.now();
  let stallMs = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    stallMs = Math.max(stallMs, now - last);
    last = now;
  }, 5);
  try {
    const value = await work();
    stallMs = Math.max(stallMs, performance.now() - last);
    return { value, stallMs };
  } finally {
    clearInterval(timer);
  }
}
