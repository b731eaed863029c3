/*
 * Which git remotes an account may name for a plain-git workspace. A remote is fetched and
 * pushed by the service's own git on the service's machine, so a local path, file://, or an
 * address on the service's own networks would let one account read or write another
 * account's working copies and remotes, or reach services that trust the local network
 * (request forgery). Only https://, ssh:// and scp-like user@host:path remotes on public
 * addresses pass, unless the operator sets ALLOW_LOCAL_REPOS=true (development, tests).
 *
 * The check runs when a workspace is created (syntax, and the host's addresses when it
 * resolves) and again right before each clone or push (the name may resolve elsewhere by
 * then). Address classes come from ipaddr.js (the library Express's proxy-addr uses), so
 * the ranges are not hand-written masks.
 */
import { lookup } from "node:dns/promises";
import ipaddr from "ipaddr.js";

/** A remote the policy refuses; the message says why, in words for the account. */
export class RemoteUrlError extends Error {
  override name = "RemoteUrlError";
}

export interface RemoteHost {
  /** The host as written, brackets of an IPv6 literal removed. */
  host: string;
  /** The port git connects to: written, or the scheme's default. */
  port: number;
  scheme: "https" | "ssh";
}

/** Host names that always mean this machine or its private network. */
const LOCAL_NAMES = /(^|\.)(localhost|local|internal|localdomain|home\.arpa)$/i;

/**
 * The host of a remote the policy allows by its syntax, or a RemoteUrlError: only
 * https://, ssh:// and user@host:path; no control characters, whitespace or leading '-',
 * no host that is an address outside the public unicast ranges or a local name.
 */
export function parseRemote(url: string): RemoteHost {
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u0020\u007f-\u009f]/.test(url))
    throw new RemoteUrlError("must not contain whitespace or control characters");
  if (url.startsWith("-")) throw new RemoteUrlError("must not start with '-'");
  let host: string;
  let port: number;
  let scheme: RemoteHost["scheme"];
  const schemeMatch = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(url);
  if (schemeMatch) {
    scheme = schemeMatch[1]!.toLowerCase() as RemoteHost["scheme"];
    if (scheme !== "https" && scheme !== "ssh")
      throw new RemoteUrlError(
        `the ${schemeMatch[1]}:// transport is not allowed; use https://, ssh:// or user@host:path`,
      );
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw new RemoteUrlError("is not a valid URL");
    }
    if (/^(-|%2d)/i.test(parsed.username))
      throw new RemoteUrlError("has a user name starting with '-'");
    host = parsed.hostname.replace(/^\[|\]$/g, "");
    port = parsed.port ? Number(parsed.port) : scheme === "https" ? 443 : 22;
    if (!parsed.pathname || parsed.pathname === "/")
      throw new RemoteUrlError("names no repository path");
  } else {
    // scp-like: [user@]host:path, where host has no '/' and path does not start with '/'
    // being taken as a port ("host:22/x" is still scp-like for git).
    const scp = /^(?:([^@/:]+)@)?(\[[^\]]+\]|[^@/:[\]]+):(.+)$/.exec(url);
    if (!scp || !scp[1])
      throw new RemoteUrlError(
        "must be an https:// or ssh:// URL, or user@host:path (local paths are not allowed)",
      );
    if (url.includes("::"))
      throw new RemoteUrlError("transport::address remotes (such as ext::) are not allowed");
    scheme = "ssh";
    host = scp[2]!.replace(/^\[|\]$/g, "");
    port = 22;
  }
  if (!host) throw new RemoteUrlError("names no host");
  if (host.startsWith("-")) throw new RemoteUrlError("has a host starting with '-'");
  if (ipaddr.isValid(host)) {
    const problem = addressProblem(host);
    if (problem) throw new RemoteUrlError(`points at ${problem}`);
  } else {
    const name = host.replace(/\.$/, "");
    if (LOCAL_NAMES.test(name)) throw new RemoteUrlError(`points at a local host name (${name})`);
    if (!/^[A-Za-z0-9_.-]+$/.test(name)) throw new RemoteUrlError("has an invalid host name");
  }
  return { host, port, scheme };
}

/** Why an address is not a public one (loopback, private, …), or null when it is. */
export function addressProblem(address: string): string | null {
  let parsed: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    parsed = ipaddr.parse(address);
  } catch {
    return `an address that cannot be read (${address})`;
  }
  if (parsed.kind() === "ipv6" && (parsed as ipaddr.IPv6).isIPv4MappedAddress())
    parsed = (parsed as ipaddr.IPv6).toIPv4Address();
  const range = parsed.range();
  if (range === "unicast") return null;
  return `a non-public address (${parsed.toString()}, ${range})`;
}

/**
 * The policy with name resolution: answers the addresses the host resolves to, all of them
 * public, or throws a RemoteUrlError. `unresolved: "allow"` accepts a name that does not
 * resolve now (at creation; the clone checks again), "refuse" refuses it (at clone time).
 */
export async function checkRemote(
  url: string,
  options: { allowLocal: boolean; unresolved: "allow" | "refuse" },
): Promise<string[]> {
  if (options.allowLocal) return [];
  const { host } = parseRemote(url);
  if (ipaddr.isValid(host)) return [ipaddr.parse(host).toString()];
  let addresses: { address: string }[];
  try {
    addresses = await lookup(host, { all: true, verbatim: true });
  } catch (error) {
    if (options.unresolved === "allow") return [];
    throw new RemoteUrlError(
      `the host ${host} could not be resolved (${(error as NodeJS.ErrnoException).code ?? "lookup failed"})`,
    );
  }
  for (const { address } of addresses) {
    const problem = addressProblem(address);
    if (problem) throw new RemoteUrlError(`the host ${host} resolves to ${problem}`);
  }
  return addresses.map((a) => a.address);
}

/**
 * Git `-c` settings that make git connect to exactly the addresses checked, so a name
 * cannot resolve to a public address for the check and to a local one for git (DNS
 * rebinding). Only https goes through curl, which takes such a list; ssh resolves again.
 */
export function pinnedAddresses(url: string, addresses: string[]): string[] {
  if (addresses.length === 0) return [];
  const { host, port, scheme } = parseRemote(url);
  if (scheme !== "https" || ipaddr.isValid(host)) return [];
  const list = addresses.map((a) => (a.includes(":") ? `[${a}]` : a)).join(",");
  return ["-c", `http.curloptResolve=${host}:${port}:${list}`];
}

/**
 * The check a clone or push makes just before it runs: answers extra git arguments (the
 * pinned addresses), or throws a RemoteUrlError.
 */
export async function remoteGitArgs(url: string, allowLocal: boolean): Promise<string[]> {
  if (allowLocal) return [];
  const addresses = await checkRemote(url, { allowLocal, unresolved: "refuse" });
  return pinnedAddresses(url, addresses);
}
