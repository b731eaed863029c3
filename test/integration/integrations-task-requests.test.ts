import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { linearDeliveryMarker } from "../../src/integrations/linear/door.js";
import {
  deliveryTaskId,
  type TrackerTaskRequest,
} from "../../src/integrations/shared/task-request.js";
import { taskRequestJob } from "../../src/integrations/shared/task-requests.js";
import { deliveryMarkers } from "../../src/integrations/shared/tracker.js";
import type { FakeModel } from "../helpers/fake-model.js";
import type { GitFixture } from "../helpers/git-repo.js";
import type { TestServer } from "../helpers/server.js";
import { startGreeterStack } from "../helpers/greeter-stack.js";

/*
 * The task request job that Slack, Linear and Jira deliveries queue (the doors answer after
 * that one insert): run against the real database and a Linear faked at its HTTP boundary.
 * Run twice for one delivery (a worker that died after creating the task), it makes one
 * task; a replayed body under another delivery id makes none; a request the account cannot
 * have is answered on the issue, through Linear failures, with their retries.
 */

interface Comment {
  issueId: string;
  body: string;
}

/** Linear's GraphQL API, faked: comments are recorded; `failing` comments fail with 500. */
async function startFakeLinear() {
  const comments: Comment[] = [];
  const state = { failing: 0 };
  const server: Server = createServer((req, res) => {
    let raw = "";
    req.on("data", (c) => (raw += c));
    req.on("end", () => {
      const { variables } = JSON.parse(raw || "{}") as { variables: Record<string, unknown> };
      res.setHeader("content-type", "application/json");
      if (state.failing > 0) {
        state.failing -= 1;
        res.statusCode = 500;
        res.end(JSON.stringify({ errors: [{ message: "Linear is down" }] }));
        return;
      }
      // The SDK's createComment: { input: { issueId, body } }.
      const input = (variables.input ?? {}) as Record<string, unknown>;
      comments.push({ issueId: String(input.issueId), body: String(input.body) });
      res.end(JSON.stringify({ data: { commentCreate: { success: true } } }));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/graphql`,
    comments,
    state,
    server,
  };
}

let repo: GitFixture;
let model: FakeModel;
let linear: Awaited<ReturnType<typeof startFakeLinear>>;
let server: TestServer;
let key: string;
let integrationId: string;
let workspaceId: string;
let repoId: string;

beforeAll(async () => {
  linear = await startFakeLinear();
  ({ repo, model, server, key, workspaceId, repoId } = await startGreeterStack(
    "sk-requests-model-key-0123456789abcdef",
    { LINEAR_API_URL: linear.url },
  ));
  const created = await server.api("POST", "/integrations", {
    key,
    body: {
      type: "linear",
      name: "requests",
      settings: { teams: { ENG: { workspace_id: workspaceId, repo_id: repoId } } },
      secrets: { webhook_secret: "linear-secret-0123456789abcdef", api_key: "lin_api_x0123456789" },
    },
  });
  expect(created.status).toBe(201);
  integrationId = created.body.id;
}, 120_000);

afterAll(async () => {
  await server?.stop();
  await model?.close();
  await new Promise((r) => linear?.server.close(r));
  await repo?.remove();
});

function job() {
  return taskRequestJob({
    tasks: server.service.pipeline.taskDeps,
    logger: server.service.logger,
    vendors: { linear: { apiUrl: linear.url } },
    backoffMs: 5,
  });
}

/** A Linear delivery's request as the door queues it. */
function request(
  issueId: string,
  delivery: string,
  body: string,
  target = { workspace_id: workspaceId, repo_id: repoId },
): TrackerTaskRequest {
  return {
    type: "linear",
    integration_id: integrationId,
    task_id: deliveryTaskId(integrationId, `id-${delivery}`),
    claims: deliveryMarkers((id) => linearDeliveryMarker(integrationId, id), delivery, body),
    target,
    description: `Work on ${issueId}`,
    origin: { integration_id: integrationId, linear_issue: issueId },
    report_to: {
      integration_id: integrationId,
      type: "linear",
      ref: { issue_id: issueId, team_id: "team-1" },
    },
  };
}

const tasksOfIssue = (issueId: string) =>
  server.service.db.models.Task.collection.find({ "report_to.ref.issue_id": issueId }).toArray();

async function cancelAll(issueId: string) {
  for (const task of await tasksOfIssue(issueId))
    await server.api("POST", `/tasks/${String(task._id)}/cancel`, { key });
}

describe("integrations: the task request job", () => {
  it("makes one task when it runs twice for a delivery, at once or one after the other", async () => {
    const data = request("issue-rerun", "dlv-rerun", '{"signed":"body-1"}');
    await Promise.all([job().run(data, undefined as never), job().run(data, undefined as never)]);
    await job().run(data, undefined as never);
    const tasks = await tasksOfIssue("issue-rerun");
    expect(tasks).toHaveLength(1);
    expect(tasks[0]!._id).toBe(data.task_id);
    expect(tasks[0]).toMatchObject({ source: "linear", description: "Work on issue-rerun" });
    await cancelAll("issue-rerun");
  });

  it("makes none for the same signed body under another delivery id", async () => {
    const body = '{"signed":"body-2"}';
    const first = request("issue-replay", "dlv-first", body);
    await job().run(first, undefined as never);
    const replay = request("issue-replay", "dlv-other", body);
    expect(replay.task_id).not.toBe(first.task_id);
    await job().run(replay, undefined as never);
    expect((await tasksOfIssue("issue-replay")).map((t) => t._id)).toEqual([first.task_id]);
    // Nothing said on the issue about the replay.
    expect(linear.comments.filter((c) => c.issueId === "issue-replay")).toEqual([]);
    await cancelAll("issue-replay");
  });

  it("says on the issue why a request cannot become a task, through Linear failures", async () => {
    linear.state.failing = 2;
    const gone = request("issue-gone", "dlv-gone", '{"signed":"body-3"}', {
      workspace_id: workspaceId,
      repo_id: "repo-that-is-not-there",
    });
    await job().run(gone, undefined as never);
    expect(await tasksOfIssue("issue-gone")).toEqual([]);
    expect(linear.state.failing).toBe(0);
    const said = linear.comments.filter((c) => c.issueId === "issue-gone");
    expect(said).toHaveLength(1);
    expect(said[0]!.body).toMatch(/^Could not start the task: No such repository/);
  });

  it("drops the request of an integration disabled meanwhile, and makes nothing", async () => {
    const late = request("issue-disabled", "dlv-disabled", '{"signed":"body-4"}');
    const patched = await server.api("PATCH", `/integrations/${integrationId}`, {
      key,
      body: { enabled: false },
    });
    expect(patched.status).toBe(200);
    await job().run(late, undefined as never);
    expect(await tasksOfIssue("issue-disabled")).toEqual([]);
    expect(linear.comments.filter((c) => c.issueId === "issue-disabled")).toEqual([]);
  });
});
