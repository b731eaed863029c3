import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/env.js";
import {
  checkSandbox,
  configureSandbox,
  describeResult,
  runSandboxed,
} from "../../src/sandbox/index.js";
import { BLOCKED_IPV4_RANGES, hostAddresses } from "../../src/sandbox/network.js";

/*
 * SANDBOX_NETWORK=public for real: bubblewrap in a network namespace that slirp4netns
 * connects, with the private ranges and the host's own addresses refused by policy rules
 * (sandbox/network.ts). scripts/setup.sh installs slirp4netns and iproute2; nothing here
 * skips when they are missing. This machine has no internet, so reaching a public host is not
 * tried; what is tried is everything that must never be reached.
 */

let dir: string;
let server: net.Server;
let port: number;
let connections = 0;

beforeAll(async () => {
  // On every address of the host, so only the sandbox's rules can keep a connection out.
  server = net.createServer((socket) => {
    connections++;
    socket.end("hello from the host\n");
  });
  await new Promise<void>((resolve) => server.listen(0, "::", resolve));
  port = (server.address() as net.AddressInfo).port;
});

afterAll(async () => {
  configureSandbox({});
  await new Promise((resolve) => server.close(resolve));
});

beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "foreman-sandbox-net-test-"));
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A Node one-liner that connects to each address and prints `address outcome ms`. */
function probeScript(addresses: string[]): string {
  const code = `const net=require("net");(async()=>{for(const h of process.argv.slice(1)){const t=Date.now();const r=await new Promise(ok=>{const s=net.connect({host:h,port:${port},timeout:4000});s.on("data",()=>{ok("REACHED");s.destroy()});s.on("timeout",()=>{ok("TIMEOUT");s.destroy()});s.on("error",e=>ok(e.code))});console.log(h+" "+r+" "+(Date.now()-t))}})()`;
  return `node -e '${code}' ${addresses.join(" ")}`;
}

function hostIpv6Addresses(): string[] {
  return Object.values(os.networkInterfaces())
    .flat()
    .filter((a) => a && a.family === "IPv6" && !a.internal && !a.address.startsWith("fe80"))
    .map((a) => a!.address);
}

/** The slirp4netns processes of this test process's runs (children of its runs' shells). */
async function ourSlirps(): Promise<number[]> {
  const found: number[] = [];
  for (const entry of await readdir("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, "utf8").catch(() => "");
    const comm = /\(([^)]*)\)/.exec(stat)?.[1];
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (comm !== "slirp4netns" || fields[0] === "Z") continue;
    // Ours when this process is among its ancestors: the sandbox's shell started it, and the
    // launcher (util/launcher.ts) the shell.
    let ancestor = Number(fields[1]);
    for (let depth = 0; depth < 4 && ancestor > 1; depth++) {
      if (ancestor === process.pid) {
        found.push(Number(entry));
        break;
      }
      const parent = await readFile(`/proc/${ancestor}/stat`, "utf8").catch(() => "");
      ancestor = Number(parent.slice(parent.lastIndexOf(")") + 2).split(" ")[1]);
    }
  }
  return found;
}

async function noneLeftWithin(ms: number): Promise<boolean> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    if ((await ourSlirps()).length === 0) return true;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return (await ourSlirps()).length === 0;
}

/** ip is in sbin, which an ordinary user's PATH may leave out. */
const env = { PATH: `${process.env.PATH}:/usr/sbin:/sbin` };

