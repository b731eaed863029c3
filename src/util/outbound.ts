import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from "node:dns";
import { Agent as HttpAgent } from "node:http";
import { Agent as HttpsAgent } from "node:https";
import { isIP, type Socket } from "node:net";
import type { Duplex } from "node:stream";
import { addressProblem } from "./remote-url.js";

/*
 * Calls to a URL an account named (a Jira site) must not reach the service's own networks.
 * The rule is checked where each connection is made, not only when the URL is saved: an
 * https agent whose every new connection resolves the host itself and refuses any address
 * the policy does not allow (so a DNS answer that changes after an earlier check cannot
 * point the call inward), an http agent that refuses every connection (https only, also
 * after a redirect), and no redirects followed at all (REQUEST_RULES), so no hop ever goes
 * where the first was not checked to go.
 *
 * The policy is injectable for tests only, which need a local HTTPS fake: production uses
 * PUBLIC_ADDRESSES.
 */

/** Which addresses an outgoing call may connect to. */
export interface AddressPolicy {
  /** Why a connection to `address` (an IP) and `port` is refused, or null to allow it. */
  refuse(address: string, port: number): string | null;
  /** Certificates to trust besides the system's (tests: a local HTTPS fake's own). */
  ca?: string | undefined;
}

/** Public unicast addresses only (the clone URL policy's address check), any port. */
export const PUBLIC_ADDRESSES: AddressPolicy = { refuse: (address) => addressProblem(address) };

/** A refused connection: the error a request made through the agents below fails with. */
function refusal(message: string): NodeJS.ErrnoException {
  return Object.assign(new Error(message), { code: "EADDRNOTALLOWED" });
}

/** Node's createConnection callback; a refusal passes no socket. */
type ConnectionCallback = (error: Error | null, socket?: Duplex) => void;

class PolicyHttpsAgent extends HttpsAgent {
  constructor(private readonly policy: AddressPolicy) {
    super({ keepAlive: true, ...(policy.ca ? { ca: policy.ca } : {}) });
  }

  // Called for every new connection (pooled ones were checked when they were made).
  override createConnection(
    options: { host?: string | null; port?: number | string | null },
    callback: ConnectionCallback,
  ): Duplex | undefined {
    const host = String(options.host ?? "localhost").replace(/^\[|\]$/g, "");
    const port = Number(options.port ?? 443);
    const create = (super.createConnection as (o: unknown, c: ConnectionCallback) => Duplex).bind(
      this,
    );
    // An address as host is never looked up: checked here.
    if (isIP(host)) {
      const problem = this.policy.refuse(host, port);
      if (problem) {
        callback(refusal(`${host}:${port} is not allowed: ${problem}`));
        return undefined;
      }
      return create(options, callback);
    }
    const lookup = (
      hostname: string,
      lookupOptions: LookupOptions,
      done: (error: Error | null, address: string | LookupAddress[], family?: number) => void,
    ) =>
      dnsLookup(hostname, { ...lookupOptions, all: true }, (error, addresses) => {
        if (error) return done(error, "");
        for (const { address } of addresses) {
          const problem = this.policy.refuse(address, port);
          if (problem) return done(refusal(`${hostname} resolves to ${problem}`), "");
        }
        if (lookupOptions.all) return done(null, addresses);
        const first = addresses[0];
        if (!first) return done(refusal(`${hostname} has no address`), "");
        done(null, first.address, first.family);
      });
    return create({ ...options, lookup }, callback);
  }
}

class RefusingHttpAgent extends HttpAgent {
  override createConnection(
    options: { host?: string | null },
    callback: ConnectionCallback,
  ): Socket | undefined {
    callback(refusal(`plain http to ${String(options.host)} is refused: https only`));
    return undefined;
  }
}

const httpsAgents = new WeakMap<AddressPolicy, HttpsAgent>();
const refusingHttp = new RefusingHttpAgent();

/**
 * Axios request settings for calls to a URL an account named: the policy's https agent (one
 * per policy, its pool per host), plain http refused, no redirect followed (a 3xx is an
 * error), and no proxy from the environment (the checks must see the real destination).
 */
export function guardedAxiosConfig(policy: AddressPolicy = PUBLIC_ADDRESSES) {
  let httpsAgent = httpsAgents.get(policy);
  if (!httpsAgent) {
    httpsAgent = new PolicyHttpsAgent(policy);
    httpsAgents.set(policy, httpsAgent);
  }
  return {
    httpsAgent,
    httpAgent: refusingHttp,
    maxRedirects: 0,
    proxy: false as const,
  };
}
