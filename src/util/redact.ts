import { AsyncLocalStorage } from "node:async_hooks";

/**
 * Central secret redaction. Everything that leaves the process as text (log lines, task
 * events, error bodies, model prompts) passes through `redactText` or `redactDeep`.
 * Three layers:
 *
 * - the operator's secret values, registered at start or by the service itself
 *   (configuration, installation tokens): `registerSecret`, process-wide;
 * - an account's secret values (its MCP secrets), in a `SecretScope` that the pipeline
 *   enters where one task's stage runs (`withSecretScope`): applied only to text produced
 *   inside that scope, so one account's values never touch another account's text;
 * - patterns of well-known credential formats, everywhere.
 *
 * A secret value is also looked for in the forms the service itself could turn it into
 * (`secretForms`): base64 (standard and url-safe, at any byte offset of a longer encoded
 * text), hex, percent-encoding, a JSON string's escapes, and reversed.
 */
const REDACTED = "[REDACTED]";

/** Shorter values are not secrets worth hiding and would blank ordinary text. */
const MIN_SECRET_LENGTH = 6;

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

const toUrlSafe = (b64: string) => b64.replace(/\+/g, "-").replace(/\//g, "_");

/**
 * The stretches of base64 text that encode `bytes` alone when they sit `offset` bytes (0-2)
 * into a longer encoded text: the characters that also carry bits of the neighbours are left
 * out (at most 4 bits of the value stay visible on each side).
 */
function base64Cores(bytes: Buffer): string[] {
  const out: string[] = [];
  for (let offset = 0; offset < 3; offset++) {
    const encoded = Buffer.concat([Buffer.alloc(offset), bytes]).toString("base64");
    const first = Math.ceil((8 * offset) / 6);
    const end = Math.floor((8 * (offset + bytes.length)) / 6);
    const core = encoded.slice(first, end);
    out.push(core, toUrlSafe(core));
  }
  const whole = bytes.toString("base64");
  out.push(whole, toUrlSafe(whole), toUrlSafe(whole).replace(/=+$/, ""));
  return out;
}

/**
 * The value and the forms the service could turn it into, longest first (a longer form is
 * replaced before a shorter one inside it). Forms shorter than MIN_SECRET_LENGTH are left
 * out: they would match ordinary text.
 */
export function secretForms(value: string): string[] {
  const bytes = Buffer.from(value, "utf8");
  const percent = encodeURIComponent(value);
  const hex = bytes.toString("hex");
  const forms = [
    value,
    Array.from(value).reverse().join(""),
    JSON.stringify(value).slice(1, -1),
    percent,
    percent.replace(/%[0-9A-F]{2}/g, (m) => m.toLowerCase()),
    new URLSearchParams({ v: value }).toString().slice(2),
    encodeURI(value),
    hex,
    hex.toUpperCase(),
    ...base64Cores(bytes),
  ];
  return [...new Set(forms)]
    .filter((form) => form.length >= MIN_SECRET_LENGTH)
    .sort((a, b) => b.length - a.length);
}

/** Replaces every form of the given values (each list longest first). */
function replaceForms(text: string, formLists: Iterable<string[]>): string {
  let out = text;
  for (const forms of formLists) {
    for (const form of forms) {
      if (out.includes(form)) out = out.split(form).join(REDACTED);
    }
  }
  return out;
}

/**
 * One task's (one account's) secret values. Text produced inside `withSecretScope(scope, …)`
 * has them redacted, besides the operator's; text produced anywhere else never sees them.
 * Nothing keeps a scope once the work that entered it is over.
 */
export class SecretScope {
  private readonly forms = new Map<string, string[]>();

  /** `owner` says whose values these are (an account id), for logs and tests. */
  constructor(
    readonly owner: string,
    values: Iterable<string> = [],
  ) {
    for (const value of values) this.add(value);
  }

  /** Adds a value (ignored when shorter than 6 characters). */
  add(value: string | undefined | null): void {
    if (typeof value === "string" && value.length >= MIN_SECRET_LENGTH && !this.forms.has(value))
      this.forms.set(value, secretForms(value));
  }

  get size(): number {
    return this.forms.size;
  }

  /** The text with this scope's values (only) redacted. */
  redactOwn(text: string): string {
    return this.forms.size === 0 ? text : replaceForms(text, this.forms.values());
  }
}

/*
 * Process-wide by nature: the operator's values are the same for every task, and the scope
 * must reach every `redactText` caller without threading it through each signature, as a
 * request's context does (an AsyncLocalStorage, like github/delivery.ts's).
 */
const operatorForms = new Map<string, string[]>();
const scopes = new AsyncLocalStorage<SecretScope>();

/**
 * Runs `fn` (and all the asynchronous work it starts) inside `scope`: text redacted there has
 * the scope's values redacted too. An inner scope replaces an outer one: scopes never merge.
 */
export function withSecretScope<T>(scope: SecretScope, fn: () => T): T {
  return scopes.run(scope, fn);
}

/** The scope the caller runs in, if any. */
export function currentSecretScope(): SecretScope | undefined {
  return scopes.getStore();
}

/**
 * Registers an operator-level secret value (configuration, installation tokens) so that it
 * is scrubbed wherever it appears, in every task. An account's values belong in a
 * `SecretScope` instead.
 */
export function registerSecret(value: string | undefined | null): void {
  if (typeof value === "string" && value.length >= MIN_SECRET_LENGTH && !operatorForms.has(value))
    operatorForms.set(value, secretForms(value));
}

/** Removes a value registered with `registerSecret` (tests, expired tokens). */
export function forgetSecret(value: string): void {
  operatorForms.delete(value);
}

/** The text with the operator's values, the current scope's values and credential formats redacted. */
export function redactText(text: string): string {
  return redactTextIn(scopes.getStore(), text);
}

/** `redactText` for text of a task produced outside its scope's asynchronous flow. */
export function redactTextIn(scope: SecretScope | undefined, text: string): string {
  let out = scope ? scope.redactOwn(text) : text;
  out = replaceForms(out, operatorForms.values());
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
  if (value instanceof Error) return redactError(value) as T;
  if (value && typeof value === "object" && Object.getPrototypeOf(value) === Object.prototype) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      out[k] = SECRET_FIELD.test(k) && typeof v === "string" ? REDACTED : redactDeep(v, depth + 1);
    }
    return out as T;
  }
  return value;
}

/** A copy of an error with its message and stack redacted (its class's name kept). */
export function redactError(error: Error): Error {
  const copy = new Error(redactText(error.message));
  copy.name = error.name;
  if (error.stack) copy.stack = redactText(error.stack);
  return copy;
}