describe("SANDBOX_NETWORK=public", () => {
  beforeEach(() => configureSandbox({ network: "public" }));
  it("starts: the start-up probe brings the network up on this machine", async () => {
    await expect(checkSandbox()).resolves.toMatchObject({
      workspaceMount: expect.stringMatching(/^(overlay|bind)$/),
    });
  });

  it("has an interface, a default route and slirp4netns's resolver", async () => {
    const result = await runSandboxed(
      "ip -4 -o addr show; ip -4 route show default; cat /etc/resolv.conf",
      { cwd: dir, timeoutMs: 20_000, env },
    );
    expect(result.ok, result.output).toBe(true);
    expect(result.output).toMatch(/tap0\s+inet 10\.0\.2\.100\/24/);
    expect(result.output).toMatch(/^default via 10\.0\.2\.2 dev tap0/m);
    expect(result.output).toMatch(/^nameserver 10\.0\.2\.3$/m);
  });

  it("never reaches the host: not its loopback, its own addresses nor any private range", async () => {
    const own = hostAddresses();
    expect(own.length).toBeGreaterThan(0); // a non-loopback address to try
    const addresses = [
      "127.0.0.1", // the sandbox's own loopback: nothing listens there
      "10.0.2.2", // slirp4netns's gateway, which is the host
      "10.0.2.3", // slirp4netns's DNS forwarder, on another port than 53
      ...own,
      "10.1.2.3",
      "172.16.0.1",
      "172.31.255.254",
      "192.168.1.1",
      "100.64.0.1",
      "169.254.169.254", // cloud metadata
      "198.18.0.1",
      "240.0.0.1",
      ...hostIpv6Addresses(),
      "::1",
    ];
    connections = 0;
    const started = Date.now();
    const result = await runSandboxed(probeScript(addresses), { cwd: dir, timeoutMs: 60_000 });
    expect(result.ok, result.output).toBe(true);
    const outcomes = new Map(
      result.output
        .trim()
        .split("\n")
        .map((line) => line.split(" "))
        .map(([address, outcome, ms]) => [address, { outcome, ms: Number(ms) }]),
    );
    expect([...outcomes.keys()].sort()).toEqual([...new Set(addresses)].sort());
    for (const address of addresses) {
      const { outcome, ms } = outcomes.get(address)!;
      if (address === "127.0.0.1" || address === "::1") expect(outcome).toBe("ECONNREFUSED");
      else if (address.includes(":")) expect(outcome, address).toBe("ENETUNREACH");
      // Refused by a rule at connect(): at once, not after a timeout.
      else expect(outcome, address).toBe("EACCES");
      expect(ms, address).toBeLessThan(1_000);
    }
    expect(connections).toBe(0);
    expect(Date.now() - started).toBeLessThan(15_000);
  });

  it("refuses every private range and host address by rule, and the command cannot lift one", async () => {
    const own = hostAddresses()[0]!;
    const result = await runSandboxed(
      [
        "ip rule del priority 120 && echo DELETED",
        "ip rule flush && echo FLUSHED",
        "ip rule add priority 1 lookup main && echo ADDED",
        "ip route replace default via 10.0.2.2 && echo ROUTED",
        "unshare -rn true && echo NEW-NAMESPACE",
        "ip rule show",
        probeScript([own]),
      ].join("; "),
      { cwd: dir, timeoutMs: 20_000, env },
    );
    for (const done of ["DELETED", "FLUSHED", "ADDED", "ROUTED", "NEW-NAMESPACE"])
      expect(result.output).not.toContain(done);
    expect(result.output).toMatch(/Operation not permitted/);
    for (const range of [...BLOCKED_IPV4_RANGES, "10.0.2.0/24", ...hostAddresses()])
      expect(result.output).toMatch(new RegExp(`to ${range.replace(/\./g, "\\.")} prohibit`));
    expect(result.output).toContain(`${own} EACCES`);
  });

  it("leaves no slirp4netns behind, when the command ends and when it is killed", async () => {
    // The first command runs until the test has seen its slirp4netns (a scan of /proc takes
    // a while on a loaded machine: a one-second command once ended before any scan found it).
    // It makes the file it waits on; the test writes into it (helpers/hostile-repo.ts says
    // why not a file made from outside).
    const seenFile = path.join(dir, "seen-slirp");
    const seen = new Set<number>();
    let scanning = false;
    const watch = setInterval(() => {
      if (scanning) return;
      scanning = true;
      void ourSlirps()
        .then(async (pids) => {
          pids.forEach((pid) => seen.add(pid));
          if (pids.length > 0 && existsSync(seenFile)) await writeFile(seenFile, "seen");
        })
        .finally(() => (scanning = false));
    }, 50);
    try {
      const ended = await runSandboxed(
        ": > seen-slirp; until [ -s seen-slirp ]; do sleep 0.05; done",
        { cwd: dir, timeoutMs: 20_000, env },
      );
      expect(ended.ok, ended.output).toBe(true);
      expect(seen.size).toBeGreaterThan(0); // it was there while the command ran
      expect(await noneLeftWithin(2_000)).toBe(true);

      seen.clear();
      // Killed at its time limit: long enough for a scan on a loaded machine to find it.
      const killed = await runSandboxed("trap '' TERM; while :; do sleep 0.1; done", {
        cwd: dir,
        timeoutMs: 5_000,
      });
      expect(killed.timedOut).toBe(true);
      expect(seen.size).toBeGreaterThan(0);
      expect(await noneLeftWithin(2_000)).toBe(true);
    } finally {
      clearInterval(watch);
    }
  });

  it("fails a command at once, saying why, when the network cannot be brought up", async () => {
    // A slirp4netns that fails the way a broken one does, first on the PATH.
    const bin = path.join(dir, "bin");
    await mkdir(bin);
    await writeFile(
      path.join(bin, "slirp4netns"),
      "#!/bin/sh\necho 'slirp4netns: cannot open /dev/net/tun (simulated)' >&2\nexit 1\n",
    );
    await chmod(path.join(bin, "slirp4netns"), 0o755);
    const saved = process.env.PATH;
    process.env.PATH = `${bin}:${saved}`;
    try {
      const result = await runSandboxed("echo RAN", { cwd: dir, timeoutMs: 30_000 });
      expect(result.ok).toBe(false);
      expect(result.output).not.toContain("RAN");
      expect(result.output).toContain("cannot open /dev/net/tun (simulated)");
      expect(result.durationMs).toBeLessThan(5_000);
      expect(describeResult(result)).toMatch(
        /^`echo RAN` failed with exit code 125 after .* \(no network: slirp4netns could not bring the network up \(SANDBOX_NETWORK=public\)\)$/,
      );
      await expect(checkSandbox()).rejects.toThrow(
        /^SANDBOX_NETWORK=public does not work on this machine \(.*simulated.*\): install slirp4netns/,
      );
    } finally {
      process.env.PATH = saved;
    }
  });

  it("names the fix when slirp4netns is missing", async () => {
    // A PATH with everything the sandbox needs but slirp4netns.
    const bin = path.join(dir, "bin");
    await mkdir(bin);
    for (const tool of ["bwrap", "prlimit", "unshare", "setpriv"])
      await symlink(
        execFileSync("sh", ["-c", `command -v ${tool}`], { encoding: "utf8" }).trim(),
        path.join(bin, tool),
      );
    const saved = process.env.PATH;
    process.env.PATH = bin;
    try {
      await expect(checkSandbox()).rejects.toThrow(
        /^SANDBOX_NETWORK=public needs slirp4netns, not found on this machine: install slirp4netns, iproute2 and util-linux \(`apt-get install slirp4netns iproute2 util-linux`\)\.$/,
      );
    } finally {
      process.env.PATH = saved;
    }
  });
});

