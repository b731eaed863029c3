import { readFile } from "node:fs/promises";
import path from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentModel, roleOf, type Script } from "../helpers/agent-model.js";
import {
  fakeModelEnv,
  startFakeModel,
  toolResults,
  type FakeModel,
} from "../helpers/fake-model.js";
import { createGitRepo, type GitFixture } from "../helpers/git-repo.js";
import { addLocalWorkspace, startTestServer, type TestServer } from "../helpers/server.js";
import { startTask } from "../helpers/ws.js";

/*
 * The red team's probe (issue #40, item 2) as a regression test: a repository's stdio MCP
 * server (fixtures/mcp/schema-bomb-server.mjs, run in the real sandbox) lists a tool whose
 * input schema is a few kilobytes but fans out 2^24 through `$ref`. Before tools/schema-limits.ts
 * the service inlined it on its event loop and froze for seconds; now the tool is refused with
 * one log line naming the server, the tool and the limit, the server's other tool still works,
 * and another account's `GET /keys/me` keeps answering: its p99 over the whole task stays
 * under a second.
 */

const FAN_OUT = 24;
const P99_BOUND_MS = 1000;
/** Another account's requests: one every INTERVAL_MS, at most MAX_IN_FLIGHT at a time. */
const INTERVAL_MS = 40;
const MAX_IN_FLIGHT = 50;
/** Requests at most, so the measuring loop ends even if the task never does. */
const MAX_SAMPLES = 15_000;

let repo: GitFixture;
let model: FakeModel;
let server: TestServer;
let key: string;
let otherKey: string;
let workspaceId: string;

const script: Script = {
  plan: (_request, n) =>
    n === 0
      ? [{ name: "mcp__bomb__lookup", arguments: { term: "widget" } }]
      : [
          {
            name: "submit_plan",
            arguments: {
              summary: "Write a note.",
              steps: [{ title: "Write note.txt", description: "The note.", files: ["note.txt"] }],
            },
          },
        ],
  implement: (_request, n) =>
    n === 0
      ? [{ name: "write_file", arguments: { path: "note.txt", content: "note\n" } }]
      : [{ name: "finish", arguments: { summary: "Wrote it." } }],
  review: () => [
    { name: "submit_review", arguments: { verdict: "approve", summary: "Fine.", comments: [] } },
  ],
};

beforeAll(async () => {
  const bomb = await readFile(path.resolve("fixtures/mcp/schema-bomb-server.mjs"), "utf8");
  repo = await createGitRepo({
    "README.md": "a repository with a hostile MCP server\n",
    "tools/bomb-mcp.mjs": bomb,
    ".github/foreman.yml": [
      "verify: []",
      "mcp_servers:",
      "  bomb:",
      "    command: node",
      `    args: [tools/bomb-mcp.mjs, "${FAN_OUT}"]`,
      "  flood:",
      "    command: node",
      "    args: [tools/bomb-mcp.mjs, flood]",
      "",
    ].join("\n"),
  });
  model = await startFakeModel(agentModel(script));
  server = await startTestServer({
    workers: true,
    env: { ...fakeModelEnv(model, "sk-mcp-bomb-test-key-0123456789abcdef"), EVENT_POLL_MS: "50" },
  });
  ({ key } = await server.signup("hostile"));
  ({ key: otherKey } = await server.signup("bystander"));
  workspaceId = await addLocalWorkspace(server, key, { name: "acme/bomb", dir: repo.dir });
}, 60_000);

afterAll(async () => {
  await server?.stop();
  await model?.close();
  await repo?.remove();
});

/**
 * Calls `request` on a fixed schedule until `done()`, and gives each call's latency from the
 * time it was due, not from when it was sent: while the event loop is blocked no call is sent,
 * and the calls that fell due meanwhile count the wait (as a steady client would see it).
 */
async function latenciesOnSchedule(
  request: () => Promise<number>,
  done: () => boolean,
): Promise<{ samples: number[]; statuses: Set<number> }> {
  const samples: number[] = [];
  const statuses = new Set<number>();
  const inFlight = new Set<Promise<void>>();
  const start = performance.now();
  let due = 0;
  while (!done() && due < MAX_SAMPLES) {
    const now = performance.now();
    for (; start + due * INTERVAL_MS <= now && inFlight.size < MAX_IN_FLIGHT; due += 1) {
      const dueAt = start + due * INTERVAL_MS;
      const call: Promise<void> = request().then((status) => {
        samples.push(performance.now() - dueAt);
        statuses.add(status);
        inFlight.delete(call);
      });
      inFlight.add(call);
    }
    await new Promise((resolve) => setTimeout(resolve, INTERVAL_MS));
  }
  await Promise.all(inFlight);
  return { samples, statuses };
}

/** The q-quantile (0..1) of the samples, nearest rank. */
function quantile(samples: number[], q: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
}

describe("a repository's MCP tool schema that fans out through $ref", () => {
  it("is refused with a log line while another account's calls stay fast", async () => {
    const { stream } = await startTask(server, key, {
      workspace_id: workspaceId,
      repo_id: "acme/bomb",
      description: "Use the glossary",
      auto_approve: true,
    });
    let finished = false;
    const end = stream
      .waitFor((e) => e.event_type === "done" || e.event_type === "error", 180_000)
      .finally(() => (finished = true));

    // Another account's requests, on a steady schedule, for as long as the task runs; and the
    // longest the event loop was held (the service runs in this process).
    const loop = monitorEventLoopDelay({ resolution: 10 });
    loop.enable();
    const { samples, statuses } = await latenciesOnSchedule(
      async () => (await server.api("GET", "/keys/me", { key: otherKey })).status,
      () => finished,
    );
    const ended = await end;
    loop.disable();
    const held = loop.max / 1e6;
    const p99 = quantile(samples, 0.99);
    const worst = Math.max(...samples);
    process.stderr.write(
      `GET /keys/me of another account during the task: ${samples.length} requests, p50 ${quantile(samples, 0.5).toFixed(1)} ms, p99 ${p99.toFixed(1)} ms, max ${worst.toFixed(1)} ms, statuses ${[...statuses].join(", ")}; event loop held at most ${held.toFixed(0)} ms\n`,
    );
    const logs = stream.events.filter((e) => e.event_type === "log").map((e) => String(e.message));
    expect(ended.event_type, JSON.stringify(logs)).toBe("done");
    expect(p99).toBeLessThan(P99_BOUND_MS);
    expect(held).toBeLessThan(P99_BOUND_MS);
    expect([...statuses]).toEqual([200]);

    expect(
      logs.filter((l) =>
        /^MCP server bomb: tool mcp__bomb__bomb left out: its input schema/.test(l),
      ),
    ).toEqual([expect.stringMatching(/through \$ref .*limit/)]);
    // A server whose answer is one line of 64 MiB is stopped at 4 MiB; the task goes on.
    expect(logs).toContainEqual(
      expect.stringMatching(
        /^MCP server flood did not start \(it wrote a message longer than 4 MiB \(limit\)/,
      ),
    );
    const planning = model.requests.filter((r) => roleOf(r) === "plan");
    expect(planning[0]!.tools).toContain("mcp__bomb__lookup");
    expect(planning[0]!.tools).not.toContain("mcp__bomb__bomb");
    expect(toolResults(planning[1]!).map((r) => r.content)).toEqual([
      "widget: BOMB-SERVER-DEFINITION",
    ]);
    stream.close();
  }, 240_000);
});
