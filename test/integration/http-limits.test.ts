// test-matrix: runtime-sensitive: Node's http server limits and timeouts (headers, body) and
// refused WebSocket upgrades.
import http from "node:http";
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { startTestServer, type TestServer } from "../helpers/server.js";

/*
 * The HTTP server's own edges: a request whose body never fully arrives is answered 408 and
 * closed after HTTP_REQUEST_TIMEOUT_S (not Node's 300 s), every refused WebSocket upgrade,
 * ws's own handshake checks included, answers with the JSON error body, and a client that
 * breaks the WebSocket protocol is closed with ws's code while the server goes on.
 */

let server: TestServer;
let key: string;
let port: number;

beforeAll(async () => {
  server = await startTestServer({ env: { HTTP_REQUEST_TIMEOUT_S: "1" } });
  key = (await server.signup()).key;
  port = Number(new URL(server.url).port);
}, 60_000);

afterAll(async () => {
  await server?.stop();
});

/** Sends `raw` on a new connection; resolves everything received until the server closes. */
function rawExchange(raw: string, to = port): Promise<{ text: string; ms: number }> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const socket = net.connect(to, "127.0.0.1", () => socket.write(raw));
    let text = "";
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => (text += chunk));
    socket.on("error", reject);
    socket.on("close", () => resolve({ text, ms: performance.now() - started }));
  });
}

describe("request timeouts", () => {
  it("answers 408 and closes a request whose body is shorter than its Content-Length", async () => {
    const { text, ms } = await rawExchange(
      `POST /keys/generate HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: ${key}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"name":`,
    );
    expect(text).toMatch(/^HTTP\/1\.1 408 /);
    expect(text).toContain('"code":"request_timeout"');
    // Node's default would hold it for 300 s; the configured limit is 1 s (checked every 250 ms).
    expect(ms).toBeLessThan(10_000);
  }, 20_000);

  // With the handler's deadline first (both default to 30 s), a body that never all arrives
  // was answered 503 upstream_unavailable: a 5xx for the client's own fault.
  it("answers 408 request_timeout, not 503, when the handler's deadline comes first", async () => {
    const slowBody = await startTestServer({
      env: { HTTP_REQUEST_TIMEOUT_S: "60", HTTP_HANDLER_TIMEOUT_S: "1" },
    });
    try {
      const other = (await slowBody.signup()).key;
      const { text, ms } = await rawExchange(
        `POST /keys/generate HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: ${other}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"name":`,
        Number(new URL(slowBody.url).port),
      );
      expect(text).toMatch(/^HTTP\/1\.1 408 /);
      expect(text).toMatch(/\r\nconnection: close\r\n/i);
      expect(text).toContain('"code":"request_timeout"');
      expect(ms).toBeLessThan(30_000);
    } finally {
      await slowBody.stop();
    }
  }, 60_000);

  // Node's parser refuses these before any handler: its own answer is a bare status line.
  it("answers what Node's parser refuses with the JSON error body", async () => {
    const head = `GET /tasks HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: ${key}\r\n`;
    const cases: Array<[string, string, number]> = [
      ["a control byte in a header", `${head}X-Odd: a\x7fb\r\n\r\n`, 400],
      ["a Content-Length that is not a number", `${head}Content-Length: abc\r\n\r\n`, 400],
      ["headers over the limit", `${head}X-Big: ${"a".repeat(20_000)}\r\n\r\n`, 431],
      ["a space in the path", `GET /ta sks HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`, 400],
    ];
    for (const [what, raw, status] of cases) {
      const { text } = await rawExchange(raw);
      expect(text, what).toMatch(new RegExp(`^HTTP/1\\.1 ${status} `));
      expect(text, what).toMatch(/\r\ncontent-type: application\/json\r\n/i);
      expect(text, what).toContain('"code":"validation_failed"');
    }
  });

  it("answers 408 when the headers never finish", async () => {
    const { text } = await rawExchange(`GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: a`);
    expect(text).toMatch(/^HTTP\/1\.1 408 /);
  }, 20_000);

  it("still serves a complete request", async () => {
    const res = await server.api("GET", "/keys/me", { key });
    expect(res.status).toBe(200);
  });
});

interface Refusal {
  error: { code: string; message: string };
}

/** An upgrade request; resolves the refusal's status, headers and parsed body. */
function upgrade(
  path: string,
  headers: Record<string, string>,
  method = "GET",
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Refusal }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port, path, method, headers });
    req.on("upgrade", () => reject(new Error("the upgrade was accepted")));
    req.on("response", (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => (text += chunk));
      res.on("end", () => {
        try {
          resolve({
            status: res.statusCode!,
            headers: res.headers,
            body: JSON.parse(text) as Refusal,
          });
        } catch (error) {
          reject(new Error(`not JSON: ${text} (${String(error)})`));
        }
      });
    });
    req.on("error", reject);
    req.end();
  });
}

