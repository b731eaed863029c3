import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { closedIssues, githubRepository, issueTexts } from "../../src/backtest/issues.js";
import { mineCases } from "../../src/backtest/mine.js";
import { createGitRepo, type GitFixture } from "../helpers/git-repo.js";

/*
 * Issue 30 (1): the task text of a mined case is the text of the issue its commit closes,
 * where the history has one (a GitHub repository whose message says `Fixes #N`), read from
 * GitHub's REST API (a local fake here); otherwise, and when the issue cannot be read or is a
 * pull request, the commit message.
 */

let api: Server;
let apiUrl: string;
const requests: Array<{ url: string; auth: string | undefined }> = [];
let repo: GitFixture;

beforeAll(async () => {
  api = createServer((req, res) => {
    requests.push({ url: req.url ?? "", auth: req.headers.authorization });
    const issues: Record<string, unknown> = {
      "/repos/acme/calc/issues/7": {
        number: 7,
        title: "clamp ignores the upper bound",
        body: "clamp(12, 0, 10) answers 12; it should answer 10.",
      },
      "/repos/acme/calc/issues/8": { number: 8, title: "A PR", body: "x", pull_request: {} },
    };
    const issue = issues[req.url ?? ""];
    res.writeHead(issue ? 200 : 404, { "content-type": "application/json" });
    res.end(JSON.stringify(issue ?? { message: "Not Found" }));
  });
  await new Promise<void>((resolve) => api.listen(0, "127.0.0.1", resolve));
  apiUrl = `http://127.0.0.1:${(api.address() as AddressInfo).port}`;

  repo = await createGitRepo({
    "src/math.js": "export const clamp = (v, lo) => Math.max(v, lo);\n",
    "test/math.test.js": "// tests\n",
  });
  const commit = async (files: Record<string, string>, message: string) => {
    const { writeFile } = await import("node:fs/promises");
    for (const [name, content] of Object.entries(files))
      await writeFile(`${repo.dir}/${name}`, content);
    await repo.git("add", "-A");
    await repo.git("commit", "-q", "-m", message);
  };
  await commit(
    {
      "src/math.js": "export const clamp = (v, lo, hi) => Math.min(Math.max(v, lo), hi);\n",
      "test/math.test.js": "// tests of the upper bound\n",
    },
    "Respect the upper bound\n\nFixes #7",
  );
  await commit(
    {
      "src/math.js": "export const clamp = (v, lo, hi) => Math.min(hi, Math.max(lo, v));\n",
      "test/math.test.js": "// reordered\n",
    },
    "Reorder clamp (closes #8, refs #9)",
  );
  await commit(
    {
      "src/math.js": "export const clamp = (v, lo, hi) => Math.min(hi, Math.max(lo, v)); // x\n",
      "test/math.test.js": "// plain\n",
    },
    "Plain change with no issue",
  );
}, 30_000);

afterAll(async () => {
  await new Promise<void>((resolve) => api.close(() => resolve()));
  await repo?.remove();
});

describe("a linked issue's text as the task", () => {
  it("reads the closing keywords and GitHub clone URLs", () => {
    expect(closedIssues("Fixes #7, closes #8 and resolved: #9; refs #10; fixes #7")).toEqual([
      7, 8, 9,
    ]);
    expect(closedIssues("See #3")).toEqual([]);
    expect(githubRepository("https://github.com/acme/calc.git")).toEqual({
      owner: "acme",
      name: "calc",
    });
    expect(githubRepository("git@github.com:acme/calc")).toEqual({ owner: "acme", name: "calc" });
    expect(githubRepository("https://gitlab.com/acme/calc.git")).toBeNull();
  });

  it("takes the issue's title and body when the commit closes a readable issue", async () => {
    const cases = await mineCases(repo.dir, "calc", {
      issueText: issueTexts({ owner: "acme", name: "calc", apiUrl, token: "tok-123" }),
    });
    expect(cases.map((c) => c.message.split("\n")[0])).toEqual([
      "Plain change with no issue",
      // #8 is a pull request: the commit message stays.
      "Reorder clamp (closes #8, refs #9)",
      "clamp ignores the upper bound",
    ]);
    const linked = cases[2]!;
    expect(linked.issue).toBe(7);
    expect(linked.message).toBe(
      "clamp ignores the upper bound\n\nclamp(12, 0, 10) answers 12; it should answer 10.",
    );
    expect(linked.commit_message).toBe("Respect the upper bound\n\nFixes #7");
    expect(cases[1]!.issue).toBeUndefined();
    expect(cases[0]!.commit_message).toBeUndefined();
    // Only closed issues are asked for, with the token; "refs #9" is not a closing keyword.
    expect(requests.map((r) => r.url).sort()).toEqual([
      "/repos/acme/calc/issues/7",
      "/repos/acme/calc/issues/8",
    ]);
    expect(requests.every((r) => r.auth === "Bearer tok-123")).toBe(true);
  });

  it("keeps the commit message when the API cannot be reached", async () => {
    const cases = await mineCases(repo.dir, "calc", {
      issueText: issueTexts({ owner: "acme", name: "calc", apiUrl: "http://127.0.0.1:9" }),
    });
    expect(cases[2]!.message).toBe("Respect the upper bound\n\nFixes #7");
    expect(cases[2]!.issue).toBeUndefined();
  });
});
