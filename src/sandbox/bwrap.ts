/*
 * bwrap's arguments and the argv of a sandboxed run: mounts, limits, network (run.ts).
 */
import { writeFileSync } from "node:fs";
import { lstat, mkdir, stat } from "node:fs/promises";
import path from "node:path";
import { onVolume } from "../workcopy/volume.js";
import { buildCacheMounts } from "./cache.js";
import { layoutArgs, sandboxIds } from "./layout.js";
import { limitArgs, shmLimitMb } from "./limits.js";
import { proxyNetwork, publicNetwork } from "./network.js";
import {
  layerOver,
  modulesOverlay,
  mountArgv,
  type OverlayTools,
  overlayTools,
  prepareOverlay,
} from "./overlays.js";
import {
  BUILD_CACHE_MOUNT,
  CACHE_MOUNT,
  MIB,
  type SandboxOptions,
  sandboxSettings,
  SERVICE_MODULES_MOUNT,
  SERVICE_ROOT,
  WORKSPACE,
} from "./settings.js";

/** What bwrap mounts for one run, as paths where bwrap runs (see runSandboxed). */
interface RunMounts {
  /** The working copy to mount: the overlay's mount point, or the host folder. */
  workspace: string;
  /**
   * The working copy's folder on the host, to look at before bwrap starts (the overlay's
   * mount point is still an empty folder then).
   */
  hostWorkspace: string;
  /** Where the command sees it: WORKSPACE, or (benchmark only) the host path. */
  workspaceAt: string;
  /** The run's private /tmp (HOME is /tmp/home). */
  tmp: string;
  /** The package cache, mounted at CACHE_MOUNT. */
  cache?: { source: string; readOnly: boolean } | undefined;
  /** The build caches (writable), mounted at BUILD_CACHE_MOUNT. */
  build?: string | undefined;
  /** The service's node_modules as mounted (a read-only overlay's mount point), if prepared. */
  modules?: string | undefined;
  diskLimitMb: number;
}

/**
 * bwrap and its arguments, up to the `--` before the command. `network`: options of the
 * public network (sandbox/network.ts), mounted last.
 */
export async function bwrapArgs(mounts: RunMounts, network: string[] = []): Promise<string[]> {
  const { uid, gid } = sandboxIds();
  const shmMb = shmLimitMb(mounts.diskLimitMb);
  const args = [
    "bwrap",
    "--unshare-all",
    "--unshare-user",
    "--uid",
    String(uid),
    "--gid",
    String(gid),
    "--disable-userns",
    "--cap-drop",
    "ALL",
    "--die-with-parent",
    "--new-session",
    "--hostname",
    "sandbox",
    ...(await layoutArgs()),
    "--proc",
    "/proc",
    "--dev",
    "/dev",
    // A size-capped tmpfs: /dev/shm is memory, and otherwise half of it.
    "--size",
    String(shmMb * MIB),
    "--tmpfs",
    "/dev/shm",
    "--bind",
    mounts.tmp,
    "/tmp",
  ];
  if (mounts.cache)
    args.push(mounts.cache.readOnly ? "--ro-bind" : "--bind", mounts.cache.source, CACHE_MOUNT);
  if (mounts.build) args.push("--bind", mounts.build, BUILD_CACHE_MOUNT);
  args.push("--bind", mounts.workspace, mounts.workspaceAt);
  // The service's own node_modules, read-only at a fixed path: a health scan runs the
  // service's c8 around a repository's tests (src/health/coverage.ts, sandboxPath). Third-party
  // packages only; the rest of the checkout (configuration, .env, data) stays out of sight.
  const modules = path.join(SERVICE_ROOT, "node_modules");
  if (mounts.modules) args.push("--ro-bind", mounts.modules, SERVICE_MODULES_MOUNT);
  else if (await stat(modules).catch(() => undefined))
    args.push("--ro-bind", modules, SERVICE_MODULES_MOUNT);
  for (const extra of sandboxSettings().readOnlyPaths) args.push("--ro-bind", extra, extra);
  // Read-only over itself: hooks, config (fsmonitor, filters, aliases), info/attributes the
  // service's own git reads later can't be written from inside. A `.git` file (a worktree
  // pointer) is pinned the same way; the folder it points to is not mounted at all.
  if (await lstat(path.join(mounts.hostWorkspace, ".git")).catch(() => undefined))
    args.push(
      "--ro-bind",
      path.join(mounts.workspace, ".git"),
      path.join(mounts.workspaceAt, ".git"),
    );
  // Kept build outputs where their tools look (cargo's target/, jest's cache; cache.ts).
  if (mounts.build)
    args.push(
      ...(await buildCacheMounts(mounts.build, mounts.hostWorkspace, mounts.workspaceAt, uid)),
    );
  args.push(...network);
  // bwrap's root is a tmpfs holding the mount points; read-only, so a write "outside" fails
  // loudly instead of landing somewhere that vanishes with the run. /dev too (its device
  // nodes still work): only /dev/shm, capped above, takes files.
  args.push("--remount-ro", "/dev", "--remount-ro", "/", "--chdir", mounts.workspaceAt, "--");
  return args;
}

/**
 * The argv of a sandboxed run: bwrap with the limits and the command, inside the overlay
 * mounts' namespace when there are any, inside the public network's launcher when asked.
 */
