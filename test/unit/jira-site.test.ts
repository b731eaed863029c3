import { request } from "node:https";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { commentOnJiraIssue, jiraClient } from "../../src/integrations/jira/door.js";
import type { IntegrationRecord } from "../../src/domain/integrations/store.js";
import { guardedAxiosConfig, type AddressPolicy } from "../../src/util/outbound.js";
import { LOCAL_TLS, startLocalHttps, type LocalHttps } from "../helpers/local-https.js";

/*
 * A Jira integration names the site the service calls; unless local hosts are allowed
 * (ALLOW_LOCAL_REPOS), only https:// sites on public addresses are called, checked at every
 * connection (a DNS answer that changes later cannot point a call inward), and no redirect
 * is followed (not to http://, not to another host or a private address). The calls go to
 * local HTTPS fakes through the test-only address policy that allows exactly the first one.
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

describe("jira calls: every hop checked", () => {
  let site: LocalHttps;
  let other: LocalHttps;
  let plain: Server;
  let plainRequests = 0;
  let plainPort = 0;
  /** Where the site sends its next answer: a 302 there, or 201 when unset. */
  let redirectTo: string | undefined;

  /** The seam: exactly the site's first hop (127.0.0.1 on its port), trusting its certificate. */
  const onlySite = (): AddressPolicy => ({
    refuse: (address, port) =>
      address === "127.0.0.1" && port === site.port
        ? null
        : `not the test site (${address}:${port})`,
    ca: LOCAL_TLS.cert,
  });

  beforeAll(async () => {
    site = await startLocalHttps((_req, res) => {
      if (redirectTo) res.writeHead(302, { location: redirectTo }).end();
      else res.writeHead(201, { "content-type": "application/json" }).end('{"id":"10000"}');
    });
    other = await startLocalHttps((_req, res) => res.writeHead(201).end("{}"));
    plain = createServer((req, res) => {
      plainRequests++;
      res.writeHead(201).end("{}");
    });
    await new Promise<void>((resolve) => plain.listen(0, "127.0.0.1", resolve));
    plainPort = (plain.address() as AddressInfo).port;
  });

  afterAll(async () => {
    await site?.close();
    await other?.close();
    await new Promise((resolve) => plain?.close(resolve));
  });

  it("calls the allowed site itself", async () => {
    redirectTo = undefined;
    const client = await jiraClient(integration(site.url), false, onlySite());
    await commentOnJiraIssue(client, "ENG-1", "hello");
    expect(site.requests.at(-1)).toBe("POST /rest/api/3/issue/ENG-1/comment");
  });

  it("follows no redirect: not to http://, not to 127.0.0.1 elsewhere, not to a private address", async () => {
    const client = await jiraClient(integration(site.url), false, onlySite());
    for (const target of [
      `http://127.0.0.1:${plainPort}/rest/api/3/issue/ENG-1/comment`,
      `${other.url}/rest/api/3/issue/ENG-1/comment`,
      "https://10.20.30.40/rest/api/3/issue/ENG-1/comment",
      "https://169.254.169.254/latest/meta-data/",
    ]) {
      redirectTo = target;
      const before = site.requests.length;
      await expect(commentOnJiraIssue(client, "ENG-1", "hello"), target).rejects.toMatchObject({
        status: 302,
      });
      expect(site.requests.length).toBe(before + 1);
    }
    expect(plainRequests).toBe(0);
    expect(other.requests).toEqual([]);
    redirectTo = undefined;
  });

  it("checks the address again at connection time (a DNS answer that changed since)", async () => {
    redirectTo = undefined;
    // Allowed when the client is made, refused by the time it connects: as a name that
    // resolves to a public address first and to a private one a moment later.
    let allowed = true;
    const flipping: AddressPolicy = {
      refuse: (address, port) =>
        allowed && address === "127.0.0.1" && port === site.port ? null : "a private address",
      ca: LOCAL_TLS.cert,
    };
    const before = site.requests.length;
    const client = await jiraClient(integration(`https://localhost:${site.port}`), false, flipping);
    allowed = false;
    await expect(commentOnJiraIssue(client, "ENG-1", "hello")).rejects.toMatchObject({
      code: "EADDRNOTALLOWED",
    });
    expect(site.requests.length).toBe(before);
  });

  it("the production agents refuse loopback by address and by name, and plain http", async () => {
    const { httpsAgent, httpAgent } = guardedAxiosConfig();
    const attempt = (url: string, agent: typeof httpsAgent | typeof httpAgent) =>
      new Promise<NodeJS.ErrnoException>((resolve, reject) => {
        const req = request(url, { agent: agent as typeof httpsAgent, ca: LOCAL_TLS.cert }, () =>
          reject(new Error(`${url} was reached`)),
        );
        req.on("error", resolve);
        req.end();
      });
    const before = site.requests.length;
    for (const url of [`${site.url}/x`, `https://localhost:${site.port}/x`]) {
      const error = await attempt(url, httpsAgent);
      expect(error.code, url).toBe("EADDRNOTALLOWED");
      expect(error.message).toMatch(/non-public/);
    }
    expect(site.requests.length).toBe(before);
    const { request: plainRequest } = await import("node:http");
    const error = await new Promise<NodeJS.ErrnoException>((resolve, reject) => {
      const req = plainRequest(`http://127.0.0.1:${plainPort}/x`, { agent: httpAgent }, () =>
        reject(new Error("plain http was reached")),
      );
      req.on("error", resolve);
      req.end();
    });
    expect(error.message).toMatch(/https only/);
    expect(plainRequests).toBe(0);
  });
});
