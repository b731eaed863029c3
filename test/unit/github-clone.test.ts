import nock from "nock";
import { afterEach, describe, expect, it } from "vitest";
import { createProbot, installationCloneUrl } from "../../src/github-api/app.js";
import { createLogger } from "../../src/util/logger.js";
import { redactText } from "../../src/util/redact.js";
import { testPrivateKey } from "../helpers/github.js";

afterEach(() => {
  nock.cleanAll();
});

describe("cloning a GitHub repository", () => {
  it("uses a fresh installation token in the clone URL and never shows it", async () => {
    const token = "ghs_" + "x".repeat(36);
    const scope = nock("https://api.github.com")
      .post("/app/installations/4242/access_tokens")
      .reply(201, { token, expires_at: new Date(Date.now() + 3600_000).toISOString() });
    const probot = createProbot(
      {
        appId: "1",
        privateKey: testPrivateKey(),
        webhookSecret: "secret-123",
        webhookPath: "/github/webhooks",
        baseUrl: "https://api.github.com",
        webUrl: "https://github.com",
        clientId: undefined,
        clientSecret: undefined,
        slug: undefined,
        agentLabel: "agent",
        progress: true,
      },
      createLogger({ level: "silent" }),
      { testing: true },
    );
    const url = await installationCloneUrl(probot, 4242, "https://github.com/acme/app.git");
    expect(url).toBe(`https://x-access-token:${token}@github.com/acme/app.git`);
    expect(scope.isDone()).toBe(true);
    expect(redactText(`fatal: could not read from ${url}`)).not.toContain(token);
  });
});
