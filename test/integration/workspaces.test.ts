import { mkdir, mkdtemp, rm, stat, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { githubLinkMarker, recordInstallation } from "../../src/domain/workspaces/linking.js";
import { endTask } from "../../src/domain/tasks/endings.js";
import { claimMarker } from "../../src/durable/markers.js";
import { findCronJobs } from "../../src/jobs/cron.js";
import { isKept, markKept } from "../../src/workcopy/volume.js";
import { createGitRepo, type GitFixture } from "../helpers/git-repo.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

/*
 * Workspaces are checked at creation and can be deleted (issue 40, "Operator defaults"):
 * a local repository path must be an existing git repository; DELETE /workspaces/{id} is
 * account-scoped, refuses while work is unfinished, and takes the workspace's automations,
 * repository memory and kept working copies with it.
 */

let server: TestServer;
let repo: GitFixture;
let scratch: string;
let owner: { account: string; key: string };
let other: { account: string; key: string };
beforeAll(async () => {
  [server, repo, scratch] = await Promise.all([
    startTestServer(),
    createGitRepo({ "README.md": "# app\n" }, "trunk"),
    mkdtemp(path.join(os.tmpdir(), "foreman-ws-paths-")),
  ]);
  owner = await signup("owner");
  other = await signup("other");
});
afterAll(async () => {
  await server?.stop();
  await repo?.remove();
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

const models = () => server.service.db.models;

/** A new account's key and the account's id (the API shows only the key's id). */
async function signup(name: string): Promise<{ account: string; key: string }> {
  const { id, key } = await server.signup(name);
  const row = await models().ApiKey.findOne({ key_id: id }).lean();
  return { account: row!.account_id, key };
}

async function createWorkspace(key: string, repos: Array<{ name: string; clone_url: string }>) {
  return server.api("POST", "/workspaces", { key, body: { name: "w", repos } });
}

async function workspace(key = owner.key): Promise<string> {
  const res = await createWorkspace(key, [{ name: "acme/app", clone_url: repo.dir }]);
  expect(res.status).toBe(201);
  return res.body.id as string;
}

describe("POST /workspaces with a local path", () => {
  it("refuses a path that does not exist, is a file or is no git repository, naming each field", async () => {
    const file = path.join(scratch, "file.txt");
    const plain = path.join(scratch, "plain");
    await writeFile(file, "not a folder\n");
    await mkdir(plain);
    const res = await createWorkspace(owner.key, [
      { name: "gone", clone_url: path.join(scratch, "missing") },
      { name: "ok", clone_url: repo.dir },
      { name: "file", clone_url: file },
      { name: "plain", clone_url: `file://${plain}` },
    ]);
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({
      code: "validation_failed",
      message: "A repository path cannot be used: it must be an existing, readable git repository.",
      details: [
        {
          path: "body.repos.0.clone_url",
          message: `${path.join(scratch, "missing")} does not exist`,
        },
        { path: "body.repos.2.clone_url", message: `${file} is not a directory` },
        { path: "body.repos.3.clone_url", message: `${plain} is not a git repository` },
      ],
    });
    expect((await server.api("GET", "/workspaces", { key: owner.key })).body).toEqual([]);
  });

  it("accepts a git repository by path or file:// and reads its default branch", async () => {
    const res = await createWorkspace(owner.key, [
      { name: "a", clone_url: repo.dir },
      { name: "b", clone_url: `file://${repo.dir}` },
    ]);
    expect(res.status).toBe(201);
    expect(res.body.repos.map((r: { default_branch: string }) => r.default_branch)).toEqual([
      "trunk",
      "trunk",
    ]);
    expect(
      (await server.api("DELETE", `/workspaces/${res.body.id}`, { key: owner.key })).status,
    ).toBe(204);
  });
});

describe("DELETE /workspaces/{id}", () => {
  it("deletes the caller's workspace (204); another account's or an unknown one is 404", async () => {
    const id = await workspace();
    const foreign = await server.api("DELETE", `/workspaces/${id}`, { key: other.key });
    expect(foreign.status).toBe(404);
    expect(foreign.body.error.code).toBe("not_found");
    expect((await server.api("GET", `/workspaces/${id}`, { key: owner.key })).status).toBe(200);

    const res = await server.api("DELETE", `/workspaces/${id}`, { key: owner.key });
    expect(res.status).toBe(204);
    expect(res.body).toBeUndefined();
    expect((await server.api("GET", `/workspaces/${id}`, { key: owner.key })).status).toBe(404);
    const list = await server.api("GET", "/workspaces", { key: owner.key });
    expect(list.body.map((w: { id: string }) => w.id)).not.toContain(id);
    expect((await server.api("DELETE", `/workspaces/${id}`, { key: owner.key })).status).toBe(404);
    const task = await server.api("POST", "/tasks", {
      key: owner.key,
      body: { workspace_id: id, repo_id: "acme/app", description: "After the delete" },
    });
    expect(task.status).toBe(404);
  });

  it("refuses with 409 invalid_state while a task has not ended, and deletes once it has", async () => {
    const id = await workspace();
    const created = await server.api("POST", "/tasks", {
      key: owner.key,
      body: { workspace_id: id, repo_id: "acme/app", description: "Still queued" },
    });
    expect(created.status).toBe(201);
    const taskId = created.body.id as string;

    const refused = await server.api("DELETE", `/workspaces/${id}`, { key: owner.key });
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe("invalid_state");
    expect(refused.body.error.message).toContain(taskId);
    expect(refused.body.error.message).toContain("POST /tasks/{id}/cancel");
    expect((await server.api("GET", `/workspaces/${id}`, { key: owner.key })).status).toBe(200);

    expect((await server.api("POST", `/tasks/${taskId}/cancel`, { key: owner.key })).status).toBe(
      200,
    );
    expect((await server.api("DELETE", `/workspaces/${id}`, { key: owner.key })).status).toBe(204);
    // The ended task stays, readable by its id: the account's history.
    const after = await server.api("GET", `/tasks/${taskId}`, { key: owner.key });
    expect(after.status).toBe(200);
    expect(after.body).toMatchObject({ status: "cancelled", workspace_id: id });
  });

  it("runs no failed task of it again: a retry after the delete is 404", async () => {
    const id = await workspace();
    const created = await server.api("POST", "/tasks", {
      key: owner.key,
      body: { workspace_id: id, repo_id: "acme/app", description: "Fails at cloning" },
    });
    const taskId = created.body.id as string;
    const deps = server.service.pipeline.taskDeps;
    await deps.events.append(taskId, { event_type: "phase", phase: "CLONING", status: "running" });
    expect(await endTask(deps, taskId, { status: "failed", error: "clone failed" })).toBe(true);

    expect((await server.api("DELETE", `/workspaces/${id}`, { key: owner.key })).status).toBe(204);
    const retry = await server.api("POST", `/tasks/${taskId}/retry`, { key: owner.key, body: {} });
    expect(retry.status).toBe(404);
    expect(retry.body.error.code).toBe("not_found");
    const after = await server.api("GET", `/tasks/${taskId}`, { key: owner.key });
    expect(after.body).toMatchObject({ status: "failed" });
  });

  it("removes its automations with their cron jobs and its repository memory, not another workspace's", async () => {
    const [id, keep] = [await workspace(), await workspace()];
    const automation = async (workspaceId: string) => {
      const res = await server.api("POST", "/automations", {
        key: owner.key,
        body: {
          workspace_id: workspaceId,
          repo_id: "acme/app",
          trigger_type: "cron",
          trigger_config: { schedule: "0 9 * * 1" },
          task_template: "Weekly check",
          enabled: true,
        },
      });
      expect(res.status).toBe(201);
      return res.body.id as string;
    };
    const [gone, kept] = [await automation(id), await automation(keep)];
    const memory = (workspaceId: string, n: number) => ({
      _id: `mem-${workspaceId}-${n}`,
      account_id: owner.account,
      workspace_id: workspaceId,
      repo_id: "r",
      kind: "convention",
      text: "Tests live next to the code.",
      source_task_id: "task_x",
      created_at: new Date(),
    });
    await models().RepoMemory.insertMany([memory(id, 1), memory(keep, 2)]);
    const db = server.service.db.connection.db!;
    expect(await findCronJobs(db, gone)).toHaveLength(1);

    expect((await server.api("DELETE", `/workspaces/${id}`, { key: owner.key })).status).toBe(204);
    expect((await server.api("GET", `/automations/${gone}`, { key: owner.key })).status).toBe(404);
    expect(await findCronJobs(db, gone)).toHaveLength(0);
    expect((await server.api("GET", `/automations/${kept}`, { key: owner.key })).status).toBe(200);
    expect(await findCronJobs(db, kept)).toHaveLength(1);
    const memories = await models().RepoMemory.find({ account_id: owner.account }).lean();
    expect(memories.map((m) => m.workspace_id)).toEqual([keep]);
  });

  it("removes the kept working copies of its tasks on this DATA_DIR, not others'", async () => {
    const [id, keep] = [await workspace(), await workspace()];
    const ended = async (workspaceId: string) => {
      const res = await server.api("POST", "/tasks", {
        key: owner.key,
        body: { workspace_id: workspaceId, repo_id: "acme/app", description: "Kept copy" },
      });
      await server.api("POST", `/tasks/${res.body.id}/cancel`, { key: owner.key });
      const workdir = server.service.pipeline.taskDeps.workdirOf(res.body.id);
      await mkdir(workdir, { recursive: true });
      await writeFile(path.join(workdir, "file.txt"), "work\n");
      await markKept(workdir, Date.now() + 3_600_000);
      return workdir;
    };
    const [ours, theirs] = [await ended(id), await ended(keep)];
    expect([isKept(ours), isKept(theirs)]).toEqual([true, true]);

    expect((await server.api("DELETE", `/workspaces/${id}`, { key: owner.key })).status).toBe(204);
    expect([isKept(ours), isKept(theirs)]).toEqual([false, true]);
    await expect(stat(ours)).rejects.toThrow(/ENOENT/);
  });

  it("unlinks a GitHub App installation's workspace (the row and the installation stay)", async () => {
    const installationId = 4242;
    const recorded = await recordInstallation(models(), "https://github.com", {
      id: installationId,
      account_login: "acme",
      account_type: "Organization",
      target_id: 7,
    });
    // Linked as the setup flow links it: the row names the account, the marker the first link.
    await models().Workspace.updateOne(
      { _id: recorded._id },
      { $set: { account_id: owner.account, updated_at: new Date() } },
    );
    const marker = githubLinkMarker(installationId);
    expect(await claimMarker(models(), marker, { account_id: owner.account })).toBe(true);
    expect(
      (await server.api("GET", `/workspaces/${recorded._id}`, { key: owner.key })).status,
    ).toBe(200);
    expect(
      (await server.api("DELETE", `/workspaces/${recorded._id}`, { key: other.key })).status,
    ).toBe(404);

    expect(
      (await server.api("DELETE", `/workspaces/${recorded._id}`, { key: owner.key })).status,
    ).toBe(204);
    expect(
      (await server.api("GET", `/workspaces/${recorded._id}`, { key: owner.key })).status,
    ).toBe(404);
    const row = await models().Workspace.findOne({ _id: recorded._id }).lean();
    expect(row).toMatchObject({
      kind: "github",
      account_id: null,
      github: { installation_id: 4242 },
    });
    // The first-link marker is gone: the installation can be linked again (by its first claim).
    expect(await claimMarker(models(), marker, { account_id: other.account })).toBe(true);
  });

  it("is in the OpenAPI document with 204, 404 and 409", async () => {
    const doc = (await server.api("GET", "/openapi.json")).body;
    const op = doc.paths["/workspaces/{id}"].delete;
    expect(op.operationId).toBe("deleteWorkspace");
    expect(Object.keys(op.responses)).toEqual(expect.arrayContaining(["204", "404", "409"]));
  });
});
