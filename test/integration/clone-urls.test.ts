import { lookup } from "node:dns/promises";
import os from "node:os";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { addressProblem } from "../../src/util/remote-url.js";
import { createGitRepo, type GitFixture } from "../helpers/git-repo.js";
import { startTestServer, type ApiResponse, type TestServer } from "../helpers/server.js";

/*
 * The clone-URL policy (src/util/remote-url.ts) on the real service: with ALLOW_LOCAL_REPOS
 * off, every class of local or non-public remote is refused with 400 at creation, and a
 * name that resolves to this machine is refused again when a scan clones; with the flag on
 * (as the rest of the tests run), local repositories work.
 */

let strict: TestServer;
let relaxed: TestServer;
let strictKey: string;
let relaxedKey: string;
let fixture: GitFixture;

/** A name this machine resolves to one of its own addresses (from /etc/hosts or DNS). */
const LOCAL_NAME = os.hostname();

beforeAll(async () => {
  fixture = await createGitRepo({ "README.md": "# fixture\n" });
  strict = await startTestServer({ workers: true, env: { ALLOW_LOCAL_REPOS: "false" } });
  relaxed = await startTestServer({ workers: true, env: { ALLOW_LOCAL_REPOS: "true" } });
  strictKey = (await strict.signup()).key;
  relaxedKey = (await relaxed.signup()).key;
}, 60_000);

afterAll(async () => {
  await strict?.stop();
  await relaxed?.stop();
  await fixture?.remove();
});

function create(server: TestServer, key: string, cloneUrl: string): Promise<ApiResponse> {
  return server.api("POST", "/workspaces", {
    key,
    body: { name: "ws", repos: [{ name: "acme/app", clone_url: cloneUrl }] },
  });
}

