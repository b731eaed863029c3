import nock from "nock";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { agentModel, type Script } from "../helpers/agent-model.js";
import { CALC_FIX, CALC_PLAN, calcRepoFiles } from "../helpers/calc-repo.js";
import { fakeModelEnv, startFakeModel, type FakeModel } from "../helpers/fake-model.js";
import { createGitRepo, type GitFixture } from "../helpers/git-repo.js";
import {
  linkInstallationWorkspace,
  mockInstallationToken,
  testPrivateKey,
} from "../helpers/github.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { startTask } from "../helpers/ws.js";

/*
 * The evidence a change carries (docs/api.md, "Evidence"), end to end: a task on a GitHub
 * repository whose node:test suite is red on the base commit (clamp ignores its bounds, and an
 * unrelated date test fails) is fixed by the scripted model, which also adds a test of its own; the
 * real checks run in the sandbox on the base and after the change, and the pull request GitHub
 * receives (its API faked with nock at the HTTP boundary) says what ran, what the change fixed, the
 * test it added and reproduced, what was red before and still is, fix rounds, cost and time, as
 * `GET /tasks/{id}` `evidence` does.
 */

/** The calc fixture's way of loading its TypeScript module from a plain .mjs test. */
const LOAD_MATH = `import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
const source = readFileSync(new URL("../src/math.ts", import.meta.url), "utf8");
const js = source.replace(/:\\s*number/g, "");
const { clamp } = await import(\`data:text/javascript,\${encodeURIComponent(js)}\`);
`;

/** The repository: calc, its whole test folder run, and a date test red for its own reasons. */
function repoFiles(): Record<string, string> {
  const files = calcRepoFiles();
  const pkg = JSON.parse(files["package.json"]!) as { scripts: Record<string, string> };
  pkg.scripts.test = "node --test test/";
  return {
    ...files,
    "package.json": `${JSON.stringify(pkg, null, 2)}\n`,
    "test/date.test.mjs": `import { test } from "node:test";
import assert from "node:assert/strict";
test("knows the holiday", () => assert.equal("2026-12-25", "2026-12-24"));
`,
  };
}

const INSTALLATION_TOKEN = "ghs_" + "Evid3nce".repeat(4) + "x";

const script: Script = {
  plan: () => [{ name: "submit_plan", arguments: CALC_PLAN }],
  implement: (_request, n) =>
    n === 0
      ? [
          {
            name: "edit_file",
            arguments: { path: "src/math.ts", old_text: "return value;", new_text: CALC_FIX },
          },
          {
            name: "write_file",
            arguments: {
              path: "test/clamp-edge.test.mjs",
              content: `${LOAD_MATH}test("clamps below the range", () => assert.equal(clamp(-1, 0, 5), 0));\n`,
            },
          },
        ]
      : [{ name: "finish", arguments: { summary: "clamp respects both bounds." } }],
  review: () => [
    {
      name: "submit_review",
      arguments: { verdict: "approve", summary: "Correct.", comments: [] },
    },
  ],
};

let repo: GitFixture;
let model: FakeModel;
let server: TestServer;
let key: string;

beforeAll(async () => {
  repo = await createGitRepo(repoFiles());
  model = await startFakeModel(agentModel(script));
  server = await startTestServer({
    workers: true,
    env: {
      ...fakeModelEnv(model, "sk-evidence-model-key-0123456789abcdef"),
      EVENT_POLL_MS: "50",
      APP_ID: "321",
      PRIVATE_KEY: testPrivateKey(),
      WEBHOOK_SECRET: "whsec-evidence-0123456789",
    },
  });
  const signup = await server.signup();
  key = signup.key;
  await linkInstallationWorkspace(server, signup.id, {
    id: "ws_gh_evidence",
    installationId: 777,
    repoId: "7001",
    fullName: "acme/calc",
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

describe("the evidence of a change", () => {
  it("is in the pull request's body and in GET /tasks/{id}: what ran, what was fixed, rounds, cost and time", async () => {
    const token = mockInstallationToken(777, INSTALLATION_TOKEN);
    let prBody = "";
    const api = nock("https://api.github.com")
      .get("/repos/acme/calc/pulls")
      .query(true)
      .reply(200, [])
      .post("/repos/acme/calc/pulls", (body: { body: string }) => {
        prBody = body.body;
        return true;
      })
      .reply(201, { number: 3, html_url: "https://github.com/acme/calc/pull/3" });

    const { id, stream } = await startTask(server, key, {
      workspace_id: "ws_gh_evidence",
      repo_id: "7001",
      description: "Make clamp respect both bounds",
      auto_approve: true,
    });
    expect(await stream.closed).toBe(1000);
    const task = (await server.api("GET", `/tasks/${id}`, { key })).body;
    expect(task.error).toBeNull();
    expect(task.status).toBe("completed");
    expect(api.isDone()).toBe(true);
    expect(token.isDone()).toBe(true);

    const evidence = task.evidence;
    const base = await repo.git("rev-parse", "HEAD");
    expect(evidence).toMatchObject({
      base_commit: base.trim(),
      // The date test keeps the check red, as it was on the base: not the change's.
      commands: [{ command: "npm run test", ok: false, pre_existing: true }],
      tests: { total: 4, passed: 3, failed: 1, skipped: 0 },
      fixed: { ids: ["test/math.test.mjs > clamp keeps values in range"], count: 1 },
      added: { ids: ["test/clamp-edge.test.mjs > clamps below the range"], count: 1 },
      reproduced: { ids: ["test/clamp-edge.test.mjs > clamps below the range"], count: 1 },
      still_failing: { ids: ["test/date.test.mjs > knows the holiday"], count: 1 },
      new_failures: { ids: [], count: 0 },
      fix_rounds: 0,
    });
    expect(evidence.cost.usd).toBeGreaterThan(0);
    expect(evidence.cost.usd).toBe(task.cost.usd);
    expect(evidence.duration_ms).toBeGreaterThan(0);

    expect(prBody).toContain("## Verification");
    expect(prBody).toMatch(
      /- ⚠️ [^:\n]+: `npm run test` \(\d+\.\d s\) — failed the same way on the base commit\n/,
    );
    expect(prBody).toContain(`Compared with the base commit \`${base.trim().slice(0, 12)}\`.`);
    expect(prBody).toContain("Tests: 3 passed, 1 failed (4 in all).");
    expect(prBody).toContain(
      "**Fixed: red on the base commit, green now** (1)\n\n- `test/math.test.mjs > clamp keeps values in range`",
    );
    expect(prBody).toContain(
      "**Tests added or edited** (1)\n\n- `test/clamp-edge.test.mjs > clamps below the range` — reproduced: red on the base commit, green now",
    );
    expect(prBody).toContain(
      "Reproduced: 1 of 1 added or edited tests fail on the base commit and pass now.",
    );
    expect(prBody).toContain(
      "**Still failing, as on the base commit (not this change's)** (1)\n\n- `test/date.test.mjs > knows the holiday`",
    );
    expect(prBody).toContain(`Fix rounds: 0 · model cost: $${evidence.cost.usd.toFixed(4)} (`);
    expect(prBody).toMatch(/ · time: \d+\.\d s\./);
  }, 120_000);
});
