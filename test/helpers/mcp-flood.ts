import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

/*
 * The red team's MCP floods (issue #40) as a client of its own: run as a child process
 * (`node --import tsx test/helpers/mcp-flood.ts '<json FloodPlan>'`), so the flood's client
 * work does not run on the test's event loop, where the service under test answers the other
 * account's calls being measured. Prints a FloodReport as JSON.
 */

export interface FloodPlan {
  url: string;
  /** wait_for_task calls over one session of `keys[0]`, `concurrency` at a time. */
  waits?: { taskId: string; count: number; concurrency: number; timeoutS: number };
  /** initialize requests (new sessions) spread over `keys`, `concurrency` at a time. */
  sessions?: { count: number; concurrency: number };
  keys: string[];
}

export interface FloodReport {
  /** Outcomes of the waits: `reached:<why>`, an error code, or `failed`. */
  waits: Record<string, number>;
  /** HTTP statuses of the initialize requests. */
  sessions: Record<number, number>;
  /** One refusal of each kind, as answered. */
  sample: {
    wait?: unknown;
    session?: { status: number; retryAfter: string | null; body: unknown };
  };
  ms: number;
}

export type ErrorBody = {
  error: { code: string; message: string; details?: Record<string, unknown> };
};

/** `count` calls of `fn`, at most `concurrency` at a time. */
export async function flood<T>(count: number, concurrency: number, fn: (i: number) => Promise<T>) {
  const results: T[] = [];
  let next = 0;
  const lane = async () => {
    while (next < count) {
      const i = next++;
      results[i] = await fn(i);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, lane));
  return results;
}

/** An MCP client of the SDK on `url`/mcp with `key`. */
export async function connectMcp(url: string, key: string): Promise<Client> {
  const client = new Client({ name: "door-bounds-test", version: "1.0.0" });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${url}/mcp`), {
      requestInit: { headers: { "x-api-key": key } },
    }),
  );
  return client;
}

function callWait(
  client: Client,
  id: string,
  options: { timeout_s?: number; signal?: AbortSignal },
) {
  return client.callTool(
    { name: "wait_for_task", arguments: { id, until: "end", timeout_s: options.timeout_s ?? 60 } },
    undefined,
    { timeout: 120_000, ...(options.signal ? { signal: options.signal } : {}) },
  );
}

/**
 * A wait_for_task call: its structured answer, or the error body of its tool error (or of
 * the HTTP refusal of its request, which the SDK throws with the body in its message).
 */
export async function waitForTask(
  client: Client,
  id: string,
  options: { timeout_s?: number; signal?: AbortSignal } = {},
): Promise<{ ok: true; reached: string } | { ok: false; body: ErrorBody }> {
  let result: Awaited<ReturnType<typeof callWait>>;
  try {
    result = await callWait(client, id, options);
  } catch (error) {
    const body = /(\{"error".*\})\s*$/.exec((error as Error).message)?.[1];
    if (!body) throw error;
    return { ok: false, body: JSON.parse(body) as ErrorBody };
  }
  if (!result.isError)
    return { ok: true, reached: (result.structuredContent as { reached: string }).reached };
  const [content] = result.content as Array<{ text: string }>;
  return { ok: false, body: JSON.parse(content!.text) as ErrorBody };
}

/** Opens an MCP session with a bare initialize request: the HTTP status, headers and body. */
export async function initializeMcp(
  url: string,
  key: string,
): Promise<{ status: number; headers: Headers; body: string }> {
  const res = await fetch(`${url}/mcp`, {
    method: "POST",
    headers: {
      "x-api-key": key,
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
    },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: {
        protocolVersion: "2025-06-18",
        capabilities: {},
        clientInfo: { name: "flood", version: "1" },
      },
    }),
  });
  return { status: res.status, headers: res.headers, body: await res.text() };
}

async function run(plan: FloodPlan): Promise<FloodReport> {
  const started = performance.now();
  const report: FloodReport = { waits: {}, sessions: {}, sample: {}, ms: 0 };
  const count = <K extends string | number>(into: Record<K, number>, key: K) =>
    (into[key] = (into[key] ?? 0) + 1);
  const client = plan.waits ? await connectMcp(plan.url, plan.keys[0]!) : undefined;
  await Promise.all([
    plan.waits &&
      flood(plan.waits.count, plan.waits.concurrency, async () => {
        const answer = await waitForTask(client!, plan.waits!.taskId, {
          timeout_s: plan.waits!.timeoutS,
        }).catch(() => undefined);
        if (!answer) return count(report.waits, "failed");
        if (answer.ok) return count(report.waits, `reached:${answer.reached}`);
        report.sample.wait ??= answer.body;
        count(report.waits, answer.body.error.code);
      }),
    plan.sessions &&
      flood(plan.sessions.count, plan.sessions.concurrency, async (i) => {
        const res = await initializeMcp(plan.url, plan.keys[i % plan.keys.length]!).catch(
          () => undefined,
        );
        count(report.sessions, res?.status ?? 0);
        if (res?.status === 429)
          report.sample.session ??= {
            status: res.status,
            retryAfter: res.headers.get("retry-after"),
            body: JSON.parse(res.body) as unknown,
          };
      }),
  ]);
  await client?.close();
  report.ms = Math.round(performance.now() - started);
  return report;
}

if (process.argv[1]?.endsWith("mcp-flood.ts")) {
  const report = await run(JSON.parse(process.argv[2] ?? "{}") as FloodPlan);
  process.stdout.write(`${JSON.stringify(report)}\n`);
}
