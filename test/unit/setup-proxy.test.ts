import { mkdtemp, readdir, readFile, rm, stat, utimes, writeFile } from "node:fs/promises";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  checkSandbox,
  configureSandbox,
  heartbeatLine,
  runSandboxed,
} from "../../src/sandbox/index.js";
import {
  configureSandboxCaches,
  createCacheEntry,
  enforceCacheBudget,
  findCacheEntry,
  KEEP_PER_REPO,
} from "../../src/sandbox/cache.js";
import { hostAddresses } from "../../src/sandbox/network.js";
import {
  filterLine,
  isAllowed,
  parseAllowList,
  startSetupProxy,
  type SetupProxy,
} from "../../src/sandbox/setup-proxy.js";
import {
  addressRefusal,
  parseAddressRanges,
  startAddressGuard,
} from "../../src/sandbox/setup-proxy-guard.js";

/*
 * The setup step's network for real: tinyproxy (scripts/setup.sh) with the allowlist, reached
 * from bubblewrap through slirp4netns's 10.0.2.2 and nothing else (sandbox/network.ts
 * proxyNetwork); the package cache entries the setup step writes, read-only to later runs and
 * kept within their budget (sandbox/cache.ts); and the heartbeat of long commands.
 */

let dir: string;
let server: net.Server;
let port: number;
let connections = 0;

beforeAll(async () => {
  server = net.createServer((socket) => {
    connections++;
    socket.end("HTTP/1.1 200 OK\r\n\r\nhello from the host\n");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  port = (server.address() as net.AddressInfo).port;
});

afterAll(async () => {
  configureSandbox({});
  configureSandboxCaches({});
  await new Promise((resolve) => server.close(resolve));
});

beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "foreman-setup-proxy-test-"));
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("the allowlist", () => {
  it("parses hosts, wildcards and ports, and refuses anything else by name", () => {
    const list = parseAllowList(["registry.npmjs.org", "*.Example.com", "npm.corp.local:8443"]);
    expect(list).toEqual([
      { host: "registry.npmjs.org", wildcard: false, port: null },
      { host: "example.com", wildcard: true, port: null },
      { host: "npm.corp.local", wildcard: false, port: 8443 },
    ]);
    expect(list.map(filterLine)).toEqual([
      "^registry\\.npmjs\\.org$",
      "^([a-z0-9-]+\\.)+example\\.com$",
      "^npm\\.corp\\.local$",
    ]);
    expect(isAllowed(list, "registry.npmjs.org")).toBe(true);
    expect(isAllowed(list, "registry.npmjs.org.evil.test")).toBe(false);
    expect(isAllowed(list, "a.b.example.com")).toBe(true);
    expect(isAllowed(list, "example.com")).toBe(false);
    for (const bad of ["http://x.org", "x.org/path", "a b", "", "x.org:99999"])
      expect(() => parseAllowList([bad])).toThrow(/is not a host name/);
  });
});

/** Through the proxy named in HTTPS_PROXY: a CONNECT per target, printing `target status`. */
function connectScript(targets: string[]): string {
  const code = `const http=require("http");const u=new URL(process.env.HTTPS_PROXY);(async()=>{for(const t of process.argv.slice(1)){const r=await new Promise(ok=>{const q=http.request({host:u.hostname,port:u.port,method:"CONNECT",path:t,timeout:8000});q.on("connect",(res,s)=>{s.destroy();ok(res.statusCode)});q.on("timeout",()=>{q.destroy();ok("TIMEOUT")});q.on("error",e=>ok(e.code));q.end()});console.log("VIA "+t+" "+r)}})()`;
  return `node -e '${code}' ${targets.join(" ")}`;
}

