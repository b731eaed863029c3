/*
 * The setup step's way out (SANDBOX_SETUP_ALLOW): a filtering HTTP(S) proxy that lets a
 * sandboxed install reach the package registries on the allowlist and nothing else.
 *
 * The proxy is Debian's tinyproxy (package `tinyproxy`), not one of ours: it is small,
 * maintained, starts in milliseconds (one per setup run, so each run's denials are its own),
 * filters CONNECT tunnels and plain requests by host name with a default-deny list
 * (`FilterDefaultDeny Yes`, anchored extended regular expressions), refuses a host off the
 * list with `403 Filtered` before it resolves or connects to it, and logs each refusal with
 * the host's name, which is how a failing install learns which host to allow. squid does the
 * same with far more weight (a cache, helpers, seconds to start). HTTPS stays end-to-end
 * encrypted (the proxy only sees the CONNECT line), so the filter is per host, not per method
 * or path: setup runs on the repository's own files before the model has written anything.
 *
 * The proxy listens on the host's 127.0.0.1 on a free port; the sandbox reaches it through
 * slirp4netns's 10.0.2.2 and nothing else (sandbox/network.ts, proxyNetwork).
 *
 * A name is not an address: what tinyproxy lets through goes to its `Upstream`, the address
 * guard (sandbox/setup-proxy-guard.ts), which resolves the name, refuses loopback, private,
 * link-local and this host's own addresses and the service's own ports (unless
 * SANDBOX_SETUP_ALLOW_ADDRESSES lists the range), limits plain HTTP to CONNECT's ports, and
 * connects to the address it checked. tinyproxy itself then resolves and connects to nothing.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { findExecutable } from "../util/executables.js";
import {
  startAddressGuard,
  STRICT_POLICY,
  type AddressGuard,
  type AddressPolicy,
} from "./setup-proxy-guard.js";

/** What to install when the proxy is missing. */
export const PROXY_FIX =
  "install tinyproxy (`apt-get install tinyproxy`; scripts/setup.sh does), or set SANDBOX_SETUP_ALLOW to an empty value to run the setup step without a network";

/**
 * The default allowlist: the public npm registry (and yarn's name for it), PyPI and its
 * files host, the Go module proxy and checksum database, crates.io (API, sparse index,
 * downloads) and RubyGems.
 */
export const DEFAULT_SETUP_ALLOW = [
  "registry.npmjs.org",
  "registry.yarnpkg.com",
  "pypi.org",
  "files.pythonhosted.org",
  "proxy.golang.org",
  "sum.golang.org",
  "crates.io",
  "index.crates.io",
  "static.crates.io",
  "rubygems.org",
  "index.rubygems.org",
];

/** One allowlist entry: `host`, `*.domain` (any host below it), optionally with `:port`. */
export interface AllowEntry {
  host: string;
  /** `*.domain`: hosts below `host` (not `host` itself). */
  wildcard: boolean;
  port: number | null;
}

const HOST = /^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/;

/** Parses SANDBOX_SETUP_ALLOW's entries; throws naming the first that is not a host name. */
export function parseAllowList(entries: readonly string[]): AllowEntry[] {
  return entries.map((raw) => {
    const text = raw.trim().toLowerCase();
    const match = /^(.*?)(?::(\d{1,5}))?$/.exec(text);
    const name = match?.[1] ?? "";
    const port = match?.[2] ? Number(match[2]) : null;
    if (!HOST.test(name) || (port !== null && (port < 1 || port > 65535)))
      throw new Error(`"${raw}" is not a host name (host, *.domain, host:port)`);
    const wildcard = name.startsWith("*.");
    return { host: wildcard ? name.slice(2) : name, wildcard, port };
  });
}

/** The tinyproxy filter line of an entry: an anchored extended regular expression. */
export function filterLine(entry: AllowEntry): string {
  const escaped = entry.host.replace(/\./g, "\\.");
  return entry.wildcard ? `^([a-z0-9-]+\\.)+${escaped}$` : `^${escaped}$`;
}

/** Whether `host` is on the list (the same decision as the proxy's filter). */
export function isAllowed(list: readonly AllowEntry[], host: string): boolean {
  const name = host.toLowerCase();
  return list.some((e) => (e.wildcard ? name.endsWith(`.${e.host}`) : name === e.host));
}

/** The ports a setup run may reach: 443 and those the allowlist names (`host:port`). */
export function allowedPorts(list: readonly AllowEntry[]): Set<number> {
  return new Set([443, ...list.map((e) => e.port).filter((p): p is number => p !== null)]);
}

/**
 * Whether a setup run may reach `port` of `host` (a host on the list): 443, or the port its
 * own `host:port` entry names. tinyproxy's ConnectPort is one list for every host; the
 * address guard holds each host to its own, for CONNECT and plain HTTP alike.
 */
export function portAllowed(list: readonly AllowEntry[], host: string, port: number): boolean {
  return port === 443 || list.some((e) => e.port === port && isAllowed([e], host));
}

/** The proxy's configuration file; `upstream` is the address guard's port. */
export function proxyConfig(options: {
  port: number;
  logFile: string;
  filterFile: string;
  list: readonly AllowEntry[];
  upstream: number;
}): string {
  return [
    `Port ${options.port}`,
    "Listen 127.0.0.1",
    // Long downloads through a tunnel go quiet while the client works; installs retry.
    "Timeout 600",
    `LogFile "${options.logFile}"`,
    // Connect: every refusal ("Proxying refused on filtered domain") and every connection
    // made ("Established connection to host"), nothing of what passes through.
    "LogLevel Connect",
    "MaxClients 200",
    `Filter "${options.filterFile}"`,
    "FilterType ere",
    "FilterDefaultDeny Yes",
    "DisableViaHeader Yes",
    ...[...allowedPorts(options.list)].map((p) => `ConnectPort ${p}`),
    // Everything let through by name goes to the address guard, which checks the address.
    `Upstream http 127.0.0.1:${options.upstream}`,
    "",
  ].join("\n");
}

