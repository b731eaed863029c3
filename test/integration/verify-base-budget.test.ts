import { readdir, readFile } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentModel, roleOf } from "../helpers/agent-model.js";
import { MARK_FIXED_SCRIPT } from "../helpers/mark-fixed-model.js";
import { startFakeModel, type FakeModel, fakeModelEnv } from "../helpers/fake-model.js";
import { createGitRepo, type GitFixture } from "../helpers/git-repo.js";
import { addLocalWorkspace, startTestServer, type TestServer } from "../helpers/server.js";
import { startTask } from "../helpers/ws.js";
import { waitFor } from "../helpers/greeter-stack.js";
import { volumeSupport } from "../../src/workcopy/volume.js";

/*
 * Issue 41 item 6 (finding 5): the base commit's checks count against the task's disk budget
 * like every other command of the task. The base's test writes 40 MB, slowly; the change's
 * version writes nothing and still fails. The base runs inside the working copy's budgeted
 * folder, is stopped past TASK_DISK_LIMIT_MB, and the task fails saying so: the failure is
 * not set aside as "could not run the base" and handed to fix rounds, and no checkout of the
 * base is left beside the working copy.
 */

const LLM_KEY = "sk-base-budget-key-0011223344556677";

const script = MARK_FIXED_SCRIPT;

const support = await volumeSupport();

/*
 * 5 MB: below a volume's smallest size, the working copy is a folder and the watcher alone
 * keeps the budget. 32 MB: on a volume of its own where the host allows one (the kernel
 * stops writes there; the checkout of the base is on it).
 */
const CASES = [
  { limitMb: 5, volume: false },
  ...(support.available ? [{ limitMb: 32, volume: true }] : []),
];

/**
 * Registers, in the calling describe, a repository of `files`, the scripted model and the
 * service with workers (`env` added), started before its tests and stopped after them.
 */
function scriptedService(files: Record<string, string>, env: Record<string, string>) {
  const stack = {} as { repo: GitFixture; model: FakeModel; server: TestServer };
  beforeAll(async () => {
    stack.repo = await createGitRepo(files);
    stack.model = await startFakeModel(agentModel(script));
    stack.server = await startTestServer({
      workers: true,
      env: { ...fakeModelEnv(stack.model, LLM_KEY), EVENT_POLL_MS: "50", ...env },
    });
  }, 60_000);
  afterAll(async () => {
    await stack.server?.stop();
    await stack.model?.close();
    await stack.repo?.remove();
  });
  return stack;
}

describe.each(CASES)("the base commit's checks within TASK_DISK_LIMIT_MB=$limitMb", (c) => {
  const stack = scriptedService(
    {
      "README.md": "# disk\n",
      ".github/foreman.yml": `verify:
  - name: test
    run: if [ -f fixed ]; then echo still wrong; exit 1; fi; i=0; while [ $i -lt 40 ]; do head -c 1000000 /dev/zero > fixture-$i.bin || exit 1; i=$((i+1)); sleep 0.05; done; echo all written
`,
    },
    {
      TASK_DISK_LIMIT_MB: String(c.limitMb),
      TASK_DISK_VOLUMES: c.volume ? "auto" : "off",
      MAX_FIX_ATTEMPTS: "1",
    },
  );

  it("fails the task naming TASK_DISK_LIMIT_MB when the base's test writes past it", async () => {
    const { server, model, repo } = stack;
    const { key } = await server.signup();
    const workspaceId = await addLocalWorkspace(server, key, { name: "acme/disk", dir: repo.dir });
    const { id, stream } = await startTask(server, key, {
      workspace_id: workspaceId,
      repo_id: "acme/disk",
      description: "Mark it fixed",
      auto_approve: true,
    });
    expect(await stream.closed).toBe(1000);
    const task = (await server.api("GET", `/tasks/${id}`, { key })).body;
    expect(task).toMatchObject({ status: "failed", phase: "FAILED" });
    expect(task.error).toMatch(
      new RegExp(
        `^The task's working copy grew past TASK_DISK_LIMIT_MB=${c.limitMb} MB while running \`if \\[ -f fixed \\].*Raise TASK_DISK_LIMIT_MB`,
      ),
    );
    const logs = stream.events.filter((e) => e.event_type === "log").map((e) => String(e.message));
    expect(logs.some((l) => l.startsWith("Running test on the unchanged code"))).toBe(true);
    expect(logs.some((l) => l.includes("The working copy is on a volume"))).toBe(c.volume);
    expect(logs.join("\n").split("\n")).not.toContain("all written");
    // Not a failure for the model: no fix round was spent on it.
    expect(model.requests.some((r) => roleOf(r) === "fix")).toBe(false);
    // Nothing of the base's checkout is left beside the working copies.
    const left = await readdir(server.service.config.dataDir, { recursive: true });
    expect(left.filter((name) => /\.base-|foreman-base-/.test(String(name)))).toEqual([]);
  }, 120_000);
});

/** Processes of this host whose command line contains `text` (the sandbox's included). */
async function processesWith(text: string): Promise<number> {
  let count = 0;
  for (const pid of await readdir("/proc").catch(() => [] as string[])) {
    if (!/^\d+$/.test(pid)) continue;
    const cmdline = await readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => "");
    if (cmdline.replace(/\0/g, " ").includes(text)) count++;
  }
  return count;
}

describe("the base commit's checks of a task cancelled at the plan gate", () => {
  // A command no other test runs, to find its processes by.
  const SLEEP = "sleep 47.25";
  const stack = scriptedService(
    {
      "README.md": "# slow\n",
      ".github/foreman.yml": `verify:\n  - name: test\n    run: ${SLEEP}; true\n`,
    },
    { COMMAND_TIMEOUT_S: "120" },
  );

  it("stop when the task is cancelled while its plan waits", async () => {
    const { server, repo } = stack;
    const { key } = await server.signup();
    const workspaceId = await addLocalWorkspace(server, key, { name: "acme/slow", dir: repo.dir });
    const created = await server.api("POST", "/tasks", {
      key,
      body: { workspace_id: workspaceId, repo_id: "acme/slow", description: "Mark it fixed" },
    });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    await waitFor("the plan gate", async () => {
      const t = (await server.api("GET", `/tasks/${id}`, { key })).body;
      return t.status === "awaiting_approval" ? t : undefined;
    });
    // The base's check runs on while the plan waits…
    await waitFor("the base's check running", async () =>
      (await processesWith(SLEEP)) > 0 ? true : undefined,
    );
    expect((await server.api("POST", `/tasks/${id}/cancel`, { key })).status).toBe(200);
    // …and stops with the task, long before its own end.
    await waitFor(
      "the base's check stopped",
      async () => ((await processesWith(SLEEP)) === 0 ? true : undefined),
      15_000,
    );
  }, 120_000);
});
