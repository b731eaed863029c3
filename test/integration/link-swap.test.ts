import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentModel, roleOf, type Script } from "../helpers/agent-model.js";
import {
  fakeModelEnv,
  startFakeModel,
  toolResults,
  type FakeModel,
} from "../helpers/fake-model.js";
import { createGitRepo, type GitFixture } from "../helpers/git-repo.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { openTaskStream } from "../helpers/ws.js";

/*
 * Issue 26 item 1 on the real service: host-side reads follow no link. The repository
 * commits AGENTS.md as a link to a file under the service's DATA_DIR and CLAUDE.md as a link
 * to /proc/self/environ; the model's own command then swaps src/helper.js for a link to that
 * file, src/lib for a link to a folder outside, and CONVENTIONS.md for a link too, and asks
 * search_code, read_file and list_files for them, then writes everything it saw into
 * leak.txt, which is committed and pushed. The first verification fails, so a fix round
 * reads the instruction files once more. The marker planted outside reaches no request the
 * model received, no task event, not the diff and not the pushed branch.
 */

const MARKER = `workcopy-marker-${randomBytes(10).toString("hex")}`;

let dataDir: string;
let outsideDir: string;
let secretFile: string;
let repo: GitFixture;
let model: FakeModel;
let server: TestServer;
let key: string;
let workspaceId: string;

/** The tool results of the model's implement conversation, as the model saw them. */
let seen: string[] = [];

function script(): Script {
  return {
    plan: (_request, n) =>
      n === 0
        ? [
            { name: "read_file", arguments: { path: "AGENTS.md" } },
            { name: "read_file", arguments: { path: "CLAUDE.md" } },
            { name: "search_code", arguments: { query: "helper" } },
          ]
        : [
            {
              name: "submit_plan",
              arguments: {
                summary: "Write the notes.",
                steps: [{ title: "Notes", description: "Add notes.", files: ["NOTES.md"] }],
              },
            },
          ],
    implement: (request, n) => {
      if (n === 0)
        return [
          {
            name: "run_command",
            arguments: {
              command: [
                "rm src/helper.js",
                `ln -s ${secretFile} src/helper.js`,
                "rm -r src/lib",
                `ln -s ${outsideDir} src/lib`,
                "rm CONVENTIONS.md",
                `ln -s ${secretFile} CONVENTIONS.md`,
                "ls -l src",
              ].join(" && "),
            },
          },
        ];
      if (n === 1)
        return [
          { name: "search_code", arguments: { query: "helper" } },
          { name: "search_code", arguments: { query: "library tool" } },
          { name: "read_file", arguments: { path: "src/helper.js" } },
          { name: "read_file", arguments: { path: "src/lib/tool.js" } },
          { name: "read_file", arguments: { path: "CONVENTIONS.md" } },
          { name: "list_files", arguments: { path: "src/lib" } },
          { name: "list_files", arguments: {} },
        ];
      if (n === 2) {
        const all = toolResults(request).map((r) => r.content);
        seen = all.slice(1);
        return [
          {
            name: "write_file",
            arguments: { path: "leak.txt", content: `${all.join("\n----\n")}\n` },
          },
        ];
      }
      return [{ name: "finish", arguments: { summary: "Wrote what I found." } }];
    },
    fix: (_request, n) =>
      n === 0
        ? [{ name: "write_file", arguments: { path: "fixed", content: "yes\n" } }]
        : [{ name: "finish", arguments: { summary: "Fixed." } }],
    review: () => [
      { name: "submit_review", arguments: { verdict: "approve", summary: "Fine.", comments: [] } },
    ],
  };
}

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(os.tmpdir(), "foreman-link-swap-data-"));
  // Inside DATA_DIR, as the database's files and other accounts' working copies are.
  secretFile = path.join(dataDir, "other-account-notes.txt");
  await writeFile(secretFile, `helper library tool ${MARKER}\n`);
  outsideDir = path.join(dataDir, "elsewhere");
  await mkdir(outsideDir);
  await writeFile(path.join(outsideDir, "tool.js"), `export const library = "${MARKER}";\n`);

  repo = await createGitRepo({
    "README.md": "# linked\n",
    "src/helper.js": "export function helper() {\n  return 'helper';\n}\n",
    "src/lib/tool.js": "export const library = 'tool';\n",
    "CONVENTIONS.md": "Keep helpers small.\n",
    ".github/foreman.yml": `verify:\n  - name: fixed\n    run: test -f fixed || test ! -e leak.txt\n`,
  });
  // Committed links: no command needed for these to be met.
  await symlink(secretFile, path.join(repo.dir, "AGENTS.md"));
  await symlink("/proc/self/environ", path.join(repo.dir, "CLAUDE.md"));
  await repo.git("add", "AGENTS.md", "CLAUDE.md");
  await repo.git("commit", "-q", "-m", "instructions");

  model = await startFakeModel(agentModel(script()));
  server = await startTestServer({
    workers: true,
    env: {
      ...fakeModelEnv(model, "sk-link-swap-model-key-0123456789"),
      DATA_DIR: dataDir,
      EVENT_POLL_MS: "50",
      COMMAND_TIMEOUT_S: "30",
      MAX_FIX_ATTEMPTS: "1",
    },
  });
  ({ key } = await server.signup());
  const ws = await server.api("POST", "/workspaces", {
    key,
    body: { name: "linked", repos: [{ name: "acme/linked", clone_url: repo.dir }] },
  });
  expect(ws.status).toBe(201);
  workspaceId = ws.body.id;
}, 60_000);

