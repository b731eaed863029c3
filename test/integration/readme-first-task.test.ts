import { spawn } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentModel, type Script } from "../helpers/agent-model.js";
import { fakeModelEnv, startFakeModel, type FakeModel } from "../helpers/fake-model.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

/*
 * The README's "First task" runs as written (issue 43): its ```sh blocks, in order, in one
 * bash with `set -euo pipefail`, against the real service (workers, sandbox, a local git
 * repository) with a scripted model at its HTTP boundary. The one change: the service's
 * address, http://127.0.0.1:3000 in the README, is this server's. A block that fails, a
 * command the service refuses (curl -f) or a task that fails fails the test.
 */

const README_URL = "http://127.0.0.1:3000";
const OLD_LINE = "export const greet = (name) => `Hi ${name}`;";
const NEW_LINE = "export const greet = (name) => `Hello, ${name}!`;";

const script: Script = {
  plan: () => [
    {
      name: "submit_plan",
      arguments: {
        summary: "Make greet() say Hello, <name>!",
        steps: [
          {
            title: "Change the greeting",
            description: "greet(name) returns `Hello, ${name}!`, as its test expects.",
            files: ["greet.mjs"],
          },
        ],
      },
    },
  ],
  implement: (_request, turn) =>
    turn === 0
      ? [
          {
            name: "edit_file",
            arguments: { path: "greet.mjs", old_text: OLD_LINE, new_text: NEW_LINE },
          },
        ]
      : [{ name: "finish", arguments: { summary: "greet() says Hello, <name>!" } }],
  review: () => [
    { name: "submit_review", arguments: { verdict: "approve", summary: "Fine.", comments: [] } },
  ],
};

/** The ```sh blocks of one README section, in order. */
export function shellBlocks(readme: string, heading: string): string[] {
  const start = readme.indexOf(`\n## ${heading}\n`);
  if (start < 0) throw new Error(`README.md has no "## ${heading}" section`);
  const end = readme.indexOf("\n## ", start + 1);
  const section = readme.slice(start, end < 0 ? undefined : end);
  return [...section.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((m) => m[1]!);
}

let model: FakeModel;
let server: TestServer;
let tmp: string;

beforeAll(async () => {
  model = await startFakeModel(agentModel(script));
  server = await startTestServer({
    workers: true,
    env: { ...fakeModelEnv(model, "sk-readme-first-task-0123456789abcdef"), EVENT_POLL_MS: "50" },
  });
  tmp = await mkdtemp(path.join(os.tmpdir(), "foreman-readme-"));
}, 60_000);

afterAll(async () => {
  await server?.stop();
  await model?.close();
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

describe('the README\'s "First task"', () => {
  it("takes a person from a key to a finished task and its diff, block by block", async () => {
    const blocks = shellBlocks(await readFile("README.md", "utf8"), "First task");
    expect(blocks.length).toBeGreaterThanOrEqual(5);
    expect(blocks[0]).toContain(`export FOREMAN=${README_URL}`);
    const body = blocks
      .map((block, i) => `echo "== block ${i + 1}"\n${block.split(README_URL).join(server.url)}`)
      .join("\n");
    const file = path.join(tmp, "first-task.sh");
    await writeFile(file, `set -euo pipefail\n${body}`);

    const { code, output } = await new Promise<{ code: number | null; output: string }>(
      (resolve) => {
        const child = spawn("bash", [file], { cwd: tmp, env: { ...process.env, TMPDIR: tmp } });
        let text = "";
        child.stdout.on("data", (c: Buffer) => (text += c.toString()));
        child.stderr.on("data", (c: Buffer) => (text += c.toString()));
        child.on("close", (exit) => resolve({ code: exit, output: text }));
      },
    );
    expect({ code, tail: output.slice(-3000) }).toMatchObject({ code: 0 });
    for (let i = 1; i <= blocks.length; i++) expect(output).toContain(`== block ${i}`);
    // The gates, the plan, the diff (from the task and from git), the events and the end.
    expect(output).toContain("AWAITING_APPROVAL (awaiting_approval)");
    expect(output).toContain('"title": "Change the greeting"');
    expect(output).toContain("REVIEWING (awaiting_diff_approval)");
    expect(output.split(`+${NEW_LINE}`).length - 1).toBe(2);
    expect(output.split(`-${OLD_LINE}`).length - 1).toBe(2);
    expect(output).toContain("DONE (completed)");
    expect(output).toMatch(/^\d+ done $/m);
    expect(output).toMatch(/^\d+ phase VERIFYING$/m);
  }, 300_000);
});
