import { agentModel, greetScript } from "./agent-model.js";
import { fakeModelEnv, startFakeModel, type FakeModel } from "./fake-model.js";
import { createGitRepo, type GitFixture } from "./git-repo.js";
import { startTestServer, type TestServer } from "./server.js";
import { TASK_REQUEST_JOB } from "../../src/integrations/shared/task-request.js";

/*
 * The set-up the integration doors' tests share: a small repository, the scripted model that
 * adds greet() to it, the service with workers, an account and a plain-git workspace holding
 * the repository. Each test adds its vendor's fake and its integration.
 */
export interface GreeterStack {
  repo: GitFixture;
  model: FakeModel;
  server: TestServer;
  key: string;
  workspaceId: string;
  repoId: string;
}

export async function startGreeterStack(
  modelKey: string,
  env: Record<string, string> = {},
): Promise<GreeterStack> {
  const repo = await createGitRepo({
    "README.md": "# greeter\n",
    "src/index.js": "export const v = 1;\n",
  });
  const model = await startFakeModel(agentModel(greetScript));
  const server = await startTestServer({
    workers: true,
    env: { ...fakeModelEnv(model, modelKey), EVENT_POLL_MS: "50", ...env },
  });
  const key = (await server.signup()).key;
  const ws = await server.api("POST", "/workspaces", {
    key,
    body: {
      name: "local",
      repos: [{ name: "acme/greeter", clone_url: repo.dir, default_branch: "main" }],
    },
  });
  const workspaceId = ws.body.id as string;
  const repos = await server.api("GET", `/workspaces/${workspaceId}/repos`, { key });
  return { repo, model, server, key, workspaceId, repoId: repos.body[0].id as string };
}

/** Polls `probe` every 50 ms until it gives something other than undefined, for at most `ms`. */
export async function waitFor<T>(
  what: string,
  probe: () => T | undefined | Promise<T | undefined>,
  ms = 30_000,
): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Polls GET /tasks/{id} until the task's status is one of `statuses`; gives the task. */
export function taskInStatus(
  server: TestServer,
  key: string,
  id: string,
  statuses: string[],
  ms = 120_000,
) {
  return waitFor(
    `task ${id} in ${statuses.join("/")}`,
    async () => {
      const t = (await server.api("GET", `/tasks/${id}`, { key })).body;
      return statuses.includes(t.status) ? t : undefined;
    },
    ms,
  );
}

/**
 * Waits until the task request job of `taskId` (queued by a Slack, Linear or Jira door) has
 * run, whatever it did: created the task, refused it, or found its delivery acted on before.
 */
export function taskRequestSettled(server: TestServer, taskId: string): Promise<unknown> {
  const jobs = server.service.db.connection.db!.collection("jobs");
  return waitFor(`the task request of ${taskId}`, async () => {
    const job = await jobs.findOne({
      name: TASK_REQUEST_JOB.name,
      "data.task_id": taskId,
      lastFinishedAt: { $ne: null },
    });
    return job ?? undefined;
  });
}
