/*
 * The read-only host layout a sandboxed command sees (/usr, /etc entries, the toolchains'
 * folders) and its user (run.ts).
 */
import { lstat, readlink, realpath, stat } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { findExecutable } from "../util/executables.js";
import { isInside, SERVICE_ROOT, sandboxSettings } from "./settings.js";

/** The read-only host layout and what it was worked out from (see layoutArgs). */
let layout: { key: string; args: Promise<string[]> } | undefined;
/** Tool names whose folders (outside /usr and /opt) are mounted read-only. */
const TOOLCHAIN_COMMANDS = [
  "node",
  "npm",
  "npx",
  "corepack",
  "go",
  "gofmt",
  "python3",
  "python",
  "pip3",
  "pip",
  "cargo",
  "rustc",
];

/** rustup's proxies (~/.cargo/bin/cargo) need its toolchains folder. */
export function rustupHome(): string {
  return process.env.RUSTUP_HOME || path.join(os.homedir(), ".rustup");
}

/** Credential files a mounted toolchain folder may hold: covered by an empty file. */
const TOOLCHAIN_CREDENTIALS = ["credentials", "credentials.toml", ".credentials.toml"];

/*
 * What of /etc a toolchain needs: name resolution files (harmless without a network), TLS
 * roots, users and groups (no password hashes: those are in shadow), the dynamic linker's
 * cache, and Debian's alternatives symlinks (cc, python, editor …).
 */
const ETC_ENTRIES = [
  "alternatives",
  "ca-certificates",
  "ca-certificates.conf",
  "ssl",
  "pki",
  "passwd",
  "group",
  "nsswitch.conf",
  "hosts",
  "resolv.conf",
  "localtime",
  "timezone",
  "ld.so.cache",
  "ld.so.conf",
  "ld.so.conf.d",
  "os-release",
  "protocols",
  "services",
  "mime.types",
];

export function findOnPath(name: string): Promise<string | undefined> {
  return findExecutable(name);
}

/** The install folder of a tool: the parent of its bin/ (or pyenv's shims/), else its folder. */
function toolRoot(file: string): string {
  const dir = path.dirname(file);
  return ["bin", "sbin", "shims"].includes(path.basename(dir)) ? path.dirname(dir) : dir;
}

/*
 * The read-only part of the sandbox, the same for every run: /usr (with /usr/local: Go,
 * Node), the merged-/usr symlinks, /opt, a few /etc files, and the install folders of the
 * toolchains on the service's PATH (e.g. ~/.pyenv), found from where they really are rather
 * than from a list of this machine's paths. A folder that would expose DATA_DIR, the
 * service's checkout or the service user's whole home is not mounted; a hidden path below a
 * mounted folder is covered by an empty tmpfs.
 */
async function hostLayout(hidden: string[]): Promise<string[]> {
  const args: string[] = ["--ro-bind", "/usr", "/usr"];
  const mounted = ["/usr"];
  for (const top of ["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"]) {
    const info = await lstat(top).catch(() => undefined);
    if (!info) continue;
    if (info.isSymbolicLink()) args.push("--symlink", await readlink(top), top);
    else if (info.isDirectory()) {
      args.push("--ro-bind", top, top);
      mounted.push(top);
    }
  }
  for (const entry of ETC_ENTRIES) {
    const file = path.join("/etc", entry);
    if (await lstat(file).catch(() => undefined)) args.push("--ro-bind-try", file, file);
  }
  if (await stat("/opt").catch(() => undefined)) {
    args.push("--ro-bind", "/opt", "/opt");
    mounted.push("/opt");
  }
  const home = path.resolve(os.homedir());
  const roots = new Set<string>();
  for (const name of TOOLCHAIN_COMMANDS) {
    const found = await findOnPath(name);
    if (!found) continue;
    const real = await realpath(found).catch(() => found);
    for (const root of [toolRoot(found), toolRoot(real)]) {
      if (mounted.some((m) => isInside(root, m))) continue;
      // Nor a folder inside a hidden one: the service's own node_modules/.bin is on PATH under
      // npm (`node` there is a link to the Node the set-up provides), and mounting it would
      // show the checkout's path and its tools; the link's real folder is mounted instead.
      const exposes =
        root === "/" || root === home || hidden.some((h) => isInside(h, root) || isInside(root, h));
      if (!exposes) roots.add(root);
    }
  }
  if (roots.size > 0 && (await stat(rustupHome()).catch(() => undefined))) {
    const rustup = path.resolve(rustupHome());
    if (rustup !== home && !hidden.some((h) => isInside(h, rustup))) roots.add(rustup);
  }
  for (const root of [...roots].sort()) {
    if (mounted.some((m) => isInside(root, m))) continue;
    args.push("--ro-bind", root, root);
    mounted.push(root);
    for (const name of TOOLCHAIN_CREDENTIALS) {
      const file = path.join(root, name);
      if (await lstat(file).catch(() => undefined)) args.push("--ro-bind", "/dev/null", file);
    }
  }
  for (const h of hidden) {
    if (mounted.some((m) => isInside(h, m))) args.push("--tmpfs", h);
  }
  return args;
}

export function hiddenPaths(): string[] {
  return [SERVICE_ROOT, ...sandboxSettings().hiddenPaths.map((p) => path.resolve(p))];
}

/*
 * Cached while what it depends on stays the same (the hidden paths, PATH, HOME, RUSTUP_HOME):
 * the layout walks PATH and stats every toolchain folder, a few milliseconds that every
 * command would otherwise pay again.
 */
export function layoutArgs(): Promise<string[]> {
  const hidden = hiddenPaths();
  const key = JSON.stringify([hidden, process.env.PATH, os.homedir(), rustupHome()]);
  if (layout?.key !== key) layout = { key, args: hostLayout(hidden) };
  return layout.args;
}

/*
 * The sandbox's user: the service's own uid, or 1000 when the service runs as root (a
 * non-root uid inside keeps the kernel from handing capabilities back on exec). Files the
 * command writes still belong to the service's user on the host.
 */
export function sandboxIds(): { uid: number; gid: number } {
  const uid = process.getuid?.() ?? 1000;
  const gid = process.getgid?.() ?? 1000;
  return uid === 0 ? { uid: 1000, gid: 1000 } : { uid, gid };
}
