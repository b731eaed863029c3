import { describe, expect, it } from "vitest";
import { jiraClient } from "../../src/integrations/jira.js";
import type { IntegrationRecord } from "../../src/domain/integrations/store.js";

/*
 * A Jira integration names the site the service calls; unless local hosts are allowed
 * (ALLOW_LOCAL_REPOS), only https:// sites on public addresses are called.
 */

const integration = (site_url: string) =>
  ({
    _id: "int_x",
    account_id: "acct_x",
    type: "jira",
    name: "x",
    enabled: true,
    settings: { site_url, email: "bot@example.com", projects: {}, label: "agent", transitions: {} },
    secrets: { webhook_secret: "0123456789", api_token: "0123456789" },
    created_at: new Date(),
    updated_at: new Date(),
  }) as IntegrationRecord;

describe("jira site policy", () => {
  it("refuses http:// and non-public addresses", async () => {
    await expect(jiraClient(integration("http://acme.atlassian.net"))).rejects.toThrow(/https/);
    await expect(jiraClient(integration("https://127.0.0.1:8443"))).rejects.toThrow(/non-public/);
    await expect(jiraClient(integration("https://[::1]"))).rejects.toThrow(/non-public/);
    await expect(jiraClient(integration("https://10.1.2.3"))).rejects.toThrow(/non-public/);
  });

  it("allows a public https site, and local ones when told to", async () => {
    await expect(jiraClient(integration("https://93.184.215.14"))).resolves.toBeTruthy();
    await expect(jiraClient(integration("http://127.0.0.1:9"), true)).resolves.toBeTruthy();
  });
});