/** Straight to each address (no proxy), printing `address outcome`. */
function directScript(targets: string[]): string {
  const code = `const net=require("net");(async()=>{for(const t of process.argv.slice(1)){const [h,p]=t.split(",");const r=await new Promise(ok=>{const s=net.connect({host:h,port:Number(p),timeout:4000});s.on("connect",()=>{s.destroy();ok("REACHED")});s.on("timeout",()=>{s.destroy();ok("TIMEOUT")});s.on("error",e=>ok(e.code))});console.log("DIRECT "+h+" "+r)}})()`;
  return `node -e '${code}' ${targets.join(" ")}`;
}

describe("the setup network", () => {
  let proxy: SetupProxy;

  beforeEach(async () => {
    proxy = await startSetupProxy(["registry.npmjs.org"]);
  });

  afterEach(async () => {
    await proxy.stop();
  });

  it("reaches an allowed registry, refuses another host by name before connecting, and nothing else", async () => {
    connections = 0;
    const own = hostAddresses()[0]!;
    const result = await runSandboxed(
      [
        connectScript([`localhost:${port}`, "127.0.0.1:443", "registry.npmjs.org:443"]),
        directScript([`10.0.2.2,${port}`, `${own},${port}`, "104.16.0.35,443", "1.1.1.1,53"]),
      ].join("; "),
      { cwd: dir, timeoutMs: 60_000, proxy: { port: proxy.port } },
    );
    expect(result.output).toContain(`VIA localhost:${port} 403`);
    expect(result.output).toContain("VIA 127.0.0.1:443 403");
    expect(result.output).toContain("VIA registry.npmjs.org:443 200");
    // Not even the host's loopback on another port, the host's address or a public one.
    expect(result.output).toContain(`DIRECT 10.0.2.2 EACCES`);
    expect(result.output).toContain(`DIRECT ${own} EACCES`);
    expect(result.output).toContain("DIRECT 104.16.0.35 EACCES");
    expect(result.output).toContain("DIRECT 1.1.1.1 EACCES");
    // Refused by name, and the refused host was never connected to.
    const report = await proxy.report();
    expect(report.refused).toEqual(["localhost", "127.0.0.1"]);
    expect(report.contacted).toEqual(["registry.npmjs.org"]);
    expect(connections).toBe(0);
  }, 90_000);
});

/*
 * Issue 40 (7): with SANDBOX_SETUP_ALLOW=localhost, an install script's plain-HTTP
 * `POST http://localhost:<service port>/keys/generate` answered 201 through the proxy. The
 * guard behind tinyproxy checks the address a listed name resolves to, and plain HTTP's port.
 */
