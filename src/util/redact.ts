/**
 * Central secret redaction. Everything that leaves the process as text (log lines, task
 * events, error bodies, model prompts) passes through `redactText` or `redactDeep`.
 * Two layers: known secret values registered at start or at run time (configuration,
 * installation tokens), and patterns of well-known credential formats.
 */
const REDACTED = "[REDACTED]";

const PATTERNS: RegExp[] = [
  /\bfmn_[A-Za-z0-9_-]{20,}/g, // our own API keys
  /\bgh[pousr]_[A-Za-z0-9]{20,}/g, // GitHub tokens
  /\bgithub_pat_[A-Za-z0-9_]{20,}/g,
  /\bv1\.[0-9a-f]{40}\b/g, // legacy GitHub installation tokens
  /\bsk-ant-[A-Za-z0-9_-]{20,}/g, // Anthropic
  /\bsk-(?:proj-|svcacct-)?[A-Za-z0-9_-]{20,}/g, // OpenAI
  /-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----/g,
  /(\/\/[^/\s:@]+:)[^@\s/]+(@)/g, // credentials in URLs: scheme://user:secret@host
];

const known = new Set<string>();

/** Registers a secret value so that it is scrubbed wherever it appears. */
export function registerSecret(value: string | undefined | null): void {
  if (typeof value === "string" && value.length >= 6) known.add(value);
}

/** Removes a value registered with `registerSecret` (tests, expired tokens). */
export function forgetSecret(value: string): void {
  known.delete(value);
}

export function redactText(text: string): string {
  let out = text;
  for (const secret of known) {
    if (out.includes(secret)) out = out.split(secret).join(REDACTED);
  }
  for (const pattern of PATTERNS) {
    out = out.replace(pattern, (match, ...groups: unknown[]) =>
      // the URL pattern keeps scheme, user and host readable
      typeof groups[0] === "string" && typeof groups[1] === "string" && match.startsWith("//")
        ? `${groups[0]}${REDACTED}${groups[1]}`
        : REDACTED,
    );
  }
  return out;
}

const SECRET_FIELD =
  /^(x-api-key|authorization|cookie|set-cookie|password|secret|token|private_?key|api_?key|client_secret|key)$/i;

/** Deep copy with secret-named fields blanked and every string scrubbed. */
export function redactDeep<T>(value: T, depth = 0): T {
  if (depth > 12) return value;
  if (typeof value === "string") return redactText(value) as T;
  if (Array.isArray(value)) return value.map((v) => redactDeep(v, depth + 1)) as T;
  if (value instanceof Error) {
    const copy = new Error(redactText(value.message));
    copy.name = value.name;
    if (value.stack) copy.stack = redactText(value.stack);
    return copy as T;
  }
  if (value && typeof value === "object" && Object.getPrototypeOf(value) === Object.prototype) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      out[k] = SECRET_FIELD.test(k) && typeof v === "string" ? REDACTED : redactDeep(v, depth + 1);
    }
    return out as T;
  }
  return value;
}
