import nock from "nock";
import { generateKeyPairSync } from "node:crypto";
import examplesModule from "@octokit/webhooks-examples";
import { sign } from "@octokit/webhooks-methods";
import { watchGithub } from "./github-openapi.js";
import type { TestServer } from "./server.js";

/** A throwaway RSA key for a test GitHub App (Probot needs a real PEM to sign JWTs). */
export function testPrivateKey(): string {
  return generateKeyPairSync("rsa", { modulusLength: 2048 })
    .privateKey.export({ type: "pkcs1", format: "pem" })
    .toString();
}

interface ExampleSet {
  name: string;
  examples: Array<Record<string, unknown>>;
}
// A CommonJS package: its array is the module itself at run time, `.default` in the types.
const examples = ((examplesModule as unknown as { default?: unknown }).default ??
  examplesModule) as unknown as ExampleSet[];

/** A real GitHub webhook payload from @octokit/webhooks-examples, by event and action. */
export function examplePayload(
  event: string,
  action?: string,
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  where: (example: any) => boolean = () => true,
): Record<string, unknown> {
  const entry = examples.find((e) => e.name === event);
  const payload = entry?.examples.find(
    (p) => (action === undefined || p.action === action) && where(p),
  );
  if (!payload) throw new Error(`no example payload for ${event}.${action ?? "*"}`);
  return structuredClone(payload);
}

export async function signedDelivery(
  secret: string,
  event: string,
  payload: unknown,
  id: string,
): Promise<{ headers: Record<string, string>; raw: string }> {
  const raw = JSON.stringify(payload);
  return {
    raw,
    headers: {
      "content-type": "application/json",
      "x-github-event": event,
      "x-github-delivery": id,
      "x-hub-signature-256": await sign(secret, raw),
    },
  };
}

/** GitHub answering installation-token requests with `token` for the rest of the test. */
export function mockInstallationToken(installationId: number, token: string): nock.Scope {
  return watchGithub(nock("https://api.github.com"))
    .post(`/app/installations/${installationId}/access_tokens`)
    .reply(201, { token, expires_at: new Date(Date.now() + 3600_000).toISOString() })
    .persist();
}

/**
 * Stores a linked GitHub App installation's workspace for the account of the key `keyId`, as
 * the installation handlers store it: the organisation of `fullName` with that one private
 * repository on `main`, cloned from the local folder `dir` so git needs no network (the API
 * calls go to nock). Gives the account's id.
 */
export async function linkInstallationWorkspace(
  server: TestServer,
  keyId: string,
  workspace: { id: string; installationId: number; repoId: string; fullName: string; dir: string },
): Promise<string> {
  const { models } = server.service.db;
  const accountId = (await models.ApiKey.findOne({ key_id: keyId }).lean())!.account_id;
  const [login, name] = workspace.fullName.split("/") as [string, string];
  await models.Workspace.create({
    _id: workspace.id,
    kind: "github",
    account_id: accountId,
    name: login,
    repos: [
      {
        repo_id: workspace.repoId,
        name,
        full_name: workspace.fullName,
        clone_url: `file://${workspace.dir}`,
        default_branch: "main",
        private: true,
      },
    ],
    github: {
      installation_id: workspace.installationId,
      account_login: login,
      account_type: "Organization",
    },
  });
  return accountId;
}