describe("the setup proxy by address", () => {
  let service: http.Server;
  let servicePort: number;
  let requests: string[] = [];

  beforeAll(async () => {
    service = http.createServer((req, res) => {
      requests.push(`${req.method} ${req.url}`);
      res.writeHead(201).end("key made\n");
    });
    await new Promise<void>((resolve) => service.listen(0, "127.0.0.1", resolve));
    servicePort = (service.address() as net.AddressInfo).port;
  });

  afterAll(async () => {
    await new Promise((resolve) => service.close(resolve));
  });

  beforeEach(() => {
    requests = [];
  });

  /** Through the proxy at `port`, from the host: a plain request or a CONNECT; its status. */
  function through(port: number, method: string, target: string): Promise<number | string> {
    return new Promise((resolve) => {
      // agent: false, a connection per request (tinyproxy closes after each).
      const req = http.request({ host: "127.0.0.1", port, method, path: target, agent: false });
      req.on("connect", (res, socket) => {
        socket.destroy();
        resolve(res.statusCode ?? 0);
      });
      req.on("response", (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on("error", (error) => resolve(error.message));
      req.end();
    });
  }

  it("refuses a listed name at a loopback address, plain HTTP and CONNECT, from the sandbox", async () => {
    const proxy = await startSetupProxy([`localhost:${servicePort}`]);
    try {
      // The red team's probe, as an install script would send it (HTTP_PROXY / HTTPS_PROXY).
      const probe = `const http=require("http");const u=new URL(process.env.HTTP_PROXY);const t=process.argv[1];function go(o){return new Promise(ok=>{const q=http.request({host:u.hostname,port:u.port,agent:false,...o});q.on("connect",(r,s)=>{s.destroy();ok(r.statusCode)});q.on("response",r=>{let b="";r.on("data",c=>b+=c);r.on("end",()=>ok(r.statusCode+" "+b.trim()))});q.on("error",e=>ok(e.code));q.end()})}(async()=>{console.log("PLAIN "+await go({method:"POST",path:"http://"+t+"/keys/generate"}));console.log("TUNNEL "+await go({method:"CONNECT",path:t}))})()`;
      const result = await runSandboxed(`node -e '${probe}' localhost:${servicePort}`, {
        cwd: dir,
        timeoutMs: 60_000,
        proxy: { port: proxy.port },
      });
      expect(result.output).toMatch(
        /^PLAIN 403 localhost refused by the setup proxy: 127\.0\.0\.1 is a loopback address/m,
      );
      expect(result.output).toContain("TUNNEL 403");
      expect(requests).toEqual([]);
      const report = await proxy.report();
      expect(report.refused).toEqual([]);
      expect(report.blocked).toEqual([
        expect.stringMatching(/^localhost \(.*loopback.*SANDBOX_SETUP_ALLOW_ADDRESSES/),
      ]);
      expect(report.contacted).toEqual([]);
    } finally {
      await proxy.stop();
    }
  }, 90_000);

  it("lets a range through only when SANDBOX_SETUP_ALLOW_ADDRESSES lists it; never the service's port; plain HTTP only on CONNECT's ports", async () => {
    const loopback = { allowRanges: ["127.0.0.0/8", "::1"], ownPorts: [] };
    const allowed = await startSetupProxy([`localhost:${servicePort}`, "127.0.0.1"], loopback);
    try {
      const post = `http://localhost:${servicePort}/keys/generate`;
      expect(await through(allowed.port, "POST", post)).toBe(201);
      expect(await through(allowed.port, "CONNECT", `localhost:${servicePort}`)).toBe(200);
      // A port the list does not name: refused in plain HTTP as in CONNECT.
      expect(await through(allowed.port, "GET", `http://127.0.0.1:${servicePort}/`)).toBe(403);
      expect(await through(allowed.port, "CONNECT", `127.0.0.1:${servicePort}`)).toBe(403);
      expect(requests).toEqual(["POST /keys/generate"]);
      expect((await allowed.report()).contacted).toEqual(["localhost"]);
    } finally {
      await allowed.stop();
    }
    const own = await startSetupProxy([`localhost:${servicePort}`], {
      ...loopback,
      ownPorts: [servicePort],
    });
    try {
      expect(await through(own.port, "POST", `http://localhost:${servicePort}/keys/generate`)).toBe(
        403,
      );
      expect(await through(own.port, "CONNECT", `localhost:${servicePort}`)).toBe(403);
      expect((await own.report()).blocked).toEqual([
        expect.stringContaining(`:${servicePort} is this service's own port`),
      ]);
    } finally {
      await own.stop();
    }
    expect(requests).toEqual(["POST /keys/generate"]);
  }, 30_000);

  it("connects to the address it checked: a name that resolves elsewhere a moment later cannot move it", async () => {
    // DNS rebinding: the first answer passes the check, the next would not (and nothing
    // listens there). The guard asks once and connects to what it checked.
    const answers = ["127.0.0.1", "127.0.0.2"];
    const asked: string[] = [];
    const guard = await startAddressGuard(
      () => true,
      { allowRanges: ["127.0.0.1/32"], ownPorts: [] },
      async (host) => {
        asked.push(host);
        return [{ address: answers[Math.min(asked.length - 1, 1)]! }];
      },
    );
    try {
      expect(
        await through(guard.port, "POST", `http://rebind.test:${servicePort}/keys/generate`),
      ).toBe(201);
      expect(asked).toEqual(["rebind.test"]);
      expect(requests).toEqual(["POST /keys/generate"]);
      // The next request gets the second answer: refused, never connected.
      expect(await through(guard.port, "CONNECT", `rebind.test:${servicePort}`)).toBe(403);
      expect(guard.refused()).toEqual([expect.stringContaining("127.0.0.2 is a loopback address")]);
      expect(requests).toEqual(["POST /keys/generate"]);
    } finally {
      await guard.stop();
    }
  });

  it("classifies addresses as the guard connects to them", () => {
    const none = parseAddressRanges([]);
    const own = new Set(["93.184.216.34"]);
    for (const [address, kind] of [
      ["127.0.0.1", "loopback"],
      ["::1", "loopback"],
      ["::ffff:127.0.0.1", "loopback"],
      ["169.254.169.254", "linkLocal"],
      ["fe80::1", "linkLocal"],
      ["10.1.2.3", "private"],
      ["::ffff:192.168.0.1", "private"],
      ["172.16.0.1", "private"],
      ["100.64.0.1", "carrierGradeNat"],
      ["fd12::1", "uniqueLocal"],
      ["0.0.0.0", "unspecified"],
    ])
      expect(addressRefusal(address!, 443, none, [], own)).toContain(`a ${kind} address`);
    expect(addressRefusal("93.184.216.34", 443, none, [], own)).toContain(
      "an address of this host",
    );
    expect(addressRefusal("8.8.8.8", 443, none, [], own)).toBeUndefined();
    expect(addressRefusal("2606:4700::1111", 443, none, [], own)).toBeUndefined();
    const ranges = parseAddressRanges(["10.0.0.0/8", "::ffff:192.168.0.0/112", "fd12::/16"]);
    expect(addressRefusal("::ffff:10.9.9.9", 443, ranges, [], own)).toBeUndefined();
    expect(addressRefusal("192.168.3.4", 443, ranges, [], own)).toBeUndefined();
    expect(addressRefusal("192.169.3.4", 443, ranges, [], own)).toBeUndefined(); // public
    expect(addressRefusal("172.16.0.1", 443, ranges, [], own)).toContain("private");
    expect(addressRefusal("fd12::1", 443, ranges, [], own)).toBeUndefined();
    // The service's own port on this host: refused even inside an allowed range.
    const all = parseAddressRanges(["0.0.0.0/0", "::/0"]);
    expect(addressRefusal("127.0.0.1", 3000, all, [3000], own)).toContain("own port");
    expect(addressRefusal("93.184.216.34", 3000, all, [3000], own)).toContain("own port");
    expect(addressRefusal("127.0.0.1", 3001, all, [3000], own)).toBeUndefined();
    expect(() => parseAddressRanges(["10.0.0.0/33"])).toThrow(/not an address range/);
  });
});

describe("package cache entries", () => {
  const owner = { account: "acct-1", repo: "ws/repo" };

  beforeEach(() => {
    configureSandboxCaches({ root: path.join(dir, "caches"), maxMb: 1 });
  });

  it("are read-only to later runs: a run's writes never reach the entry", async () => {
    const key = "ab".repeat(16);
    const fresh = await createCacheEntry(owner, key);
    await writeFile(path.join(fresh.cache.dir, "pkg.tgz"), "original\n");
    expect(await findCacheEntry(owner, key)).toBeUndefined(); // not before commit
    expect(await fresh.commit()).toBe(true);
    const entry = (await findCacheEntry(owner, key))!;
    expect(entry.readOnly).toBe(true);

    const result = await runSandboxed(
      "cat /cache/pkg.tgz; echo planted > /cache/pkg.tgz; echo new > /cache/other; cat /cache/pkg.tgz",
      { cwd: dir, timeoutMs: 20_000, cache: entry },
    );
    expect(result.ok).toBe(true);
    expect(result.output).toBe("original\nplanted\n");
    expect(await readFile(path.join(entry.dir, "pkg.tgz"), "utf8")).toBe("original\n");
    expect(await readdir(entry.dir)).toEqual(["pkg.tgz"]);
    // Unsandboxed (SANDBOX=none) too: the run gets a copy of its own.
    configureSandbox({ engine: "none" });
    try {
      const plain = await runSandboxed(
        'd=$(dirname "$npm_config_cache"); cat "$d/pkg.tgz"; echo planted > "$d/pkg.tgz"',
        { cwd: dir, timeoutMs: 20_000, cache: entry },
      );
      expect(plain.output).toBe("original\n");
    } finally {
      configureSandbox({});
    }
    expect(await readFile(path.join(entry.dir, "pkg.tgz"), "utf8")).toBe("original\n");
    // The run's own layer is gone with it.
    const left = await readdir(path.dirname(entry.dir));
    expect(left.filter((n) => n.startsWith(".foreman-overlay-"))).toEqual([]);
  });

  it("stay within SANDBOX_CACHE_MAX_MB and KEEP_PER_REPO, least recently used first", async () => {
    const later = Date.now() + 3_600_000;
    const make = async (key: string, bytes: number, usedSecondsAgo: number) => {
      const fresh = await createCacheEntry(owner, key);
      await writeFile(path.join(fresh.cache.dir, "blob"), Buffer.alloc(bytes, 1));
      await fresh.commit();
      const entry = (await findCacheEntry(owner, key))!;
      const at = new Date(later - usedSecondsAgo * 1000 - 3_600_000);
      await utimes(entry.dir, at, at);
      return entry.dir;
    };
    const old = await make("0".repeat(32), 700_000, 300);
    const recent = await make("1".repeat(32), 700_000, 100);
    expect(await enforceCacheBudget(later)).toEqual([old]);
    expect((await stat(recent)).isDirectory()).toBe(true);

    configureSandboxCaches({ root: path.join(dir, "caches"), maxMb: 100 });
    const small = [];
    for (let i = 0; i < KEEP_PER_REPO + 1; i++)
      small.push(await make(String(i + 2).repeat(32), 10, 50 - i));
    const removed = await enforceCacheBudget(later);
    // Beyond KEEP_PER_REPO the least recently used go: the oldest small one, then the big one.
    expect(removed).toEqual([small[0], recent]);
  });
});

describe("heartbeat", () => {
  afterEach(() => configureSandbox({}));

  it("reports a long command while it runs, and stops when it ends", async () => {
    configureSandbox({ heartbeatMs: 400 });
    const beats: number[] = [];
    const result = await runSandboxed("sleep 2", {
      cwd: dir,
      timeoutMs: 20_000,
      onHeartbeat: (ms) => beats.push(ms),
    });
    expect(result.ok).toBe(true);
    expect(beats.length).toBeGreaterThanOrEqual(3);
    expect(beats).toEqual([...beats].sort((a, b) => a - b));
    const count = beats.length;
    await new Promise((resolve) => setTimeout(resolve, 900));
    expect(beats).toHaveLength(count);
    expect(heartbeatLine("npm ci --no-audit", 40_200)).toBe(
      "still running `npm ci --no-audit` (40 s)",
    );
  });
});

describe("without tinyproxy", () => {
  it("a worker refuses to start, and a setup refuses to run, naming the fix", async () => {
    const saved = process.env.PATH;
    process.env.PATH = dir; // an empty folder: no tinyproxy (nor anything else) on the PATH
    try {
      await expect(checkSandbox({ setupProxy: true })).rejects.toThrow(
        /tinyproxy\) is not installed: install tinyproxy \(`apt-get install tinyproxy`.*or set SANDBOX_SETUP_ALLOW to an empty value/,
      );
      await expect(startSetupProxy(["registry.npmjs.org"])).rejects.toThrow(
        /apt-get install tinyproxy/,
      );
    } finally {
      process.env.PATH = saved;
    }
  });
});