/**
 * The hosts a proxy log says it refused, in order, each once: those its filter named, and
 * requested ones off the list (`list`) that it refused before filtering (a CONNECT to a port
 * other than 443 or a listed one, logged without the name), as `host:port` when only the
 * port is off the list.
 */
export function refusedHosts(log: string, list: readonly AllowEntry[] = []): string[] {
  const hosts = new Set<string>();
  const ports = new Set([443, ...list.map((e) => e.port)]);
  for (const line of log.split("\n")) {
    const filtered = /Proxying refused on filtered (?:domain|url) "([^"]+)"/.exec(line);
    if (filtered) {
      hosts.add(filtered[1]!);
      continue;
    }
    const connect = /: Request \(file descriptor \d+\): CONNECT \[?([^\s\]]+?)\]?:(\d+) /.exec(
      line,
    );
    if (!connect) continue;
    const [, host, port] = connect as unknown as [string, string, string];
    if (!isAllowed(list, host)) hosts.add(host);
    else if (!ports.has(Number(port))) hosts.add(`${host}:${port}`);
  }
  return [...hosts];
}

/** What a proxy did so far, from its log and its address guard. */
export interface ProxyReport {
  /** Hosts refused (not on the list), never connected to. */
  refused: string[];
  /** Hosts on the list refused by address, as `host (why)`, never connected to. */
  blocked: string[];
  /** Hosts connected to (on the list, at an allowed address). */
  contacted: string[];
}

/** A running proxy of one setup run. */
export interface SetupProxy {
  port: number;
  report(): Promise<ProxyReport>;
  stop(): Promise<void>;
}

/** Found once per PATH (the tests change it). */
const binaries = new Map<string, Promise<string | undefined>>();

/** tinyproxy's path; throws naming the fix when it is not installed. */
export async function proxyBinary(): Promise<string> {
  const key = process.env.PATH ?? "";
  let binary = binaries.get(key);
  if (!binary) {
    binary = findExecutable("tinyproxy", ["/usr/sbin", "/sbin"]);
    binaries.set(key, binary);
  }
  const found = await binary;
  if (!found) {
    binaries.delete(key);
    throw new Error(`The setup step's proxy (tinyproxy) is not installed: ${PROXY_FIX}.`);
  }
  return found;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: "127.0.0.1", port });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

const START_TIMEOUT_MS = 5_000;

/**
 * Starts a proxy that lets through only the hosts of `allow`, at addresses `policy` allows
 * (tinyproxy in the foreground, killed by stop(), and its address guard). Throws naming the
 * fix when tinyproxy is missing or will not start.
 */
export async function startSetupProxy(
  allow: readonly string[],
  policy: AddressPolicy = STRICT_POLICY,
): Promise<SetupProxy> {
  const tinyproxy = await proxyBinary();
  const list = parseAllowList(allow);
  const guard = await startAddressGuard((host, port) => portAllowed(list, host, port), policy);
  try {
    return await startTinyproxy(tinyproxy, list, guard);
  } catch (error) {
    await guard.stop();
    throw error;
  }
}

async function startTinyproxy(
  tinyproxy: string,
  list: AllowEntry[],
  guard: AddressGuard,
): Promise<SetupProxy> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "foreman-setup-proxy-"));
  const logFile = path.join(dir, "proxy.log");
  const filterFile = path.join(dir, "allow");
  await writeFile(filterFile, `${list.map(filterLine).join("\n")}\n`);
  let lastError = "";
  // A free port can be taken between the probe and tinyproxy's bind: a few tries.
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePort();
    const config = path.join(dir, "tinyproxy.conf");
    await writeFile(config, proxyConfig({ port, logFile, filterFile, list, upstream: guard.port }));
    const child: ChildProcess = spawn(tinyproxy, ["-d", "-c", config], {
      stdio: ["ignore", "ignore", "pipe"],
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
    });
    let stderr = "";
    child.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
    let exited = false;
    child.once("exit", () => (exited = true));
    child.once("error", (error) => {
      exited = true;
      stderr += error.message;
    });
    const deadline = Date.now() + START_TIMEOUT_MS;
    let up = false;
    while (!exited && Date.now() < deadline) {
      if (await canConnect(port)) {
        up = true;
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    if (up && !exited) {
      const stop = async () => {
        if (!exited) {
          const gone = new Promise((resolve) => child.once("exit", resolve));
          child.kill("SIGKILL");
          await gone;
        }
        await guard.stop();
        await rm(dir, { recursive: true, force: true });
      };
      return {
        port,
        report: async () => {
          const log = await readFile(logFile, "utf8").catch(() => "");
          return {
            refused: refusedHosts(log, list),
            blocked: guard.refused(),
            contacted: guard.contacted(),
          };
        },
        stop,
      };
    }
    if (!exited) child.kill("SIGKILL");
    const log = await readFile(logFile, "utf8").catch(() => "");
    lastError = `${stderr}\n${log}`.trim().split("\n").slice(-3).join(" ");
  }
  await rm(dir, { recursive: true, force: true });
  throw new Error(
    `The setup step's proxy (tinyproxy) did not start: ${lastError || "no reason given"}.`,
  );
}
