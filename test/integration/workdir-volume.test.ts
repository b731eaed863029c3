import { existsSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import {
  configureWorkdirVolumes,
  markKept,
  prepareWorkdir,
  removeWorkdir,
  volumeSupport,
} from "../../src/workcopy/volume.js";
import { agentModel, type Script } from "../helpers/agent-model.js";
import { startFakeModel, type FakeModel, fakeModelEnv } from "../helpers/fake-model.js";
import { createGitRepo, type GitFixture } from "../helpers/git-repo.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { openTaskStream } from "../helpers/ws.js";
import { mountsUnder } from "../helpers/mounts.js";

/*
 * Issue 26 (2), the kernel's side: with TASK_DISK_VOLUMES=auto on a host that allows it
 * (root, loop devices: this project's CI machines), a task's working copy is a loop-mounted
 * volume of TASK_DISK_LIMIT_MB. A command that writes past it is refused by the kernel at
 * once and the task fails naming the limit; a task that ends leaves no mount behind (none is
 * kept for a follow-up here); and the volume a killed worker left for a task that ended is
 * removed by the task sweep.
 */

const LLM_KEY = "sk-volume-model-key-0011223344556677";
const LIMIT_MB = 24;

configureWorkdirVolumes("auto");
const support = await volumeSupport();

let repo: GitFixture;
let bigRepo: GitFixture;
let model: FakeModel;
let server: TestServer;

const script: Script = {
  plan: () => [
    {
      name: "submit_plan",
      arguments: {
        summary: "Write the notes.",
        steps: [{ title: "Notes", description: "Add notes.", files: ["NOTES.md"] }],
      },
    },
  ],
  implement: (_request, n) =>
    n > 0
      ? [{ name: "finish", arguments: { summary: "Wrote the notes." } }]
      : [{ name: "write_file", arguments: { path: "NOTES.md", content: "# Notes\n" } }],
  fix: () => [{ name: "finish", arguments: { summary: "Nothing to fix." } }],
  review: () => [
    { name: "submit_review", arguments: { verdict: "approve", summary: "Fine.", comments: [] } },
  ],
};

async function runTask(
  description: string,
  repoName: string,
  fixture: GitFixture = repo,
): Promise<{
  task: Record<string, unknown>;
  logs: string[];
}> {
  const { key } = await server.signup();
  const ws = await server.api("POST", "/workspaces", {
    key,
    body: { name: "volumes", repos: [{ name: repoName, clone_url: fixture.dir }] },
  });
  expect(ws.status).toBe(201);
  const created = await server.api("POST", "/tasks", {
    key,
    body: { workspace_id: ws.body.id, repo_id: repoName, description, auto_approve: true },
  });
  expect(created.status).toBe(201);
  const stream = await openTaskStream(server.url, created.body.id, key);
  expect(await stream.closed).toBe(1000);
  const task = (await server.api("GET", `/tasks/${created.body.id}`, { key })).body;
  const logs = stream.events.filter((e) => e.event_type === "log").map((e) => String(e.message));
  return { task, logs };
}

describe.skipIf(!support.available)(
  `working copies on volumes (${support.reason ?? "available"})`,
  () => {
    beforeAll(async () => {
      repo = await createGitRepo({
        "README.md": "# volumes\n",
        ".github/foreman.yml": "verify:\n  - name: test\n    run: test -f NOTES.md\n",
      });
      // Its check writes 64 MB at once: the kernel refuses the write past the volume.
      bigRepo = await createGitRepo({
        "README.md": "# volumes\n",
        ".github/foreman.yml": `verify:
  - name: test
    run: head -c 64000000 /dev/zero > fixture.bin && echo all written
`,
      });
      model = await startFakeModel(agentModel(script));
      server = await startTestServer({
        workers: true,
        env: {
          ...fakeModelEnv(model, LLM_KEY),
          EVENT_POLL_MS: "50",
          TASK_DISK_LIMIT_MB: String(LIMIT_MB),
          TASK_DISK_VOLUMES: "auto",
          TASK_SWEEP_INTERVAL_S: "1",
          // A finished task's copy goes at once (none is kept for a follow-up): the kept ones
          // and their volumes are test/integration/kept-workdirs.test.ts's.
          FOLLOW_UP_KEEP_MIN: "0",
        },
      });
    }, 60_000);

    afterAll(async () => {
      await server?.stop();
      await model?.close();
      await repo?.remove();
      await bigRepo?.remove();
    });

    it("runs a task on a volume of TASK_DISK_LIMIT_MB and unmounts it when the task ends", async () => {
      const { task, logs } = await runTask("Add notes", "acme/volumes");
      expect(task.error ?? null, logs.join("\n")).toBeNull();
      expect(task).toMatchObject({ status: "completed", phase: "DONE" });
      expect(logs).toContain(
        `The working copy is on a volume of ${LIMIT_MB} MB: the kernel stops writes past TASK_DISK_LIMIT_MB.`,
      );
      // The sandboxed check ran on it (through the /workspace overlay, scratch on the volume).
      expect(logs.some((l) => /^test: .* succeeded/.test(l))).toBe(true);
      const work = path.join(server.service.config.dataDir, "work");
      expect(mountsUnder(work)).toEqual([]);
      expect(existsSync(path.join(work, `${String(task.id)}.vol`))).toBe(false);
    }, 90_000);

    it("fails the task naming the limit when a command writes past the volume", async () => {
      const { task, logs } = await runTask("Add notes", "acme/volumes-big", bigRepo);
      expect(task).toMatchObject({ status: "failed", phase: "FAILED" });
      expect(String(task.error)).toMatch(
        new RegExp(
          `^The task's working copy grew past TASK_DISK_LIMIT_MB=${LIMIT_MB} MB while running \`head -c 64000000`,
        ),
      );
      // Refused by the kernel: the command never got to its end, no fix round was tried.
      expect(logs.join("\n").split("\n")).not.toContain("all written");
      expect(logs.some((l) => l.startsWith("Fix attempt"))).toBe(false);
      expect(mountsUnder(path.join(server.service.config.dataDir, "work"))).toEqual([]);
    }, 90_000);

    // A cancel ends a task by removing its working copy while its CLONING may be making the
    // volume (formatting, mounting it, binding its folder): the follow-up benchmark's cancelled
    // follow-ups left volumes mounted on folders whose `.vol` was gone. Whatever the order,
    // the removal the stopped stage makes next (repairEnding, or the task sweep) leaves no
    // mount and no folder.
    it("leaves no mount when a removal races the making of the volume", async () => {
      const root = await mkdtemp(path.join(os.tmpdir(), "foreman-volume-race-"));
      try {
        for (const delayMs of [0, 1, 2, 4, 6, 8, 10, 14, 18, 25, 35, 50]) {
          const workdir = path.join(root, `task_${delayMs}`);
          const making = prepareWorkdir(workdir, LIMIT_MB).catch(() => "failed");
          await new Promise((resolve) => setTimeout(resolve, delayMs));
          await removeWorkdir(workdir).catch(() => undefined);
          await making;
          await removeWorkdir(workdir);
          expect(mountsUnder(workdir), `removal after ${delayMs} ms`).toEqual([]);
          expect(existsSync(workdir), `removal after ${delayMs} ms`).toBe(false);
          expect(existsSync(`${workdir}.vol`), `removal after ${delayMs} ms`).toBe(false);
        }
      } finally {
        for (const target of mountsUnder(root).reverse())
          await removeWorkdir(target).catch(() => undefined);
        await rm(root, { recursive: true, force: true });
      }
    }, 60_000);

    it("removes the volume a killed worker left for a task that has ended", async () => {
      const { task } = await runTask("Add notes", "acme/volumes-left");
      expect(task.status).toBe("completed");
      // What a worker killed mid-task leaves: the task's volume, mounted, with files in it.
      const workdir = path.join(server.service.config.dataDir, "work", String(task.id));
      expect(await prepareWorkdir(workdir, LIMIT_MB)).toBe("volume");
      expect(mountsUnder(workdir).length).toBeGreaterThan(0);
      const deadline = Date.now() + 20_000;
      while (existsSync(`${workdir}.vol`) && Date.now() < deadline)
        await new Promise((resolve) => setTimeout(resolve, 200));
      expect(existsSync(`${workdir}.vol`)).toBe(false);
      expect(mountsUnder(workdir)).toEqual([]);
    }, 60_000);

    it("leaves a copy kept for a follow-up to its time, then the task sweep removes it", async () => {
      const { task } = await runTask("Add notes", "acme/volumes-kept");
      expect(task.status).toBe("completed");
      // A finished task's copy, kept for a minute (as CLEANUP does with FOLLOW_UP_KEEP_MIN).
      const workdir = path.join(server.service.config.dataDir, "work", String(task.id));
      expect(await prepareWorkdir(workdir, LIMIT_MB)).toBe("volume");
      await markKept(workdir, Date.now() + 60_000);
      // Three sweeps (TASK_SWEEP_INTERVAL_S=1) leave it.
      await new Promise((resolve) => setTimeout(resolve, 3500));
      expect(existsSync(`${workdir}.vol`)).toBe(true);
      expect(mountsUnder(workdir).length).toBeGreaterThan(0);
      // Its time is up: the next sweep removes it, mounts and marker included.
      await markKept(workdir, Date.now() - 1);
      const deadline = Date.now() + 20_000;
      while (existsSync(`${workdir}.vol`) && Date.now() < deadline)
        await new Promise((resolve) => setTimeout(resolve, 200));
      expect(existsSync(`${workdir}.vol`)).toBe(false);
      expect(existsSync(`${workdir}.kept`)).toBe(false);
      expect(mountsUnder(workdir)).toEqual([]);
    }, 60_000);
  },
);
