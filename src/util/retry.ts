/**
 * Runs `work` up to `attempts` times, waiting `backoffMs`, then twice that, and so on between
 * tries; `onError` hears every failure, and a failure `retryable` refuses (or the last one)
 * is thrown. For the integration jobs' database and vendor calls.
 */
export async function withRetries<T>(
  attempts: number,
  backoffMs: number,
  retryable: (error: unknown) => boolean,
  onError: (error: unknown, attempt: number) => void,
  work: () => Promise<T>,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await work();
    } catch (error) {
      onError(error, attempt);
      if (attempt >= attempts || !retryable(error)) throw error;
      await new Promise((r) => setTimeout(r, backoffMs * 2 ** (attempt - 1)));
    }
  }
}
