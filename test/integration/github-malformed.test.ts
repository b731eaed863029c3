import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HANDLED_EVENTS } from "../../src/github/payloads.js";
import { examplePayload, signedDelivery, testPrivateKey } from "../helpers/github.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

/*
 * Correctly signed deliveries (signed with @octokit/webhooks-methods) whose body is not
 * what GitHub sends: each handled event with several bad bodies answers 400 with the error
 * body and a log line, never 500; GitHub's own example payloads still pass.
 */

const secret = "whsec-malformed-0123456789";
let server: TestServer;
const lines: string[] = [];

beforeAll(async () => {
  server = await startTestServer({
    env: { APP_ID: "12345", PRIVATE_KEY: testPrivateKey(), WEBHOOK_SECRET: secret },
    logLines: lines,
  });
}, 60_000);

afterAll(async () => {
  await server?.stop();
});

async function deliver(event: string, payload: unknown) {
  const { raw, headers } = await signedDelivery(secret, event, payload, randomUUID());
  return server.api("POST", "/github/webhooks", { raw, headers });
}

/** The object each handler reads first, removed or broken in the bad bodies. */
const MAIN: Record<string, string> = {
  check_run: "check_run",
  check_suite: "check_suite",
  workflow_run: "workflow_run",
  issue_comment: "comment",
  issues: "issue",
  pull_request: "pull_request",
  pull_request_review: "review",
  pull_request_review_comment: "comment",
  installation: "installation",
  installation_repositories: "installation",
};

/** A field of the main object the handler reads, sent with the wrong type. */
const FIELD: Record<string, string> = {
  check_run: "id",
  check_suite: "id",
  workflow_run: "id",
  comment: "id",
  issue: "number",
  pull_request: "head",
  review: "id",
  installation: "id",
};

function badBodies(event: string, action: string): Array<[string, unknown]> {
  const example = examplePayload(event, action);
  const main = MAIN[event]!;
  const without = (key: string) => {
    const copy = structuredClone(example);
    delete copy[key];
    return copy;
  };
  const bodies: Array<[string, unknown]> = [
    ["null", null],
    ["a string", "hello"],
    ["a number", 42],
    ["an array", [example]],
    ["only the action", { action }],
    ["a numeric action", { ...example, action: 7 }],
    [`no ${main}`, without(main)],
    [`${main} null`, { ...example, [main]: null }],
    [`${main} a string`, { ...example, [main]: "x" }],
    [
      `${main}.${FIELD[main]} of the wrong type`,
      { ...example, [main]: { ...(example[main] as object), [FIELD[main]!]: "x" } },
    ],
  ];
  if ("repository" in example) bodies.push(["no repository", without("repository")]);
  if (event === "issue_comment") bodies.push(["no issue", without("issue")]);
  if (event.startsWith("pull_request_review"))
    bodies.push(["no pull_request", without("pull_request")]);
  if (event === "installation_repositories")
    bodies.push([
      "no repository list",
      without(action === "added" ? "repositories_added" : "repositories_removed"),
    ]);
  return bodies;
}

describe("signed deliveries with a malformed body", () => {
  for (const handled of HANDLED_EVENTS) {
    const [event, action] = handled.split(".") as [string, string];
    it(`${handled}: 400 with the error body for each bad body, 202 for GitHub's example`, async () => {
      for (const [what, body] of badBodies(event, action)) {
        const res = await deliver(event, body);
        expect(res.status, `${handled} with ${what}`).toBe(400);
        expect(res.body.error.code, what).toBe("validation_failed");
        expect(typeof res.body.error.message).toBe("string");
      }
      const ok = await deliver(event, examplePayload(event, action));
      expect(ok.status, `${handled} example`).toBe(202);
    });
  }

  it("answers bodies of events no handler reads by their JSON type only", async () => {
    expect((await deliver("ping", { zen: "hi", hook_id: 1 })).status).toBe(202);
    expect((await deliver("ping", null)).status).toBe(400);
    expect((await deliver("star", [])).status).toBe(400);
  });

  it("logs each refusal", () => {
    const refusals = lines.filter((l) => l.includes("malformed body refused"));
    expect(refusals.length).toBeGreaterThan(HANDLED_EVENTS.length * 5);
    expect(lines.some((l) => /"level":50|request failed/.test(l))).toBe(false);
  });
});
