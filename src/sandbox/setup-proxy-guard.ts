/*
 * The setup proxy's second check: by address, where tinyproxy (sandbox/setup-proxy.ts) checks by
 * name. A name on SANDBOX_SETUP_ALLOW may resolve to anything (`localhost`, a registry name an
 * attacker's DNS answers with 127.0.0.1, or that answers differently a second later), so
 * tinyproxy forwards every request it lets through to this guard (its `Upstream`), and the
 * guard:
 *
 * - resolves the name once, refuses every address that is not a public unicast one (loopback,
 *   private, link-local, CGNAT, multicast, reserved, the unique-local and link-local IPv6
 *   ranges, an IPv4-mapped IPv6 address as its IPv4 one) or is one of this host's own, unless
 *   an operator listed its range in SANDBOX_SETUP_ALLOW_ADDRESSES (CIDRs), and refuses the
 *   service's own ports on this host's addresses whatever the ranges say;
 * - connects to the very address it checked (never to the name again, so a DNS answer that
 *   changes between the check and the connection cannot move it);
 * - limits plain HTTP to the ports CONNECT is limited to (443 and those the allowlist names).
 *
 * ipaddr.js does the parsing and range classification (RFC 6890 special-purpose ranges).
 * Not the clone URL policy's addressProblem (util/remote-url.ts): that refuses every range
 * ipaddr.js calls reserved, documentation ranges included, where a registry may well answer
 * from behind a corporate proxy or a test network; the setup network follows
 * SANDBOX_NETWORK=public's list, so both sandbox networks agree on what "public" is.
 */
import { lookup } from "node:dns/promises";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import ipaddr from "ipaddr.js";
import { BLOCKED_IPV4_RANGES } from "./network.js";

/** What the guard lets through besides public unicast addresses, and what it never does. */
export interface AddressPolicy {
  /** SANDBOX_SETUP_ALLOW_ADDRESSES: ranges (CIDR, or one address) allowed though not public. */
  allowRanges: readonly string[];
  /** The service's own ports: refused on this host's own addresses, whatever allowRanges says. */
  ownPorts: readonly number[];
}

export const STRICT_POLICY: AddressPolicy = { allowRanges: [], ownPorts: [] };

type Range = [ipaddr.IPv4 | ipaddr.IPv6, number];

/** Parses SANDBOX_SETUP_ALLOW_ADDRESSES's entries; throws naming the first that is not a range. */
export function parseAddressRanges(entries: readonly string[]): Range[] {
  return entries.map((raw) => {
    const text = raw.trim();
    try {
      if (text.includes("/")) {
        const [address, bits] = ipaddr.parseCIDR(text);
        const mapped = normal(address).kind() !== address.kind();
        // ::ffff:10.0.0.0/104 is 10.0.0.0/8: addresses are compared as IPv4 (normal()).
        return [normal(address), mapped ? Math.max(0, bits - 96) : bits];
      }
      const address = normal(ipaddr.parse(text));
      return [address, address.kind() === "ipv4" ? 32 : 128];
    } catch {
      throw new Error(`"${raw}" is not an address range (CIDR such as 10.1.2.0/24, or an address)`);
    }
  });
}

/** An IPv4-mapped IPv6 address as the IPv4 address it is. */
function normal(address: ipaddr.IPv4 | ipaddr.IPv6): ipaddr.IPv4 | ipaddr.IPv6 {
  return address.kind() === "ipv6" && (address as ipaddr.IPv6).isIPv4MappedAddress()
    ? (address as ipaddr.IPv6).toIPv4Address()
    : address;
}

/*
 * Not public: for IPv4 the ranges SANDBOX_NETWORK=public refuses (sandbox/network.ts)
 * plus loopback and broadcast, so both doors agree on what "public" is; for IPv6 everything
 * but global unicast (loopback, link-local, unique-local, multicast, documentation …).
 */
const BLOCKED_V4: Range[] = [...BLOCKED_IPV4_RANGES, "127.0.0.0/8", "255.255.255.255/32"].map(
  (cidr) => ipaddr.parseCIDR(cidr),
);

