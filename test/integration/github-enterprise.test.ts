import nock from "nock";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentModel, type Script } from "../helpers/agent-model.js";
import { fakeModelEnv, startFakeModel, type FakeModel } from "../helpers/fake-model.js";
import { createGitRepo, type GitFixture } from "../helpers/git-repo.js";
import { linkInstallationWorkspace, testPrivateKey } from "../helpers/github.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { openTaskStream } from "../helpers/ws.js";

/*
 * GitHub Enterprise Server after a restart: a fresh service whose first GitHub call is the
 * clone asks the configured host for the installation token, for the clone and for the
 * push. api.github.com has no interceptor and the network is closed, so a token request
 * sent there fails the task (and shows up in `stray`).
 */

const GHE = "https://ghe.example.test";
const INSTALLATION = 6060;
const TOKEN = "ghs_" + "Ent3rprise".repeat(3) + "xyzabc";

let repo: GitFixture;
let model: FakeModel;
let server: TestServer;
let key: string;
const stray: string[] = [];
const onNoMatch = (req: { hostname?: string; host?: string; method?: string; path?: string }) => {
  const host = req.hostname ?? req.host ?? "";
  if (!host.startsWith("127.0.0.1")) stray.push(`${req.method} ${host}${req.path}`);
};

const script: Script = {
  plan: () => [
    {
      name: "submit_plan",
      arguments: {
        summary: "Add a greeting module.",
        steps: [{ title: "Greeting", description: "Add it.", files: ["greet.txt"] }],
      },
    },
  ],
  implement: (_request, n) =>
    n === 0
      ? [{ name: "write_file", arguments: { path: "greet.txt", content: "hello\n" } }]
      : [{ name: "finish", arguments: { summary: "Added greet.txt." } }],
  review: () => [
    { name: "submit_review", arguments: { verdict: "approve", summary: "Fine.", comments: [] } },
  ],
};

beforeAll(async () => {
  nock.disableNetConnect();
  nock.enableNetConnect("127.0.0.1");
  nock.emitter.on("no match", onNoMatch);
  repo = await createGitRepo({ "README.md": "# app\n" });
  model = await startFakeModel(agentModel(script));
  // A fresh process: nothing has asked GitHub for anything yet.
  server = await startTestServer({
    workers: true,
    env: {
      ...fakeModelEnv(model, "sk-ghe-model-key-0a1b2c3d4e5f6a7b8c9d"),
      EVENT_POLL_MS: "50",
      APP_ID: "909",
      PRIVATE_KEY: testPrivateKey(),
      WEBHOOK_SECRET: "whsec-ghe-0123456789",
      GHE_HOST: "ghe.example.test",
    },
  });
  const signup = await server.signup();
  key = signup.key;
  await linkInstallationWorkspace(server, signup.id, {
    id: "ws_ghe",
    installationId: INSTALLATION,
    repoId: "77",
    fullName: "acme/app",
    dir: repo.dir,
  });
}, 60_000);

afterAll(async () => {
  nock.emitter.removeListener("no match", onNoMatch);
  nock.cleanAll();
  nock.enableNetConnect();
  await server?.stop();
  await model?.close();
  await repo?.remove();
});

describe("GitHub Enterprise Server", () => {
  it("asks the configured host for every installation token, from the first clone on", async () => {
    const tokens = nock(GHE)
      .post(`/api/v3/app/installations/${INSTALLATION}/access_tokens`)
      .reply(201, { token: TOKEN, expires_at: new Date(Date.now() + 3600_000).toISOString() })
      .persist();
    const pulls = nock(GHE, { reqheaders: { authorization: `token ${TOKEN}` } })
      .get("/api/v3/repos/acme/app/pulls")
      .query(true)
      .reply(200, [])
      .post("/api/v3/repos/acme/app/pulls")
      .reply(201, { number: 3, html_url: `${GHE}/acme/app/pull/3` });

    const created = await server.api("POST", "/tasks", {
      key,
      body: { workspace_id: "ws_ghe", repo_id: "77", description: "Add greet", auto_approve: true },
    });
    expect(created.status).toBe(201);
    const stream = await openTaskStream(server.url, created.body.id, key);
    expect(await stream.closed).toBe(1000);
    const task = (await server.api("GET", `/tasks/${created.body.id}`, { key })).body;

    expect(stray).toEqual([]);
    expect(task).toMatchObject({
      status: "completed",
      error: null,
      pr_url: `${GHE}/acme/app/pull/3`,
    });
    expect(tokens.isDone()).toBe(true);
    expect(pulls.isDone()).toBe(true);
    // The push went through the clone URL with the token from the Enterprise host.
    expect(await repo.git("show", `${task.branch}:greet.txt`)).toBe("hello\n");
  }, 120_000);
});
