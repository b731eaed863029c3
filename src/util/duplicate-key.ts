/**
 * True for the duplicate-key error (code 11000) of a unique insert: every "exactly once"
 * decision of the service is such an insert, and this error means another writer won.
 */
export function isDuplicateKey(error: unknown): boolean {
  return (
    typeof error === "object" && error !== null && (error as { code?: unknown }).code === 11000
  );
}
