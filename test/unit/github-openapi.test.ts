import nock from "nock";
import { afterEach, describe, expect, it } from "vitest";
import {
  assertGithubRequest,
  checkGithubRequest,
  expectValidGithubRequests,
  githubRequests,
  watchGithub,
} from "../helpers/github-openapi.js";

const API = "https://api.github.com";

afterEach(() => {
  nock.cleanAll();
  // Leave nothing recorded for the next test, whatever this one did.
  try {
    expectValidGithubRequests();
  } catch {
    // a test below records invalid requests on purpose
  }
});

describe("checking a request against GitHub's REST description", () => {
  it("accepts a valid issue comment and names its operation", () => {
    const check = checkGithubRequest({
      method: "POST",
      url: `${API}/repos/acme/app/issues/12/comments`,
      body: JSON.stringify({ body: "Plan ready: reply /approve" }),
    });
    expect(check).toEqual({ ok: true, operationId: "issues/create-comment", problems: [] });
  });

  it("refuses a path GitHub does not have, and a known path with the wrong method", () => {
    const unknown = checkGithubRequest({
      method: "GET",
      url: `${API}/repos/acme/app/no-such-thing`,
    });
    expect(unknown.ok).toBe(false);
    expect(unknown.problems[0]).toContain("no operation of api.github.com has this path");
    const wrongMethod = checkGithubRequest({
      method: "PUT",
      url: `${API}/repos/acme/app/issues/12/comments`,
      body: { body: "x" },
    });
    expect(wrongMethod.ok).toBe(false);
    expect(wrongMethod.problems[0]).toContain("only for GET, POST");
  });

  it("refuses a body with a wrong type, a missing required field or an unknown field", () => {
    const wrongType = checkGithubRequest({
      method: "POST",
      url: `${API}/repos/acme/app/issues/12/comments`,
      body: { body: 42 },
    });
    expect(wrongType.ok).toBe(false);
    expect(wrongType.problems).toEqual(["body/body: must be string"]);
    const missing = checkGithubRequest({
      method: "POST",
      url: `${API}/repos/acme/app/issues/12/reactions`,
      body: {},
    });
    expect(missing.problems).toEqual(["body: must have required property 'content'"]);
    const badEnum = checkGithubRequest({
      method: "POST",
      url: `${API}/repos/acme/app/issues/12/reactions`,
      body: { content: "thumbsup" },
    });
    expect(badEnum.problems[0]).toContain("must be one of");
    const typo = checkGithubRequest({
      method: "POST",
      url: `${API}/repos/acme/app/pulls`,
      body: { title: "t", head: "feature", base: "main", bodyy: "typo" },
    });
    expect(typo.problems).toEqual(['body: unknown field "bodyy"']);
    const noBody = checkGithubRequest({
      method: "POST",
      url: `${API}/repos/acme/app/issues/1/comments`,
    });
    expect(noBody.problems[0]).toContain("a request body is required");
  });

  it("checks path and query parameters", () => {
    const badNumber = checkGithubRequest({
      method: "GET",
      url: `${API}/repos/acme/app/issues/twelve`,
    });
    expect(badNumber.ok).toBe(false);
    expect(badNumber.problems).toEqual(["path.issue_number: must be integer"]);
    const paged = checkGithubRequest({
      method: "GET",
      url: `${API}/user/installations?per_page=100&page=2`,
    });
    expect(paged).toMatchObject({
      ok: true,
      operationId: "apps/list-installations-for-authenticated-user",
    });
    const unknownQuery = checkGithubRequest({
      method: "GET",
      url: `${API}/user/installations?perpage=100`,
    });
    expect(unknownQuery.problems[0]).toContain("query.perpage: not a parameter");
    const badQuery = checkGithubRequest({
      method: "GET",
      url: `${API}/user/installations?per_page=many`,
    });
    expect(badQuery.problems).toEqual(["query.per_page: must be integer"]);
  });

  it("lets a trailing file path or ref contain slashes, and nothing else", () => {
    const file = checkGithubRequest({
      method: "GET",
      url: `${API}/repos/acme/app/contents/src/lib/index.ts?ref=main`,
    });
    expect(file).toMatchObject({ ok: true, operationId: "repos/get-content" });
    const extra = checkGithubRequest({ method: "GET", url: `${API}/repos/acme/app/extra/segment` });
    expect(extra.ok).toBe(false);
  });

  it("prefers the more specific of two matching templates", () => {
    // /repos/{owner}/{repo}/issues/comments/{comment_id}, not .../issues/{issue_number}/...
    const check = checkGithubRequest({
      method: "PATCH",
      url: `${API}/repos/acme/app/issues/comments/77`,
      body: { body: "edited" },
    });
    expect(check).toMatchObject({ ok: true, operationId: "issues/update-comment" });
  });

  it("checks GitHub Enterprise Server requests under /api/v3 against the GHES description", () => {
    const check = checkGithubRequest({
      method: "POST",
      url: "https://ghe.example.com/api/v3/repos/acme/app/issues/3/comments",
      body: { body: "hello" },
    });
    expect(check).toEqual({ ok: true, operationId: "issues/create-comment", problems: [] });
    const bad = checkGithubRequest({
      method: "POST",
      url: "https://ghe.example.com/api/v3/repos/acme/app/issues/3/comments",
      body: { body: ["not", "a", "string"] },
    });
    expect(bad.ok).toBe(false);
    const token = checkGithubRequest({
      method: "POST",
      url: "https://ghe.example.com/api/v3/app/installations/5/access_tokens",
    });
    expect(token).toMatchObject({ ok: true, operationId: "apps/create-installation-access-token" });
  });

  it("checks the OAuth code exchange of the web host", () => {
    const good = checkGithubRequest({
      method: "POST",
      url: "https://github.com/login/oauth/access_token",
      body: { client_id: "Iv1.abc", client_secret: "s3cret", code: "c0de" },
    });
    expect(good).toEqual({ ok: true, operationId: "oauth/access-token", problems: [] });
    const bad = checkGithubRequest({
      method: "POST",
      url: "https://ghe.example.com/login/oauth/access_token",
      body: { client_id: "Iv1.abc", code: "c0de" },
    });
    expect(bad.problems).toEqual(["body: must have required property 'client_secret'"]);
  });

  it("assertGithubRequest throws with every problem", () => {
    expect(() =>
      assertGithubRequest({
        method: "POST",
        url: `${API}/repos/acme/app/issues/12/reactions`,
        body: { content: 1, extra: true },
      }),
    ).toThrow(/does not fit GitHub's REST description:\n- /);
    const check = checkGithubRequest({
      method: "POST",
      url: `${API}/repos/acme/app/issues/12/reactions`,
      body: { content: 1, extra: true },
    });
    expect(check.problems).toEqual(
      expect.arrayContaining(['body: unknown field "extra"', "body/content: must be string"]),
    );
  });
});

describe("watching nock scopes", () => {
  it("records intercepted requests with their full URL and body, and accepts valid ones", async () => {
    watchGithub(nock(API).post("/repos/acme/app/issues/5/comments").reply(201, { id: 1 }));
    const res = await fetch(`${API}/repos/acme/app/issues/5/comments`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ body: "hi" }),
    });
    expect(res.status).toBe(201);
    const [request] = githubRequests();
    expect(request).toMatchObject({
      method: "POST",
      url: `${API}/repos/acme/app/issues/5/comments`,
      body: '{"body":"hi"}',
      check: { ok: true, operationId: "issues/create-comment" },
    });
    expect(() => expectValidGithubRequests()).not.toThrow();
    expect(githubRequests()).toEqual([]);
  });

  it("makes expectValidGithubRequests fail after an invalid request went out", async () => {
    watchGithub(nock(API).post("/repos/acme/app/issues/5/reactions").reply(201, {}));
    await fetch(`${API}/repos/acme/app/issues/5/reactions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ content: "thumbsup" }),
    });
    expect(() => expectValidGithubRequests()).toThrow(
      /POST https:\/\/api\.github\.com\/repos\/acme\/app\/issues\/5\/reactions\n {2}- body\/content: must be one of/,
    );
    // The failure is reported once; the next check starts clean.
    expect(() => expectValidGithubRequests()).not.toThrow();
  });
});
