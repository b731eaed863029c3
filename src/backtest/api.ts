/*
 * The harness as a client of the service's HTTP API: the same calls a user makes
 * (docs/api.md). Errors carry the API's error message.
 */

export interface ApiClient {
  url: string;
  call<T>(method: string, path: string, body?: unknown): Promise<T>;
  text(path: string): Promise<string>;
}

export function apiClient(url: string, key: string): ApiClient {
  const base = url.replace(/\/+$/, "");
  async function request(method: string, path: string, body?: unknown): Promise<Response> {
    const headers: Record<string, string> = { "x-api-key": key };
    if (body !== undefined) headers["content-type"] = "application/json";
    const res = await fetch(`${base}${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (!res.ok) {
      const text = await res.text();
      let message = text.slice(0, 300);
      try {
        message = (JSON.parse(text) as { error?: { message?: string } }).error?.message ?? message;
      } catch {
        // not JSON
      }
      throw new Error(`${method} ${path}: ${res.status} ${message}`);
    }
    return res;
  }
  return {
    url: base,
    async call<T>(method: string, path: string, body?: unknown) {
      const res = await request(method, path, body);
      return (res.status === 204 ? undefined : await res.json()) as T;
    },
    async text(path) {
      return (await request("GET", path)).text();
    },
  };
}

/** The task fields the harness reads. */
export interface TaskView {
  id: string;
  status: string;
  phase: string;
  error: string | null;
  diff: string | null;
  created_at: string;
  updated_at: string;
  cost: { input_tokens: number; output_tokens: number; usd: number };
  checks: { fix_attempts: number } | null;
}