afterAll(async () => {
  await server?.stop();
  await model?.close();
  await repo?.remove();
  await rm(dataDir, { recursive: true, force: true });
});

describe("links in a working copy", () => {
  it("are never followed by the service's own reads", async () => {
    const created = await server.api("POST", "/tasks", {
      key,
      body: {
        workspace_id: workspaceId,
        repo_id: "acme/linked",
        description: "Add notes about the helper",
        auto_approve: true,
      },
    });
    expect(created.status).toBe(201);
    const taskId = created.body.id;
    const stream = await openTaskStream(server.url, taskId, key);
    expect(await stream.closed).toBe(1000);
    const task = (await server.api("GET", `/tasks/${taskId}`, { key })).body;
    expect(task, String(task.error)).toMatchObject({ status: "completed", phase: "DONE" });

    // The attack ran: the links were made, and each tool met one.
    const implement = model.requests.filter((r) => roleOf(r) === "implement");
    const commandResult = toolResults(implement[1]!)[0]!.content;
    expect(commandResult).toMatch(/helper\.js -> /);
    expect(seen).toHaveLength(7);
    // search_code still ranks the indexed src/helper.js, and shows no line of it.
    expect(seen[0]).toContain("src/helper.js");
    expect(seen[2]).toMatch(/^Error: /);
    expect(seen[3]).toMatch(/^Error: /);
    expect(seen[4]).toMatch(/^Error: /);
    // The fix round ran, so the instruction files were read again after the swap.
    expect(model.requests.some((r) => roleOf(r) === "fix")).toBe(true);

    // leak.txt was written, committed and pushed: what the model saw went out.
    expect(task.diff).toContain("+++ b/leak.txt");
    const pushed = await repo.git("log", "-p", "--all");
    expect(pushed).toContain("leak.txt");

    // The service runs in this process: its PATH entry as /proc/self/environ holds it.
    const environPath = readFileSync("/proc/self/environ", "latin1")
      .split("\0")
      .find((entry) => entry.startsWith("PATH="))!;
    expect(environPath.length).toBeGreaterThan(10);
    const events = JSON.stringify(
      await server.service.db.models.TaskEvent.collection.find({}).toArray(),
    );
    const prompts = JSON.stringify(model.requests.map((r) => r.body));
    for (const [where, text] of [
      ["the model's requests", prompts],
      ["the task", JSON.stringify(task)],
      ["the task events", events],
      ["the pushed branch", pushed],
    ] as const) {
      expect(text, where).not.toContain(MARKER);
      // The service's environment (CLAUDE.md -> /proc/self/environ) reached nothing either.
      expect(text, where).not.toContain(environPath);
    }
  }, 180_000);
});