/** The kind of non-public address `ip` is, or undefined when it is public. */
function nonPublicKind(ip: ipaddr.IPv4 | ipaddr.IPv6): string | undefined {
  if (ip.kind() === "ipv6") return ip.range() === "unicast" ? undefined : ip.range();
  if (!BLOCKED_V4.some(([range, bits]) => ip.match(range, bits))) return undefined;
  return ip.range() === "unicast" ? "reserved" : ip.range();
}

/** This host's own addresses (every interface's, loopback included). */
function ownAddresses(): Set<string> {
  const found = new Set<string>();
  for (const entries of Object.values(os.networkInterfaces()))
    for (const entry of entries ?? []) found.add(normal(ipaddr.parse(entry.address)).toString());
  return found;
}

/**
 * Why the guard refuses to connect to `address`:`port`, or undefined when it may. `own` is
 * this host's addresses (ownAddresses).
 */
export function addressRefusal(
  address: string,
  port: number,
  ranges: readonly Range[],
  ownPorts: readonly number[],
  own: ReadonlySet<string> = ownAddresses(),
): string | undefined {
  const ip = normal(ipaddr.parse(address));
  const kind = nonPublicKind(ip);
  const ours = own.has(ip.toString()) || kind === "loopback" || kind === "unspecified";
  if (ours && ownPorts.includes(port)) return `${ip.toString()}:${port} is this service's own port`;
  if (ranges.some(([range, bits]) => range.kind() === ip.kind() && ip.match(range, bits)))
    return undefined;
  if (kind)
    return `${ip.toString()} is a ${kind} address (allow its range with SANDBOX_SETUP_ALLOW_ADDRESSES)`;
  if (ours)
    return `${ip.toString()} is an address of this host (allow it with SANDBOX_SETUP_ALLOW_ADDRESSES)`;
  return undefined;
}

/** A name's addresses, IPv4 first (this host may have no IPv6 route). */
export type Resolver = (host: string) => Promise<{ address: string }[]>;

/** The system's resolver (getaddrinfo: /etc/hosts, then DNS). */
const systemResolver: Resolver = (host) => lookup(host, { all: true, order: "ipv4first" });

/** A running guard: its port on 127.0.0.1, and what it did. */
export interface AddressGuard {
  port: number;
  /** Hosts refused by address, each once, as `host (why)`. */
  refused(): string[];
  /** Hosts connected to, each once, in order. */
  contacted(): string[];
  stop(): Promise<void>;
}

/** `host:port` of a CONNECT line (IPv6 in brackets). */
function splitTarget(target: string): { host: string; port: number } | undefined {
  const match = /^\[?([^\]]+?)\]?:(\d{1,5})$/.exec(target);
  return match ? { host: match[1]!, port: Number(match[2]) } : undefined;
}

/**
 * Starts the guard on 127.0.0.1 (a free port): it lets through connections to `ports` only,
 * to addresses `policy` allows (see the top of this file).
 */
