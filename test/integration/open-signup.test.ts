import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runAdmin, type AdminIo } from "../../src/cli/admin.js";
import { startTestServer, testDatabaseUri, type TestServer } from "../helpers/server.js";

/*
 * Open sign-up follows the listen address unless OPEN_SIGNUP says otherwise (issue 40,
 * "Operator defaults"): a service listening on every interface (the container images' HOST
 * 0.0.0.0) makes no accounts for strangers, and the operator makes the first key with the
 * admin CLI.
 */

let open: TestServer;
let closed: TestServer;
let uri: string;
const closedLog: string[] = [];
beforeAll(async () => {
  uri = testDatabaseUri("signup");
  [open, closed] = await Promise.all([
    startTestServer({ env: { HOST: "127.0.0.1" } }),
    // What compose.yaml and the Kubernetes example set, with OPEN_SIGNUP unset.
    startTestServer({ env: { HOST: "0.0.0.0", MONGODB_URI: uri }, logLines: closedLog }),
  ]);
});
afterAll(async () => {
  await Promise.all([open?.stop(), closed?.stop()]);
});

async function admin(argv: string[]): Promise<{ code: number; out: string[]; err: string[] }> {
  const out: string[] = [];
  const err: string[] = [];
  const io: AdminIo = {
    out: (l) => out.push(l),
    err: (l) => err.push(l),
    env: { MONGODB_URI: uri },
  };
  return { code: await runAdmin(argv, io), out, err };
}

describe("open sign-up by listen address", () => {
  it("is on while the service listens on loopback", async () => {
    const { key } = await open.signup();
    const status = await open.api("GET", "/status", { key });
    expect(status.body.signup).toEqual({
      open: true,
      why: "OPEN_SIGNUP unset and HOST is a loopback address",
    });
  });

  it("is off on 0.0.0.0 unless set, and says so at start", async () => {
    const res = await closed.api("POST", "/keys/generate", { body: { name: "stranger" } });
    expect(res.status).toBe(403);
    expect(res.body.error).toMatchObject({ code: "forbidden" });
    expect(res.body.error.message).toContain("foreman-admin accounts create");
    const summary = closedLog
      .map((l) => JSON.parse(l) as { msg: string })
      .find((l) => l.msg.startsWith("configuration: "));
    expect(summary?.msg).toContain(
      "open sign-up off (OPEN_SIGNUP unset and HOST is not a loopback address)",
    );
  });

  it("lets the operator make the first account and key with the admin CLI", async () => {
    const run = await admin(["accounts", "create", "operator", "--json"]);
    expect(run.err).toEqual([]);
    expect(run.code).toBe(0);
    const created = JSON.parse(run.out[0]!) as { id: string; key: string; name: string };
    expect(created.name).toBe("operator");
    const me = await closed.api("GET", "/keys/me", { key: created.key });
    expect(me.status).toBe(200);
    expect(me.body).toMatchObject({ id: created.id, name: "operator", tier: "free" });
    const status = await closed.api("GET", "/status", { key: created.key });
    expect(status.body.signup).toEqual({
      open: false,
      why: "OPEN_SIGNUP unset and HOST is not a loopback address",
    });
    // With a key, POST /keys/generate still adds a key to that account.
    const more = await closed.api("POST", "/keys/generate", {
      key: created.key,
      body: { name: "second" },
    });
    expect(more.status).toBe(201);
  });
});
