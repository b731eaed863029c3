import nock from "nock";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { agentModel, roleOf, userText, type Script } from "../helpers/agent-model.js";
import {
  startFakeModel,
  toolResults,
  type FakeModel,
  fakeModelEnv,
} from "../helpers/fake-model.js";
import { createGitRepo, type GitFixture } from "../helpers/git-repo.js";
import {
  linkInstallationWorkspace,
  mockInstallationToken,
  testPrivateKey,
} from "../helpers/github.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { openTaskStream, type StreamEvent } from "../helpers/ws.js";

/*
 * The agent's other shapes: a GitHub repository, where the approved change becomes a pull
 * request (GitHub's API faked with nock, every request checked), and a plan over 8 files,
 * implemented by at most MAX_PARALLEL_WORKERS workers at once on disjoint file sets.
 */

const LLM_KEY = "sk-variants-model-key-0a1b2c3d4e5f6a7b8c9d";
const INSTALLATION_TOKEN = "ghs_" + "T0ken".repeat(7) + "x";
const WEBHOOK_SECRET = "whsec-variants-0123456789";
const FILES = Array.from({ length: 8 }, (_, i) => `src/part${i + 1}.ts`);

let repo: GitFixture;
let model: FakeModel;
let server: TestServer;
let key: string;
const logLines: string[] = [];
let inFlight = 0;
let maxInFlight = 0;

/** Files a parallel worker may change, from its prompt. */
function allowedFiles(prompt: string): string[] {
  const match = /You may change only these files: (.*?)\. Read any file/.exec(prompt);
  return match ? match[1]!.split(", ") : [];
}

const script: Script = {
  plan: (request) =>
    userText(request).includes("one constant per part")
      ? [
          {
            name: "submit_plan",
            arguments: {
              summary: "Add one constant per part.",
              steps: FILES.map((file, i) => ({
                title: `Part ${i + 1}`,
                description: `Create ${file}.`,
                files: [file],
              })),
            },
          },
        ]
      : [
          {
            name: "submit_plan",
            arguments: {
              summary: "Add a greeting module.",
              steps: [{ title: "Greeting", description: "Add it.", files: ["src/greet.ts"] }],
            },
          },
        ],
  implement: (request, n) => {
    const mine = allowedFiles(userText(request));
    if (mine.length === 0) {
      if (n === 0)
        return [
          {
            name: "write_file",
            arguments: {
              path: "src/greet.ts",
              content: "export const greet = (n: string) => `hi ${n}`;\n",
            },
          },
        ];
      return [{ name: "finish", arguments: { summary: "Added greet." } }];
    }
    if (n === 0) {
      // Each worker writes its own files, and tries one of another worker's.
      const foreign = FILES.find((f) => !mine.includes(f))!;
      return [
        ...mine.map((file) => ({
          name: "write_file",
          arguments: { path: file, content: `export const value = "${file}";\n` },
        })),
        { name: "write_file", arguments: { path: foreign, content: "stolen\n" } },
      ];
    }
    return [{ name: "finish", arguments: { summary: `Wrote ${mine.join(", ")}.` } }];
  },
  review: () => [
    {
      name: "submit_review",
      arguments: { verdict: "approve", summary: "Looks right.", comments: [] },
    },
  ],
};

beforeAll(async () => {
  repo = await createGitRepo({ "README.md": "# app\n", "src/index.ts": "export {};\n" });
  const reply = agentModel(script);
  model = await startFakeModel(async (request) => {
    if (roleOf(request) !== "implement") return reply(request);
    inFlight += 1;
    maxInFlight = Math.max(maxInFlight, inFlight);
    await new Promise((r) => setTimeout(r, 150));
    inFlight -= 1;
    return reply(request);
  });
  server = await startTestServer({
    workers: true,
    logLines,
    env: {
      ...fakeModelEnv(model, LLM_KEY),
      EVENT_POLL_MS: "50",
      APP_ID: "321",
      PRIVATE_KEY: testPrivateKey(),
      WEBHOOK_SECRET,
    },
  });
  const signup = await server.signup();
  key = signup.key;
  await linkInstallationWorkspace(server, signup.id, {
    id: "ws_gh_variants",
    installationId: 555,
    repoId: "9001",
    fullName: "acme/app",
    dir: repo.dir,
  });
  nock.disableNetConnect();
  nock.enableNetConnect("127.0.0.1");
}, 60_000);

afterEach(() => {
  nock.cleanAll();
});

afterAll(async () => {
  nock.enableNetConnect();
  await server?.stop();
  await model?.close();
  await repo?.remove();
});

interface FinishedTask {
  status: string;
  phase: string;
  error: string | null;
  pr_url: string | null;
  branch: string;
  diff: string;
  events: StreamEvent[];
}

async function runTask(description: string): Promise<FinishedTask> {
  const created = await server.api("POST", "/tasks", {
    key,
    body: { workspace_id: "ws_gh_variants", repo_id: "9001", description, auto_approve: true },
  });
  expect(created.status).toBe(201);
  const stream = await openTaskStream(server.url, created.body.id, key);
  expect(await stream.closed).toBe(1000);
  const task = (await server.api("GET", `/tasks/${created.body.id}`, { key })).body;
  return { ...task, events: stream.events };
}