export async function startAddressGuard(
  portAllowed: (host: string, port: number) => boolean,
  policy: AddressPolicy = STRICT_POLICY,
  resolveName: Resolver = systemResolver,
): Promise<AddressGuard> {
  const ranges = parseAddressRanges(policy.allowRanges);
  const refused = new Map<string, string>();
  const contacted = new Set<string>();
  const sockets = new Set<net.Socket>();

  /**
   * The addresses to connect to for host:port (IPv4 first: this host may have no IPv6 route),
   * each checked, or why none. Resolved once: the connection goes to one of these.
   */
  async function resolve(
    host: string,
    port: number,
  ): Promise<{ addresses: string[] } | { refusal: string }> {
    if (!portAllowed(host, port))
      return { refusal: `port ${port} of ${host} is not on SANDBOX_SETUP_ALLOW` };
    let answers: { address: string }[];
    try {
      answers = await resolveName(host);
    } catch {
      return { refusal: `${host} does not resolve` };
    }
    const own = ownAddresses();
    const addresses: string[] = [];
    let first: string | undefined;
    for (const { address } of answers) {
      const why = addressRefusal(address, port, ranges, policy.ownPorts, own);
      if (!why) addresses.push(address);
      else first ??= why;
    }
    // Only the allowed ones are ever connected to, whatever else the answer held.
    if (addresses.length === 0) return { refusal: first ?? `${host} has no address` };
    return { addresses };
  }

  /** A connection to the first of `addresses` that answers. */
  function connectAny(addresses: string[], port: number): Promise<net.Socket> {
    return new Promise((resolve, reject) => {
      const attempt = (i: number) => {
        const socket = net.connect({ host: addresses[i]!, port, timeout: 15_000 });
        const fail = (error: Error) => {
          socket.destroy();
          if (i + 1 < addresses.length) attempt(i + 1);
          else reject(error);
        };
        socket.once("timeout", () => fail(new Error("connect timeout")));
        socket.once("error", fail);
        socket.once("connect", () => {
          socket.removeListener("error", fail);
          socket.setTimeout(0);
          resolve(socket);
        });
      };
      attempt(0);
    });
  }

  function refuse(host: string, why: string): string {
    const text = `${host} refused by the setup proxy: ${why}`;
    if (!refused.has(host)) refused.set(host, `${host} (${why})`);
    return text;
  }

  const server = http.createServer((req, res) => {
    void (async () => {
      let url: URL;
      try {
        url = new URL(req.url ?? "");
      } catch {
        res.writeHead(400).end("absolute http:// URL expected\n");
        return;
      }
      if (url.protocol !== "http:") {
        res.writeHead(400).end("only http:// is proxied in plain\n");
        return;
      }
      const host = url.hostname.replace(/^\[|\]$/g, "");
      const port = Number(url.port || 80);
      const found = await resolve(host, port);
      if ("refusal" in found) {
        res
          .writeHead(403, { "content-type": "text/plain" })
          .end(`${refuse(host, found.refusal)}\n`);
        return;
      }
      const headers = { ...req.headers };
      delete headers["proxy-connection"];
      delete headers["proxy-authorization"];
      let socket: net.Socket;
      try {
        socket = await connectAny(found.addresses, port);
      } catch {
        res.writeHead(502).end();
        return;
      }
      contacted.add(host);
      const upstream = http.request(
        {
          createConnection: () => socket,
          method: req.method,
          path: `${url.pathname}${url.search}`,
          headers,
          setHost: false,
        },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      upstream.on("error", () => {
        if (!res.headersSent) res.writeHead(502).end();
        else res.destroy();
      });
      req.pipe(upstream);
    })();
  });

  server.on("connect", (req: http.IncomingMessage, client: net.Socket, head: Buffer) => {
    sockets.add(client);
    client.once("close", () => sockets.delete(client));
    client.on("error", () => client.destroy());
    void (async () => {
      const target = splitTarget(req.url ?? "");
      if (!target) {
        client.end("HTTP/1.1 400 Bad Request\r\n\r\n");
        return;
      }
      const found = await resolve(target.host, target.port);
      if ("refusal" in found) {
        const text = refuse(target.host, found.refusal);
        client.end(
          `HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain\r\ncontent-length: ${Buffer.byteLength(text) + 1}\r\n\r\n${text}\n`,
        );
        return;
      }
      let upstream: net.Socket;
      try {
        upstream = await connectAny(found.addresses, target.port);
      } catch {
        client.end("HTTP/1.1 502 Bad Gateway\r\n\r\n");
        return;
      }
      sockets.add(upstream);
      upstream.once("close", () => sockets.delete(upstream));
      upstream.on("error", () => client.destroy());
      client.once("close", () => upstream.destroy());
      contacted.add(target.host);
      client.write("HTTP/1.1 200 Connection established\r\n\r\n");
      if (head.length > 0) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    })();
  });

  await new Promise<void>((ok, fail) => {
    server.once("error", fail);
    server.listen(0, "127.0.0.1", ok);
  });
  return {
    port: (server.address() as net.AddressInfo).port,
    refused: () => [...refused.values()],
    contacted: () => [...contacted],
    stop: async () => {
      for (const socket of sockets) socket.destroy();
      server.closeAllConnections();
      await new Promise((done) => server.close(done));
    },
  };
}
