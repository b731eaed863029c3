/*
 * The dashboard's one way to the API: same origin, JSON, the key in X-API-Key. Response
 * types come from the zod schemas that validate the server's answers (type-only imports:
 * nothing of the server is bundled), so a changed field is a type error here too.
 */
import type { z } from "zod";
import type { agent, agentSummary } from "../../src/http/routes/agents/schema.js";
import type { timelineRow, velocityReport } from "../../src/http/routes/analytics/schema.js";
import type { automation } from "../../src/http/routes/automations/schema.js";
import type { healthReport } from "../../src/http/routes/health-reports/schema.js";
import type { keyUsage, newKey } from "../../src/http/routes/keys/schema.js";
import type { listingSummary, skill, skillSummary } from "../../src/http/routes/skills/schema.js";
import type { task } from "../../src/http/routes/tasks/schema.js";
import type {
  linkStart,
  repository,
  workspace,
  workspaceWithRepos,
} from "../../src/http/routes/workspaces/schema.js";

export type Task = z.infer<typeof task>;
export type KeyUsage = z.infer<typeof keyUsage>;
export type NewKey = z.infer<typeof newKey>;
export type Workspace = z.infer<typeof workspace>;
export type WorkspaceWithRepos = z.infer<typeof workspaceWithRepos>;
export type Repository = z.infer<typeof repository>;
export type LinkStart = z.infer<typeof linkStart>;
export type AgentSummary = z.infer<typeof agentSummary>;
export type Agent = z.infer<typeof agent>;
export type SkillSummary = z.infer<typeof skillSummary>;
export type Skill = z.infer<typeof skill>;
export type Listing = z.infer<typeof listingSummary>;
export type Automation = z.infer<typeof automation>;
export type HealthReport = z.infer<typeof healthReport>;
export type Velocity = z.infer<typeof velocityReport>;
export type TimelineRow = z.infer<typeof timelineRow>;

/** One of the account's keys as `GET /keys` lists it (never the secret). */
export type KeyInfo = {
  id: string;
  name: string;
  prefix: string;
  created_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
};

/** One invalid field of a 400 answer (`details`), as the API words it. */
export type FieldProblem = { path: string; message: string };

/** An error answer of the API: its status, stable code, human message and field problems. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: FieldProblem[] = [],
  ) {
    super(message);
  }

  /** The problems by field, keyed by the path inside the body or query (`repos.0.clone_url`). */
  get fields(): Record<string, string> {
    const out: Record<string, string> = {};
    for (const d of this.details) {
      const key = d.path.replace(/^(body|query|path)\.?/, "") || d.path;
      out[key] ??= d.message;
    }
    return out;
  }
}

function problemsOf(details: unknown): FieldProblem[] {
  if (!Array.isArray(details)) return [];
  return details.flatMap((d: unknown) => {
    const o = d as { path?: unknown; message?: unknown } | null;
    return o && typeof o.path === "string" && typeof o.message === "string"
      ? [{ path: o.path, message: o.message }]
      : [];
  });
}

const STORAGE_KEY = "foreman.apiKey";

/** The key in use: session storage by default, local storage when the user chose "remember". */
export function storedKey(): string | null {
  return sessionStorage.getItem(STORAGE_KEY) ?? localStorage.getItem(STORAGE_KEY);
}

export function storeKey(key: string, remember: boolean): void {
  forgetKey();
  (remember ? localStorage : sessionStorage).setItem(STORAGE_KEY, key);
}

export function forgetKey(): void {
  sessionStorage.removeItem(STORAGE_KEY);
  localStorage.removeItem(STORAGE_KEY);
}

/** Called when the API says the key is no longer valid (revoked elsewhere): sign out. */
let onUnauthorized: () => void = () => {};
export function setUnauthorizedHandler(handler: () => void): void {
  onUnauthorized = handler;
}

/** Calls the API; resolves the parsed body (undefined for 204), rejects an ApiError. */
export async function api<T>(
  method: string,
  path: string,
  body?: unknown,
  options: { key?: string | null } = {},
): Promise<T> {
  const key = options.key === undefined ? storedKey() : options.key;
  const headers: Record<string, string> = { Accept: "application/json" };
  if (key) headers["X-API-Key"] = key;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let res: Response;
  try {
    res = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch {
    throw new ApiError(0, "network", "The service could not be reached. Check your connection.");
  }
  if (res.status === 204) return undefined as T;
  const text = await res.text();
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  if (!res.ok) {
    const err = (
      json as { error?: { code?: string; message?: string; details?: unknown } } | undefined
    )?.error;
    if (res.status === 401 && key) onUnauthorized();
    throw new ApiError(
      res.status,
      err?.code ?? "http_" + res.status,
      err?.message ?? `The service answered ${res.status} ${res.statusText}.`,
      problemsOf(err?.details),
    );
  }
  return json as T;
}

/** A query string from the defined values of `params`. */
export function query(params: Record<string, string | number | undefined | null>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params))
    if (v !== undefined && v !== null && v !== "") q.set(k, String(v));
  const s = q.toString();
  return s ? "?" + s : "";
}

/** The WebSocket URL of a task's event stream, on this origin. */
export function taskSocketUrl(taskId: string, since?: number): string {
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  return `${proto}//${location.host}/tasks/${encodeURIComponent(taskId)}/ws${since ? `?since=${since}` : ""}`;
}

/** A field's path as a person reads it: `repos.0.clone_url` → `clone_url`. */
function fieldName(path: string): string {
  const parts = path
    .replace(/^(body|query|path)\.?/, "")
    .split(".")
    .filter((p) => !/^\d+$/.test(p));
  return parts[parts.length - 1] || "request";
}

/** The readable text of any error, for the page: the API's message and each field's words. */
export function errorText(err: unknown): string {
  if (err instanceof ApiError)
    return err.details.length
      ? `${err.message.replace(/\.$/, "")}: ${err.details.map((d) => `${fieldName(d.path)}: ${d.message}`).join("; ")}.`
      : err.message;
  if (err instanceof Error) return err.message;
  return String(err);
}
