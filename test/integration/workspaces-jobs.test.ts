import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { createGitRepo, type GitFixture } from "../helpers/git-repo.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

let server: TestServer;
let key: string;
let toolsRepo: GitFixture;
let siteRepo: GitFixture;
beforeAll(async () => {
  [server, toolsRepo, siteRepo] = await Promise.all([
    startTestServer({ workers: true }),
    createGitRepo({ "README.md": "# tools\n" }, "main"),
    createGitRepo({ "README.md": "# site\n" }, "trunk"),
  ]);
  ({ key } = await server.signup("ws"));
});
afterAll(async () => {
  await server.stop();
  await Promise.all([toolsRepo?.remove(), siteRepo?.remove()]);
});

describe("plain-git workspaces", () => {
  it("creates, lists and shows workspaces with their repositories", async () => {
    const created = await server.api("POST", "/workspaces", {
      key,
      body: {
        name: "local",
        repos: [
          { name: "tools", clone_url: toolsRepo.dir },
          { name: "acme/site", clone_url: `file://${siteRepo.dir}`, default_branch: "trunk" },
        ],
      },
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ kind: "git", name: "local", repo_count: 2, github: null });
    const [tools, site] = created.body.repos;
    expect(tools).toMatchObject({
      name: "tools",
      full_name: "tools",
      default_branch: "main", // not given: the remote's HEAD (ls-remote)
      clone_url: toolsRepo.dir,
    });
    expect(site).toMatchObject({ name: "site", full_name: "acme/site", default_branch: "trunk" });
    expect(site.id).not.toContain("/");

    const second = await server.api("POST", "/workspaces/", {
      key,
      body: { name: "later", repos: [{ name: "x", clone_url: "https://h/x.git" }] },
    });
    const list = await server.api("GET", "/workspaces", { key });
    expect(list.body.map((w: { id: string }) => w.id)).toEqual([second.body.id, created.body.id]);
    expect(
      (await server.api("GET", `/workspaces/${created.body.id}`, { key })).body.repo_count,
    ).toBe(2);
    const repos = await server.api("GET", `/workspaces/${created.body.id}/repos/`, { key });
    expect(repos.body.map((r: { full_name: string }) => r.full_name)).toEqual([
      "tools",
      "acme/site",
    ]);
  });

  it("rejects remotes that are not git remotes or look like options", async () => {
    for (const clone_url of ["relative/path", "--upload-pack=touch /tmp/x", "ftp://h/x", ""]) {
      const res = await server.api("POST", "/workspaces", {
        key,
        body: { name: "bad", repos: [{ name: "r", clone_url }] },
      });
      expect(res.status, clone_url).toBe(400);
      expect(res.body.error.details[0].path).toBe("body.repos.0.clone_url");
    }
    const badBranch = await server.api("POST", "/workspaces", {
      key,
      body: { name: "bad", repos: [{ name: "r", clone_url: "/x", default_branch: "-f" }] },
    });
    expect(badBranch.status).toBe(400);
  });
});

describe("jobs", () => {
  it("runs enqueued jobs on the shared database in a worker process, validating payloads", async () => {
    const seen: string[] = [];
    let resolveDone: () => void;
    const done = new Promise<void>((r) => (resolveDone = r));
    const kind = {
      name: "test.echo",
      schema: z.object({ word: z.string() }),
      async run(data: { word: string }) {
        seen.push(data.word);
        resolveDone();
      },
    };
    server.service.scheduler.define(kind);
    await expect(
      server.service.scheduler.enqueue(kind, { word: 42 } as unknown as { word: string }),
    ).rejects.toThrow();
    await server.service.scheduler.enqueue(kind, { word: "hello" });
    await done;
    expect(seen).toEqual(["hello"]);
  });
});
