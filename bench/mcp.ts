/*
 * get_task through the MCP door (/mcp, Streamable HTTP, the SDK's own client with one session)
 * against GET /tasks/{id} on the same service: the round trip of one caller, one request at
 * a time, so the figure is the latency an assistant sees. Both ask the same domain function
 * for the same task; the difference is the MCP framing (JSON-RPC, the SSE answer, the output
 * schema's JSON). Alternating rounds (REST, MCP, REST, MCP…) after a warm-up; the p50 of all
 * samples of each subject is compared. Target: MCP at most 2× REST.
 */
import { execFile } from "node:child_process";
import { mkdir } from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  activeCleanups,
  BenchError,
  Cleanup,
  summariseLatencies,
  type Benchmark,
  type BenchReport,
  type BenchSettings,
} from "./lib/harness.js";
import { startBenchStack } from "./lib/stack.js";

export const TARGET_RATIO = 2;
const CALLS_PER_ROUND = 400;
const WARMUP_CALLS = 200;
const run = promisify(execFile);

async function json(res: Response): Promise<Record<string, unknown>> {
  const body = (await res.json()) as Record<string, unknown>;
  if (!res.ok) throw new BenchError(`${res.status} ${JSON.stringify(body)}`);
  return body;
}

export const mcpBench: Benchmark = {
  name: "mcp",
  description: "get_task via /mcp vs GET /tasks/{id}: p50 round trip of one caller",
  async run(settings: BenchSettings): Promise<BenchReport> {
    const cleanup = new Cleanup();
    activeCleanups.add(cleanup);
    try {
      const stack = await startBenchStack(cleanup, "bench_mcp");
      const url = stack.service.http!.url;
      const signup = await json(
        await fetch(`${url}/keys/generate`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ name: "bench" }),
        }),
      );
      const key = String(signup.key);
      const headers = { "x-api-key": key, "content-type": "application/json" };
      const repo = path.join(stack.tmp, "repo");
      await mkdir(repo);
      await run("git", ["init", "-q", "-b", "main", repo]);
      await run("git", [
        "-C",
        repo,
        "-c",
        "user.email=b@example.com",
        "-c",
        "user.name=b",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "init",
      ]);
      const workspace = await json(
        await fetch(`${url}/workspaces`, {
          method: "POST",
          headers,
          body: JSON.stringify({ name: "bench", repos: [{ name: "acme/bench", clone_url: repo }] }),
        }),
      );
      // No workers: the task stays queued, so both subjects read the same document.
      const task = await json(
        await fetch(`${url}/tasks`, {
          method: "POST",
          headers,
          body: JSON.stringify({
            workspace_id: workspace.id,
            repo_id: "acme/bench",
            description: "A task to read",
          }),
        }),
      );
      const id = String(task.id);

      const client = new Client({ name: "bench", version: "1.0.0" });
      await client.connect(
        new StreamableHTTPClientTransport(new URL(`${url}/mcp`), {
          requestInit: { headers: { "x-api-key": key } },
        }),
      );
      cleanup.defer("close MCP client", () => client.close());

      const rest = async () => {
        const body = await json(await fetch(`${url}/tasks/${id}`, { headers }));
        if (body.id !== id) throw new BenchError("REST answered another task");
      };
      const mcp = async () => {
        const result = await client.callTool({ name: "get_task", arguments: { id } });
        if (result.isError || (result.structuredContent as { id?: string })?.id !== id)
          throw new BenchError(`MCP get_task failed: ${JSON.stringify(result.content)}`);
      };
      const timed = async (call: () => Promise<void>, n: number) => {
        const samples = new Float64Array(n);
        for (let i = 0; i < n; i++) {
          const started = performance.now();
          await call();
          samples[i] = performance.now() - started;
        }
        return samples;
      };

      await timed(rest, WARMUP_CALLS);
      await timed(mcp, WARMUP_CALLS);
      const restRounds: Float64Array[] = [];
      const mcpRounds: Float64Array[] = [];
      for (let round = 0; round < settings.rounds; round++) {
        restRounds.push(await timed(rest, CALLS_PER_ROUND));
        mcpRounds.push(await timed(mcp, CALLS_PER_ROUND));
      }
      const restSummary = summariseLatencies("GET /tasks/{id}", restRounds);
      const mcpSummary = summariseLatencies("get_task via /mcp", mcpRounds);
      const ratio = mcpSummary.p50Ms / restSummary.p50Ms;
      return {
        subjects: [],
        latencies: [restSummary, mcpSummary],
        checks: [
          {
            name: "MCP get_task p50 / REST GET /tasks/{id} p50",
            value: ratio,
            target: TARGET_RATIO,
            atMost: true,
            pass: ratio <= TARGET_RATIO,
            detail: `${mcpSummary.p50Ms.toFixed(2)} ms vs ${restSummary.p50Ms.toFixed(2)} ms (p99 ${mcpSummary.p99Ms.toFixed(2)} vs ${restSummary.p99Ms.toFixed(2)} ms)`,
          },
        ],
        info: { engine: stack.engine, calls_per_round: CALLS_PER_ROUND, rounds: settings.rounds },
      };
    } finally {
      await cleanup.run();
      activeCleanups.delete(cleanup);
    }
  },
};