describe("a GitHub repository", () => {
  it("opens a pull request with the plan, the review and the checks", async () => {
    const token = mockInstallationToken(555, INSTALLATION_TOKEN);
    let prBody: Record<string, unknown> | undefined;
    const api = nock("https://api.github.com", {
      reqheaders: { authorization: `token ${INSTALLATION_TOKEN}` },
    })
      .get("/repos/acme/app/pulls")
      .query((q) => q.state === "open" && String(q.head).startsWith("acme:foreman/"))
      .reply(200, [])
      .post("/repos/acme/app/pulls", (body: Record<string, unknown>) => {
        prBody = body;
        return true;
      })
      .reply(201, { number: 12, html_url: "https://github.com/acme/app/pull/12" });

    const task = await runTask("Add a greeting helper");
    expect(task.error).toBeNull();
    expect(task).toMatchObject({
      status: "completed",
      phase: "DONE",
      pr_url: "https://github.com/acme/app/pull/12",
    });
    expect(task.events.at(-1)).toMatchObject({
      event_type: "done",
      pr_url: "https://github.com/acme/app/pull/12",
    });
    expect(api.isDone()).toBe(true);
    expect(token.isDone()).toBe(true);
    expect(prBody).toMatchObject({
      head: task.branch,
      base: "main",
      title: "Add a greeting module",
    });
    expect(prBody!.body).toContain("## Plan");
    expect(prBody!.body).toContain("**Greeting** (`src/greet.ts`)");
    expect(prBody!.body).toContain("**Verdict:** approve");
    expect(prBody!.body).toContain("Looks right.");
    expect(prBody!.body).toContain("No checks were found in the repository.");
    // The branch reached the remote through the installation's clone URL.
    expect(await repo.git("show", `${task.branch}:src/greet.ts`)).toContain("greet");
    const everything = JSON.stringify(
      await server.service.db.models.TaskEvent.collection.find({}).toArray(),
    );
    for (const text of [
      everything,
      logLines.join("\n"),
      JSON.stringify(model.requests.map((r) => r.body)),
    ]) {
      expect(text).not.toContain(INSTALLATION_TOKEN);
      expect(text).not.toContain(LLM_KEY);
      expect(text).not.toContain(WEBHOOK_SECRET);
    }
  }, 120_000);

  it("fails with a readable error when GitHub refuses the pull request", async () => {
    mockInstallationToken(555, INSTALLATION_TOKEN);
    nock("https://api.github.com")
      .get("/repos/acme/app/pulls")
      .query(true)
      .reply(200, [])
      .post("/repos/acme/app/pulls")
      .reply(422, { message: "Validation Failed", errors: [{ message: "No commits between" }] });
    const task = await runTask("Add a greeting helper, again");
    expect(task).toMatchObject({ status: "failed", phase: "FAILED" });
    expect(task.error).toMatch(
      /was pushed, but GitHub refused to open the pull request \(HTTP 422\)/,
    );
    expect(task.error).not.toContain(INSTALLATION_TOKEN);
  }, 120_000);
});

describe("parallel implementation", () => {
  it("implements a plan over 8 files with at most 3 workers at once, each on its own files", async () => {
    mockInstallationToken(555, INSTALLATION_TOKEN);
    const pulls = nock("https://api.github.com")
      .get("/repos/acme/app/pulls")
      .query(true)
      .reply(200, [])
      .post("/repos/acme/app/pulls")
      .reply(201, { number: 13, html_url: "https://github.com/acme/app/pull/13" });
    const before = model.requests.length;
    maxInFlight = 0;
    const task = await runTask("Add one constant per part");
    expect(task.error).toBeNull();
    expect(task).toMatchObject({
      status: "completed",
      pr_url: "https://github.com/acme/app/pull/13",
    });
    expect(pulls.isDone()).toBe(true);

    const workers = model.requests.slice(before).filter((r) => roleOf(r) === "implement");
    const firstTurns = workers.filter((r) => toolResults(r).length === 0);
    expect(firstTurns).toHaveLength(3);
    expect(maxInFlight).toBe(3);
    // Disjoint file sets covering the plan.
    const sets = firstTurns.map((r) => allowedFiles(userText(r)));
    expect(sets.flat().sort()).toEqual([...FILES].sort());
    // A worker writing another worker's file is refused.
    const followUps = workers.filter((r) => toolResults(r).length > 0);
    expect(followUps).toHaveLength(3);
    for (const request of followUps) {
      const refusals = toolResults(request).filter((t) => t.content.startsWith("Error:"));
      expect(refusals).toHaveLength(1);
      expect(refusals[0]!.content).toMatch(/is not in the files of this worker's part of the plan/);
    }
    const logs = task.events.filter((e) => e.event_type === "log").map((e) => String(e.message));
    for (const n of [1, 2, 3]) {
      expect(logs.some((l: string) => l.startsWith(`Worker ${n}/3: started on steps`))).toBe(true);
      expect(logs.some((l: string) => l.startsWith(`Worker ${n}/3: finished after`))).toBe(true);
    }
    for (const file of FILES) {
      expect(task.diff).toContain(`+++ b/${file}`);
      expect(await repo.git("show", `${task.branch}:${file}`)).toBe(
        `export const value = "${file}";\n`,
      );
    }
    expect(task.diff).not.toContain("stolen");
  }, 120_000);
});
