import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { noProgress } from "../../src/domain/tasks/model.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

/*
 * The service's one context (src/context.ts): built once from the configuration and frozen,
 * every member there; a part that is off (here: no GitHub App) is an implementation that says
 * so rather than a hole the domain checks for.
 */

let server: TestServer;

beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => {
  await server.stop();
});

describe("the service's context", () => {
  it("is frozen, and so are the task operations every door shares", () => {
    const { context } = server.service;
    expect(Object.isFrozen(context)).toBe(true);
    expect(Object.isFrozen(context.tasks)).toBe(true);
    expect(Object.isFrozen(context.integrations)).toBe(true);
    expect(() => {
      (context.tasks as { kick: () => void }).kick = () => undefined;
    }).toThrow(TypeError);
    // The pipeline runs on the same operations the doors use.
    expect(server.service.pipeline.taskDeps).toBe(context.tasks);
  });

  it("without a GitHub App: no progress reports, and the webhook path answers 404 in the error format", async () => {
    const { context } = server.service;
    expect(context.github).toBeUndefined();
    expect(context.tasks.reportProgress).toBe(noProgress);
    const res = await server.api("POST", "/github/webhooks", {
      raw: "{}",
      headers: {
        "content-type": "application/json",
        "x-github-event": "ping",
        "x-github-delivery": "d-1",
      },
    });
    expect(res.status).toBe(404);
    expect(res.body).toEqual({
      error: expect.objectContaining({
        code: "not_found",
        message: "No such route (the GitHub App is not configured on this server).",
      }),
    });
  });
});