export async function sandboxArgv(parts: {
  run: string;
  bwrap: string[];
  command: string[];
  overlays: string[];
  tools: OverlayTools | undefined;
  net: Awaited<ReturnType<typeof publicNetwork>> | undefined;
  diskLimitMb: number;
}): Promise<string[]> {
  const { file, argv: bwrap } = await bwrapFromFile(parts.run, parts.bwrap);
  const inner = [...bwrap, ...limitArgs(parts.diskLimitMb), ...parts.command];
  const tools = parts.tools;
  const mounted = tools && parts.overlays.length > 0;
  // The mount script opens the options file itself; without overlays a shell of its own does.
  const argv = mounted
    ? await mountArgv(parts.run, tools, parts.overlays, file, inner)
    : ["/bin/sh", "-c", BWRAP_SHIM, "sh", file, ...inner];
  // The network's launcher has a user and mount namespace of its own already.
  if (parts.net) return parts.net.wrap(argv);
  if (mounted) return [tools.unshare, "--user", "--map-root-user", "--mount", "--", ...argv];
  return argv;
}

/*
 * bwrap stays in the sandbox as its PID 1 (the reaper of the command's processes), and the
 * command can read that process's /proc/1/cmdline and /proc/1/environ: bwrap's own arguments
 * (every bind's host source) and the environment it was started with. So bwrap reads its
 * options from a file of the run folder (`--args 3`, a descriptor it closes before the command
 * starts), and the last shell before it (MOUNT_SCRIPT, or this one without overlays) drops
 * PWD and OLDPWD (the launchers' host folders) before it execs bwrap; the rest of that
 * environment is buildEnv's, the command's own.
 */
const BWRAP_SHIM = 'exec 3<"$1" || exit 125; shift; unset PWD OLDPWD; exec "$@"';

/**
 * `bwrap … --` as bwrap reading its options from a file in `run` (descriptor 3, opened by
 * the shell that execs it: see BWRAP_SHIM): the file, and the argv up to the `--`.
 */
async function bwrapFromFile(
  run: string,
  bwrap: string[],
): Promise<{ file: string; argv: string[] }> {
  const [binary, ...options] = bwrap;
  const end = options.lastIndexOf("--");
  const file = path.join(run, "bwrap.args");
  writeFileSync(
    file,
    options
      .slice(0, end)
      .map((o) => `${o}\0`)
      .join(""),
    { mode: 0o600 },
  );
  return { file, argv: [binary!, "--args", "3", "--"] };
}

/**
 * The command line of a run in bwrap: the working copy, caches, /tmp and node_modules mounted
 * (through overlays of the run's own where the host allows: MOUNT_SCRIPT), the network, and
 * the limits. Scratch folders it makes are added to `parts.scratch` (removed with the run).
 */
export async function boxedCommand(
  run: string,
  cwd: string,
  options: SandboxOptions,
  parts: {
    cacheDir: string;
    buildDir: string | undefined;
    diskLimitMb: number;
    scratch: string[];
    argv: string[];
  },
): Promise<{ argv: string[]; cacheWrites: string | undefined }> {
  const { cacheDir, buildDir, diskLimitMb, scratch } = parts;
  const cacheReadOnly = options.cache?.readOnly === true;
  const tmp = path.join(run, "tmp");
  await mkdir(path.join(tmp, "home"), { recursive: true });
  let cacheWrites: string | undefined;
  const mode = options.mount ?? "workspace";
  const tools = mode === "workspace" ? await overlayTools() : undefined;
  const overlays: string[] = [];
  // Through an overlay of the run's own (see MOUNT_SCRIPT), or bound as it is.
  const mountSource = async (name: string, folder: string): Promise<string> => {
    // A working copy on a volume is neutral bound as it is (workcopy/volume.ts).
    if (!tools || (name === "ws" && onVolume(folder))) return folder;
    const made = await prepareOverlay(run, name, folder);
    if (!made) return folder;
    scratch.push(made);
    overlays.push(name);
    return path.join(run, name);
  };
  // The run's own /tmp and empty cache live in the run folder, whose host path (in the
  // OS temp folder) is kept out of mountinfo the same way.
  // A read-only cache is the lower layer of an overlay whose upper layer is the run's
  // own: the command may write (npm needs to), nothing it writes reaches the cache.
  const layerCache = async (): Promise<string> => {
    const layered = await layerOver(run, cacheDir, tools);
    scratch.push(layered.scratch);
    cacheWrites = layered.writes;
    if (layered.overlay) overlays.push("cache");
    return layered.source;
  };
  // Each mount is prepared beside the others (a few file operations each, on the thread
  // pool): one after another they were a dozen round trips before every command.
  const [workspace, cacheSource, tmpSource, buildSource, modules, net] = await Promise.all([
    mountSource("ws", cwd),
    options.cache && cacheReadOnly ? layerCache() : mountSource("cache", cacheDir),
    mountSource("t", tmp),
    buildDir && mountSource("build", buildDir),
    modulesOverlay(run, tools, overlays),
    options.proxy
      ? proxyNetwork(run, options.proxy.port)
      : sandboxSettings().network === "public"
        ? publicNetwork(run)
        : undefined,
  ]);
  const bwrap = await bwrapArgs(
    {
      workspace,
      hostWorkspace: cwd,
      workspaceAt: mode === "host" ? cwd : WORKSPACE,
      tmp: tmpSource,
      cache: { source: cacheSource, readOnly: false },
      build: buildSource,
      modules,
      diskLimitMb,
    },
    net?.bwrapOptions,
  );
  const argv = await sandboxArgv({
    run,
    bwrap,
    command: parts.argv,
    overlays,
    tools,
    net,
    diskLimitMb,
  });
  return { argv, cacheWrites };
}
