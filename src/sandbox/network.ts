/*
 * SANDBOX_NETWORK=public: a sandboxed command may reach public hosts (package registries for
 * installs) but never the host's loopback, the host's own addresses or private ranges.
 *
 * Built from maintained tools, not a network stack of ours:
 *
 * - util-linux `unshare` gives the run a user namespace (the service's uid mapped to root)
 *   and a network namespace of its own (and a mount namespace, for the overlay mounts of
 *   sandbox/overlays.ts). bwrap then runs in that network namespace
 *   (`--share-net`) but in a nested user namespace of its own, so no process of the command
 *   ever holds a capability over the network namespace: it cannot change routes or rules.
 * - `slirp4netns` (user-mode networking) gives the namespace a `tap0` with 10.0.2.100/24, a
 *   default route through 10.0.2.2 and a DNS forwarder on 10.0.2.3, and makes the command's
 *   connections from the host on its behalf. `--disable-host-loopback` stops 10.0.2.2 from
 *   meaning the host's 127.0.0.1; `--enable-sandbox` and `--enable-seccomp` confine
 *   slirp4netns itself. It runs under `setpriv --pdeathsig KILL`, so it dies with the command
 *   (and the run's process group is killed at the end anyway).
 * - iproute2 policy rules, set inside the namespace before the command starts, refuse every
 *   packet to a private, loopback-like, link-local (cloud metadata), multicast or reserved
 *   IPv4 range and to every address of the host's own interfaces, with `prohibit`: connect()
 *   fails at once with EACCES. 10.0.2.3 is reachable on port 53 only (the DNS forwarder;
 *   other ports there would be relayed to the host's resolver address). No IPv6 is set up, so
 *   IPv6 destinations are unreachable.
 * - The command's /etc/resolv.conf names 10.0.2.3.
 *
 * A network that cannot be brought up ends the command with exit code 125 and a line saying
 * so (plus slirp4netns's own message); `networkFailure` turns that into the result's reason.
 */
import { writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { findExecutable } from "../util/executables.js";

export type SandboxNetwork = "none" | "public";

/** What to install when a tool of the public network is missing. */
export const NETWORK_FIX =
  "install slirp4netns, iproute2 and util-linux (`apt-get install slirp4netns iproute2 util-linux`)";

/** The exit code of a run whose network could not be brought up. */
export const NETWORK_FAILED_EXIT = 125;
const NETWORK_FAILED_MARK = "foreman-sandbox: SANDBOX_NETWORK=public:";

/** slirp4netns's fixed addresses (its default 10.0.2.0/24). */
export const SLIRP_DNS = "10.0.2.3";

/*
 * Never reachable from the sandbox (IANA special-purpose IPv4 ranges that are not global,
 * RFC 6890): "this network", private (RFC 1918), shared CGNAT, link-local (cloud metadata on
 * 169.254.169.254), IETF protocol assignments, benchmarking, multicast, reserved and broadcast.
 * 127/8 is not listed: inside the namespace it is the command's own loopback (the kernel's
 * local table answers it before these rules), and 10.0.2.2, the only way to the host's, is
 * covered by 10/8.
 */
export const BLOCKED_IPV4_RANGES = [
  "0.0.0.0/8",
  "10.0.0.0/8",
  "100.64.0.0/10",
  "169.254.0.0/16",
  "172.16.0.0/12",
  "192.0.0.0/24",
  "192.168.0.0/16",
  "198.18.0.0/15",
  "224.0.0.0/4",
  "240.0.0.0/4",
];

/** Every IPv4 address of the host's interfaces but loopback (a public one included). */
export function hostAddresses(): string[] {
  const found = new Set<string>();
  for (const entries of Object.values(os.networkInterfaces())) {
    for (const entry of entries ?? []) {
      if (entry.family === "IPv4" && !entry.address.startsWith("127.")) found.add(entry.address);
    }
  }
  return [...found].sort();
}

/** The `ip -batch` input that sets the namespace's rules (lower priority = checked first). */
export function networkRules(): string {
  const lines = [
    `rule add priority 100 to ${SLIRP_DNS} ipproto udp dport 53 lookup main`,
    `rule add priority 101 to ${SLIRP_DNS} ipproto tcp dport 53 lookup main`,
    // The rest of slirp4netns's own network: the gateway (the host) and the DNS forwarder's
    // other ports. The command's own 10.0.2.100 is answered by the local table first.
    "rule add priority 110 prohibit to 10.0.2.0/24",
  ];
  for (const range of [...BLOCKED_IPV4_RANGES, ...hostAddresses()])
    lines.push(`rule add priority 120 prohibit to ${range}`);
  return `${lines.join("\n")}\n`;
}

interface NetworkTools {
  unshare: string;
  setpriv: string;
  slirp4netns: string;
  ip: string;
}

/** Found once per PATH (the tests change it). */
const found = new Map<string, Promise<NetworkTools>>();

/** On the PATH, or in the sbin folders an ordinary user's PATH often leaves out (ip). */
function find(name: string): Promise<string | undefined> {
  return findExecutable(name, ["/usr/sbin", "/sbin"]);
}

/** The tools' absolute paths; throws naming the fix when one is missing. */
export function networkTools(): Promise<NetworkTools> {
  const key = process.env.PATH ?? "";
  let tools = found.get(key);
  if (!tools) {
    tools = (async () => {
      const paths: Partial<NetworkTools> = {};
      const missing: string[] = [];
      for (const name of ["unshare", "setpriv", "slirp4netns", "ip"] as const) {
        const file = await find(name);
        if (file) paths[name] = file;
        else missing.push(name);
      }
      if (missing.length > 0) {
        found.delete(key);
        throw new Error(
          `SANDBOX_NETWORK=public needs ${missing.join(", ")}, not found on this machine: ${NETWORK_FIX}.`,
        );
      }
      return paths as NetworkTools;
    })();
    found.set(key, tools);
  }
  return tools;
}

/*
 * Runs as the run's process (same pid from the start to bwrap, so bwrap's --die-with-parent
 * still watches the service). $1 the run folder, $2 the rules, $3..$6 the tools, then bwrap.
 * A helper forked first waits until the main process is inside its new namespaces, then
 * becomes slirp4netns attached to it; the main process waits for slirp4netns's ready signal
 * (end of file instead means it failed), sets the rules and execs bwrap.
 */
const LAUNCHER = `d=$1; rules=$2; ip=$3; slirp=$4; unshare=$5; setpriv=$6; hostloop=$7; shift 7
mkfifo -m 600 "$d/net-ns" "$d/net-up" || exit ${NETWORK_FAILED_EXIT}
p=$$
(
  read x <"$d/net-ns" || exit 0
  exec "$setpriv" --pdeathsig KILL -- "$slirp" --configure --mtu=65520 $hostloop \\
    --enable-sandbox --enable-seccomp --ready-fd=3 "$p" tap0 3>"$d/net-up" 2>"$d/net.log"
) </dev/null >/dev/null 2>&1 &
exec "$unshare" --user --map-root-user --net --mount -- /bin/sh -c '
  echo >"$1/net-ns"
  read up <"$1/net-up"
  fail() { echo "${NETWORK_FAILED_MARK} $1" >&2; cat "$2/net.log" >&2 2>/dev/null; exit ${NETWORK_FAILED_EXIT}; }
  [ "$up" = 1 ] || fail "slirp4netns could not bring the network up" "$1"
  "$3" -batch - <<EOF || fail "could not set the rules that keep private addresses out" "$1"
$2
EOF
  shift 3
  exec "$@"' sh "$d" "$rules" "$ip" "$@"
`;

/**
 * For a public-network run: bwrap options to add (before its `--`) and the argv to run in
 * place of `bwrapArgv` (bwrap, its options, the command). `run` is the run's private folder
 * (not mounted in the sandbox).
 */
export function publicNetwork(run: string): Promise<UserModeNetwork> {
  return userModeNetwork(run, networkRules(), "--disable-host-loopback");
}

/** What a run on a user-mode network adds to bwrap, and how its argv is wrapped. */
export interface UserModeNetwork {
  bwrapOptions: string[];
  wrap(bwrapArgv: string[]): string[];
}

/**
 * A slirp4netns network with `rules` (`ip -batch` input) for one run; `loopbackFlag` is
 * slirp4netns's `--disable-host-loopback` or empty (the setup proxy is on the host's loopback).
 */
async function userModeNetwork(
  run: string,
  rules: string,
  loopbackFlag: string,
): Promise<UserModeNetwork> {
  const { unshare, setpriv, slirp4netns, ip } = await networkTools();
  const resolv = path.join(run, "resolv.conf");
  await writeFile(resolv, `nameserver ${SLIRP_DNS}\n`);
  return {
    bwrapOptions: ["--share-net", "--ro-bind", resolv, "/etc/resolv.conf"],
    wrap: (bwrapArgv) => [
      "/bin/sh",
      "-c",
      LAUNCHER,
      "sh",
      run,
      rules,
      ip,
      slirp4netns,
      unshare,
      setpriv,
      loopbackFlag,
      ...bwrapArgv,
    ],
  };
}

/** The gateway address through which a setup run reaches the host's loopback (its proxy). */
export const SLIRP_HOST = "10.0.2.2";

/**
 * The `ip -batch` input of a setup run: the one way out is the setup proxy on the host's
 * loopback (10.0.2.2:port, sandbox/setup-proxy.ts); every other destination, the DNS forwarder
 * included, is refused. Names are resolved by the proxy, after its allowlist said yes.
 */
export function proxyRules(port: number): string {
  return [
    `rule add priority 100 to ${SLIRP_HOST} ipproto tcp dport ${port} lookup main`,
    "rule add priority 110 prohibit",
  ]
    .map((line) => `${line}\n`)
    .join("");
}

/**
 * For a setup run: like publicNetwork, but slirp4netns maps 10.0.2.2 to the host's loopback
 * and the rules let through only the setup proxy's port there (proxyRules). The command
 * reaches the package registries through the proxy (HTTP_PROXY/HTTPS_PROXY) or nothing.
 */
export function proxyNetwork(run: string, port: number): Promise<UserModeNetwork> {
  return userModeNetwork(run, proxyRules(port), "");
}

/** Why a run failed when its network could not be brought up; undefined otherwise. */
export function networkFailure(
  exitCode: number | null,
  output: string,
  setting = "SANDBOX_NETWORK=public",
): string | undefined {
  if (exitCode !== NETWORK_FAILED_EXIT) return undefined;
  const line = output.split("\n").find((l) => l.startsWith(NETWORK_FAILED_MARK));
  if (!line) return undefined;
  return `no network: ${line.slice(NETWORK_FAILED_MARK.length).trim()} (${setting})`;
}