describe("SANDBOX_NETWORK=none (the default)", () => {
  beforeEach(() => configureSandbox({}));

  it("has its own loopback only, and the host's resolver file", async () => {
    const result = await runSandboxed(`ip -o link show; ${probeScript(hostAddresses())}`, {
      cwd: dir,
      timeoutMs: 20_000,
      env,
    });
    expect(result.ok, result.output).toBe(true);
    const links = result.output.split("\n").filter((l) => /^\d+: /.test(l));
    expect(links).toHaveLength(1);
    expect(links[0]).toMatch(/^1: lo:/);
    for (const address of hostAddresses())
      expect(result.output).toContain(`${address} ENETUNREACH`);
    const resolv = await runSandboxed("cat /etc/resolv.conf", { cwd: dir, timeoutMs: 20_000, env });
    expect(resolv.output).toBe(await readFile("/etc/resolv.conf", "utf8"));
  });
});

describe("SANDBOX_NETWORK setting", () => {
  it("is none by default and accepts public", () => {
    expect(loadConfig({}).sandbox.network).toBe("none");
    expect(loadConfig({ SANDBOX_NETWORK: "public" }).sandbox.network).toBe("public");
    expect(() => loadConfig({ SANDBOX_NETWORK: "host" })).toThrow(/SANDBOX_NETWORK/);
  });
});