const HANDSHAKE = {
  Connection: "Upgrade",
  Upgrade: "websocket",
  "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
  "Sec-WebSocket-Version": "13",
};

describe("refused WebSocket upgrades", () => {
  it("answers a bad since with 400 and the JSON error body", async () => {
    for (const since of ["abc", "-1", "1e3", "9".repeat(20)]) {
      const res = await upgrade(`/tasks/task_x/ws?since=${since}`, {
        ...HANDSHAKE,
        "X-API-Key": key,
      });
      expect(res.status, since).toBe(400);
      expect(res.headers["content-type"]).toBe("application/json");
      expect(res.body.error.code).toBe("validation_failed");
      expect(res.body.error.message).toMatch(/since/);
    }
  });

  it("answers ws's own handshake refusals with the JSON error body", async () => {
    const cases: Array<[Record<string, string>, RegExp]> = [
      [{ ...HANDSHAKE, "Sec-WebSocket-Key": "short" }, /Sec-WebSocket-Key/],
      [{ ...HANDSHAKE, "Sec-WebSocket-Version": "7" }, /Sec-WebSocket-Version/],
      [{ ...HANDSHAKE, "Sec-WebSocket-Protocol": "a,,b" }, /Sec-WebSocket-Protocol/],
    ];
    // The task must be watchable for ws to see the handshake: a task of this account.
    const task = await firstWatchableTask();
    for (const [headers, message] of cases) {
      const res = await upgrade(`/tasks/${task}/ws`, { ...headers, "X-API-Key": key });
      expect(res.status).toBe(400);
      expect(res.headers["content-type"]).toBe("application/json");
      expect(res.body.error).toEqual({ code: "validation_failed", message: expect.any(String) });
      expect(res.body.error.message).toMatch(message);
    }
  });

  it("keeps 401 and 404 as JSON too", async () => {
    expect((await upgrade("/tasks/task_x/ws", HANDSHAKE)).status).toBe(401);
    const missing = await upgrade("/tasks/task_x/ws", { ...HANDSHAKE, "X-API-Key": key });
    expect(missing.status).toBe(404);
    expect(missing.body.error.code).toBe("not_found");
  });
});

describe("WebSocket clients that break the protocol", () => {
  // Each of these once stopped the whole process: ws emits `error` on the socket after
  // closing it, and nothing listened. An in-process server's crash is an unhandled error
  // here, which fails the run.
  it("are closed with ws's code, and the server goes on", async () => {
    const task = await firstWatchableTask();
    const url = `${server.url.replace(/^http/, "ws")}/tasks/${task}/ws`;
    const cases: Array<[string, (client: WebSocket) => void, number]> = [
      // Text that is not UTF-8.
      ["invalid UTF-8", (c) => c.send(Buffer.from([0xff, 0xfe, 0xfd]), { binary: false }), 1007],
      // Over the server's maxPayload (64 KiB).
      ["a message too large", (c) => c.send(Buffer.alloc(100 * 1024, 0x61)), 1009],
    ];
    for (const [what, misbehave, code] of cases) {
      const client = new WebSocket(url, { headers: { "X-API-Key": key } });
      client.on("error", () => undefined);
      await new Promise<void>((resolve, reject) => {
        client.once("open", () => resolve());
        client.once("unexpected-response", (_req, res) =>
          reject(new Error(`upgrade refused: ${res.statusCode}`)),
        );
      });
      const closed = new Promise<number>((resolve) => client.once("close", (c) => resolve(c)));
      misbehave(client);
      expect(await closed, what).toBe(code);
      const health = await fetch(`${server.url}/healthz`);
      expect(health.status, what).toBe(200);
    }
  });
});

/** A task id the caller may watch, created through the API on a local repository. */
async function firstWatchableTask(): Promise<string> {
  const { createGitRepo } = await import("../helpers/git-repo.js");
  const repo = await createGitRepo({ "a.txt": "a\n" });
  try {
    const ws = await server.api("POST", "/workspaces", {
      key,
      body: { name: "ws", repos: [{ name: "acme/app", clone_url: repo.dir }] },
    });
    expect(ws.status).toBe(201);
    const task = await server.api("POST", "/tasks", {
      key,
      body: { workspace_id: ws.body.id, repo_id: "acme/app", description: "Add a line to a.txt" },
    });
    expect(task.status).toBe(201);
    return task.body.id as string;
  } finally {
    await repo.remove();
  }
}