/** Polls the report until it has finished (completed or failed). */
async function finished(server: TestServer, key: string, repoId: string, reportId: string) {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const res = await server.api("GET", `/health-reports/${repoId}/scans/${reportId}`, { key });
    expect(res.status).toBe(200);
    if (res.body.status === "completed" || res.body.status === "failed") return res.body;
    if (Date.now() > deadline) throw new Error(`report ${reportId} still ${res.body.status}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

const REFUSED: Record<string, string[]> = {
  "local paths and file://": [
    "/srv/git/other.git",
    "./relative",
    "../up",
    "file:///srv/git/other.git",
    "FILE:///etc",
  ],
  "other transports": [
    "http://example.com/a.git",
    "git://example.com/a.git",
    "ftp://example.com/a.git",
    "ext::sh",
    "ext::ssh -oProxyCommand=x host",
    "fd::17",
  ],
  "option-like values": [
    "-uhttps://example.com/a.git",
    "--upload-pack=touch /tmp/x",
    "ssh://-oProxyCommand=touch/a.git",
    "ssh://-oProxyCommand@example.com/a.git",
  ],
  "control characters and whitespace": [
    "https://example.com/a\u0007.git",
    "https://exa mple.com/a.git",
    "https://example.com/a\u0000.git",
    "git@example.com:a\tb.git",
  ],
  loopback: [
    "https://127.0.0.1/a.git",
    "https://127.8.9.10/a.git",
    "https://2130706433/a.git",
    "https://0x7f.1/a.git",
    "https://[::1]/a.git",
    "https://[::ffff:127.0.0.1]/a.git",
    "ssh://git@127.0.0.1/a.git",
    "git@127.0.0.1:a.git",
    "https://localhost/a.git",
    "https://api.localhost/a.git",
    "git@localhost:a.git",
  ],
  private: [
    "https://10.1.2.3/a.git",
    "https://172.16.0.1/a.git",
    "https://172.31.255.1/a.git",
    "https://192.168.1.1/a.git",
    "https://100.64.0.1/a.git",
    "https://[fc00::1]/a.git",
    "https://[fd12:3456::1]/a.git",
    "git@10.0.0.1:a.git",
  ],
  "link-local and metadata": [
    "https://169.254.169.254/latest/meta-data",
    "https://[fe80::1]/a.git",
    "https://[fd00:ec2::254]/a.git",
    "https://metadata.google.internal/a.git",
  ],
  unspecified: ["https://0.0.0.0/a.git", "https://[::]/a.git", "https://0/a.git"],
};

describe("with ALLOW_LOCAL_REPOS off", () => {
  for (const [kind, urls] of Object.entries(REFUSED))
    it(`refuses ${kind} with 400 naming the field`, async () => {
      for (const url of urls) {
        const res = await create(strict, strictKey, url);
        expect(res.status, url).toBe(400);
        expect(res.body.error.code, url).toBe("validation_failed");
        const paths = (res.body.error.details as Array<{ path: string }>).map((d) => d.path);
        expect(paths.length, url).toBeGreaterThan(0);
        expect(new Set(paths), url).toEqual(new Set(["body.repos.0.clone_url"]));
      }
      // Nothing was stored.
      const list = await strict.api("GET", "/workspaces", { key: strictKey });
      expect(list.body).toEqual([]);
    });

  it("refuses a host name that resolves to this machine", async () => {
    const addresses = await lookup(LOCAL_NAME, { all: true });
    // The premise: the machine's own name resolves to a non-public address.
    expect(addresses.some((a) => addressProblem(a.address) !== null)).toBe(true);
    for (const url of [`https://${LOCAL_NAME}/a.git`, `git@${LOCAL_NAME}:a.git`]) {
      const res = await create(strict, strictKey, url);
      expect(res.status, url).toBe(400);
      expect(res.body.error.details[0].message).toMatch(/resolves to a non-public address/);
    }
  });

  it("accepts https, ssh and user@host:path remotes on public hosts", async () => {
    for (const url of [
      "https://github.com/acme/app.git",
      "ssh://git@github.com/acme/app.git",
      "git@github.com:acme/app.git",
      "https://93.184.216.34/acme/app.git",
    ]) {
      const res = await create(strict, strictKey, url);
      expect(res.status, url).toBe(201);
    }
  });

  it("checks the name again when a scan clones, and fails the scan with a readable reason", async () => {
    // Created while the name was public; it now resolves to this machine (DNS rebinding).
    const res = await create(strict, strictKey, "https://github.com/acme/rebound.git");
    expect(res.status).toBe(201);
    await strict.service.db.models.Workspace.updateOne(
      { _id: res.body.id },
      { $set: { "repos.0.clone_url": `https://${LOCAL_NAME}/acme/rebound.git` } },
    );
    const repoId = res.body.repos[0].id as string;
    const scan = await strict.api("POST", `/health-reports/${repoId}/scan`, { key: strictKey });
    expect(scan.status).toBe(202);
    const report = await finished(strict, strictKey, repoId, scan.body.id);
    expect(report.status).toBe("failed");
    expect(report.error).toMatch(
      /clone URL of acme\/app is not allowed \(the host .* resolves to a non-public address/,
    );
  }, 90_000);

  it("checks the name again when a task clones, and fails the task with a readable reason", async () => {
    const res = await create(strict, strictKey, "https://github.com/acme/rebound-task.git");
    expect(res.status).toBe(201);
    await strict.service.db.models.Workspace.updateOne(
      { _id: res.body.id },
      { $set: { "repos.0.clone_url": `https://${LOCAL_NAME}/acme/rebound-task.git` } },
    );
    const created = await strict.api("POST", "/tasks", {
      key: strictKey,
      body: { workspace_id: res.body.id, repo_id: "acme/app", description: "Add a line" },
    });
    expect(created.status).toBe(201);
    const deadline = Date.now() + 60_000;
    let task = created.body;
    while (task.status !== "failed" && task.status !== "completed" && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 200));
      task = (await strict.api("GET", `/tasks/${created.body.id}`, { key: strictKey })).body;
    }
    expect(task.status).toBe("failed");
    expect(task.error).toMatch(
      /clone URL of acme\/app is not allowed \(the host .* resolves to a non-public address/,
    );
  }, 90_000);
});

describe("with ALLOW_LOCAL_REPOS on", () => {
  it("accepts a local repository and clones it", async () => {
    const res = await create(relaxed, relaxedKey, fixture.dir);
    expect(res.status).toBe(201);
    const repoId = res.body.repos[0].id as string;
    const scan = await relaxed.api("POST", `/health-reports/${repoId}/scan`, { key: relaxedKey });
    expect(scan.status).toBe(202);
    const report = await finished(relaxed, relaxedKey, repoId, scan.body.id);
    expect(report.error).toBeNull();
    expect(report.status).toBe("completed");
    expect(report.commit_sha).toMatch(/^[0-9a-f]{40}$/);
  }, 90_000);
});
