/*
 * The overlay mounts of a run (MOUNT_SCRIPT): the working copy, caches and the service's
 * node_modules mounted without their host paths showing in mountinfo (run.ts).
 */
import { randomBytes } from "node:crypto";
import { existsSync, writeFileSync } from "node:fs";
import { chmod, mkdir, mkdtemp, readFile, rm, stat, symlink } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { findExecutable } from "../util/executables.js";
import { execFileAsync } from "../util/launcher.js";
import { overlayPlace } from "../workcopy/volume.js";
import { OVERLAY_SCRATCH_PREFIX, removeTree } from "./cache.js";
import { SERVICE_ROOT } from "./settings.js";

/*
 * Keeping the working copy's host path out of /proc/self/mountinfo. A bind mount shows its
 * source folder's path (DATA_DIR/work/<task>) there, whatever the mount point is called. An
 * overlay mount shows the option strings it was given instead, so the working copy (and the
 * package cache) is mounted, before bwrap starts, as an overlay whose upper layer is the folder
 * itself and whose lower layer is empty: every read and write goes straight to the folder,
 * nothing is copied. It is mounted in a user and mount namespace of the run's own (util-linux
 * `unshare`, the service's uid as root there, as for the public network), from inside the
 * run folder with relative names, so mountinfo shows `lowerdir=ws.l,upperdir=ws.u,...`.
 * The overlay's scratch folders (an empty lower layer and its work folder) sit beside the
 * folder on the same filesystem, as `.foreman-overlay-<random>`, removed with the run.
 *
 * The service's own node_modules (SERVICE_MODULES_MOUNT) is a read-only overlay of the same
 * kind (the folder and an empty one as its two lower layers, mountinfo shows `mods.l:mods.e`),
 * so the service's checkout path does not show either.
 *
 * All of a run's overlays are mounted by one `mount -a` over an fstab of the run folder (one
 * process: each `mount` costs a few milliseconds of start-up, and a run has three to five).
 * Each mount point holds a marker folder until something is mounted over it; when `mount -a`
 * reports a failure, the names whose marker still shows are mounted one by one as before.
 * The same shell then opens bwrap's options file (see bwrapFromFile) and execs bwrap, so the
 * options need no shell of their own.
 *
 * Writable overlays are `volatile`: without it, taking an overlay down (when the run's last
 * process exits) syncs the whole filesystem of its upper folder, every task's dirty data on
 * it, once per overlay and command (about 15-25 ms a command on a busy host, more under heavy
 * writes). Writes still land in the folder itself as they did and reach the disk with the
 * kernel's normal writeback; only the command's own fsync calls no longer force them there
 * (what a command writes is rebuilt by running it again; the service's own git runs outside).
 * A volatile overlay leaves mode-000 folders in its work folder: openLeftovers makes them
 * removable before the run folder and the scratch folders go.
 *
 * Unprivileged overlay mounts need Linux 5.11+; where the start-up probe finds none, or one
 * mount fails, the folder is bind-mounted as before (at /workspace all the same; only
 * mountinfo then shows its host path). checkSandbox reports which: `<name>.mode` says `bind`
 * for a folder bound, and is absent for an overlay.
 */
/** The fstab of a run's overlays, in the run folder (see MOUNT_SCRIPT). */
const FSTAB = "overlays.fstab";
/** A folder in each overlay's mount point, hidden once the overlay is mounted over it. */
const UNMOUNTED = ".foreman-unmounted";

const MOUNT_SCRIPT = `d=$1; mount=$2; args=$3; shift 3
cd "$d" || exit 125
"$mount" -a -T ./${FSTAB} 2>/dev/null && all=1 || all=
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do
  n=$1; shift
  [ -z "$all" ] && [ -e "$n/${UNMOUNTED}" ] || continue
  o="lowerdir=$n.l,upperdir=$n.u,workdir=$n.w,userxattr,volatile"; b="$n.u"
  # No upper folder: a read-only overlay (two lower layers, the second one empty).
  [ -e "$n.u" ] || { o="lowerdir=$n.l:$n.e"; b="$n.l"; }
  if "$mount" -t overlay overlay -o "$o,uuid=off" "$n" 2>/dev/null || "$mount" -t overlay overlay -o "$o" "$n" 2>/dev/null; then
    :
  elif "$mount" --bind "$b" "$n"; then
    echo bind >"$n.mode"
  else
    echo "foreman-sandbox: could not mount the working copy" >&2; exit 125
  fi
done
shift
if [ -n "$args" ]; then exec 3<"$args" || exit 125; fi
unset PWD OLDPWD
exec "$@"
`;

/**
 * The argv that mounts `overlays` (names of mount points in `run`, prepared by prepareOverlay,
 * layerOver or prepareReadOnlyOverlay) and then runs `command` with bwrap's options file
 * `args` open as descriptor 3 (none: ""). Writes the run's fstab: relative names only, the
 * script runs in `run`.
 */
export async function mountArgv(
  run: string,
  tools: OverlayTools,
  overlays: string[],
  args: string,
  command: string[],
): Promise<string[]> {
  const lines = overlays.map((n) => {
    const options = existsSync(path.join(run, `${n}.u`))
      ? `lowerdir=${n}.l,upperdir=${n}.u,workdir=${n}.w,userxattr,volatile`
      : `lowerdir=${n}.l:${n}.e`;
    return `overlay ${n} overlay ${options},uuid=off 0 0\n`;
  });
  // Synchronous, as bwrap's options file: a few hundred bytes in the run folder, where the
  // thread pool's open, write and close would be three round trips before every command.
  writeFileSync(path.join(run, FSTAB), lines.join(""), { mode: 0o600 });
  return [
    "/bin/sh",
    "-c",
    MOUNT_SCRIPT,
    "sh",
    run,
    tools.mount,
    args,
    ...overlays,
    "--",
    ...command,
  ];
}

export interface OverlayTools {
  unshare: string;
  mount: string;
}

let overlayProbe: { key: string; result: Promise<OverlayTools | undefined> } | undefined;

/** The tools of the overlay mounts, when this machine can make them; undefined otherwise. */
export function overlayTools(): Promise<OverlayTools | undefined> {
  const key = process.env.PATH ?? "";
  if (overlayProbe?.key !== key) overlayProbe = { key, result: probeOverlay() };
  return overlayProbe.result;
}

async function probeOverlay(): Promise<OverlayTools | undefined> {
  const sbin = ["/usr/bin", "/bin", "/usr/sbin", "/sbin"];
  const unshare = await findExecutable("unshare", sbin);
  const mount = await findExecutable("mount", sbin);
  if (!unshare || !mount) return undefined;
  const probe = await mkdtemp(path.join(os.tmpdir(), "foreman-overlay-probe-"));
  try {
    const upper = path.join(probe, "upper");
    const run = path.join(probe, "run");
    await mkdir(upper);
    await mkdir(run);
    const overlay = await prepareOverlay(run, "ws", upper);
    if (!overlay) return undefined;
    const tools = { unshare, mount };
    await execFileAsync(
      unshare,
      [
        "--user",
        "--map-root-user",
        "--mount",
        "--",
        ...(await mountArgv(run, tools, ["ws"], "", ["/bin/true"])),
      ],
      { timeout: 15_000, env: { PATH: process.env.PATH ?? "/usr/bin:/bin" } },
    );
    // No mode file: mounted as an overlay (MOUNT_SCRIPT writes `bind` for a fallback).
    const mode = await readFile(path.join(run, "ws.mode"), "utf8").catch(() => "overlay");
    return mode.trim() === "overlay" ? tools : undefined;
  } catch {
    return undefined;
  } finally {
    await removeTree(probe);
  }
}

/** Folders of an overlay's work folder that the kernel makes mode 000, parents first. */
const WORK_LEFTOVERS = ["work", "work/work", "work/work/incompat", "work/work/incompat/volatile"];

/**
 * Makes what an overlay left in the scratch folder `folder` (its work folder, see
 * prepareOverlay and layerOver) removable by the service's user: as root in its namespace the
 * kernel made them mode 000, which a non-root service cannot read to remove.
 */
async function openLeftovers(folder: string): Promise<void> {
  // Root removes them as they are.
  if (process.getuid?.() === 0) return;
  for (const dir of WORK_LEFTOVERS)
    await chmod(path.join(folder, dir), 0o700).catch(() => undefined);
}

/** Removes a run folder and its overlays' scratch folders (some of them inside it). */
export async function removeRunFolders(run: string, scratch: string[]): Promise<void> {
  await Promise.all(scratch.map(openLeftovers));
  await rm(run, { recursive: true, force: true }).catch(() => undefined);
  await Promise.all(scratch.map((folder) => removeTree(folder).catch(() => undefined)));
}

/** An overlay's mount point `name` in `run`, with MOUNT_SCRIPT's marker (a folder) in it. */
async function mountPoint(run: string, name: string): Promise<void> {
  await mkdir(path.join(run, name, UNMOUNTED), { recursive: true });
}

/**
 * The run folder's side of one overlay mount `name`: its mount point, and links to the
 * upper folder and to scratch folders beside it. Returns the scratch folder (to remove after
 * the run), or undefined when there is no room for one (the folder is then bind-mounted).
 */
export async function prepareOverlay(
  run: string,
  name: string,
  upper: string,
): Promise<string | undefined> {
  const place = overlayPlace(upper);
  const scratch = path.join(
    place.scratchParent,
    `${OVERLAY_SCRATCH_PREFIX}${randomBytes(6).toString("hex")}`,
  );
  try {
    await mkdir(scratch, { mode: 0o700 });
    await Promise.all([
      mkdir(path.join(scratch, "lower"), { mode: 0o700 }),
      mkdir(path.join(scratch, "work"), { mode: 0o700 }),
    ]);
  } catch {
    await removeTree(scratch);
    return undefined;
  }
  await Promise.all([
    mountPoint(run, name),
    symlink(place.upper, path.join(run, `${name}.u`)),
    symlink(path.join(scratch, "lower"), path.join(run, `${name}.l`)),
    symlink(path.join(scratch, "work"), path.join(run, `${name}.w`)),
  ]);
  return scratch;
}

/**
 * A read-only folder (a package cache entry, sandbox/cache.ts) made writable for one run
 * without changing it: an overlay with the folder as its lower layer and a scratch folder
 * beside it as the upper one (mounted by MOUNT_SCRIPT as `cache`), or, where this machine
 * has no unprivileged overlays, a copy in that scratch folder. Returns what to mount, the
 * scratch folder (removed after the run) and where the run's writes land.
 */
export async function layerOver(
  run: string,
  lower: string,
  tools: OverlayTools | undefined,
): Promise<{ source: string; overlay: boolean; scratch: string; writes: string }> {
  const scratch = path.join(
    path.dirname(lower),
    `${OVERLAY_SCRATCH_PREFIX}${randomBytes(6).toString("hex")}`,
  );
  const upper = path.join(scratch, "upper");
  await mkdir(upper, { recursive: true, mode: 0o700 });
  if (tools) {
    await Promise.all([
      mkdir(path.join(scratch, "work"), { mode: 0o700 }),
      mountPoint(run, "cache"),
      symlink(upper, path.join(run, "cache.u")),
      symlink(lower, path.join(run, "cache.l")),
      symlink(path.join(scratch, "work"), path.join(run, "cache.w")),
    ]);
    return { source: path.join(run, "cache"), overlay: true, scratch, writes: upper };
  }
  await execFileAsync("cp", ["-a", "--reflink=auto", "--", `${lower}/.`, upper]);
  return { source: upper, overlay: false, scratch, writes: upper };
}

/**
 * The run folder's side of a read-only overlay `name` over the host folder `lower` (see
 * MOUNT_SCRIPT: no `.u`, so `lowerdir=name.l:name.e`): nothing is written, nothing to remove
 * but the run folder. Answers the mount point, which bwrap binds.
 */
async function prepareReadOnlyOverlay(run: string, name: string, lower: string): Promise<string> {
  await Promise.all([
    mountPoint(run, name),
    mkdir(path.join(run, `${name}.e`)),
    symlink(lower, path.join(run, `${name}.l`)),
  ]);
  return path.join(run, name);
}

/**
 * The service's node_modules for a run's overlays (appended to `overlays`): its read-only
 * overlay's mount point, or undefined (bound as it is) without overlay tools or the folder.
 */
export async function modulesOverlay(
  run: string,
  tools: OverlayTools | undefined,
  overlays: string[],
): Promise<string | undefined> {
  const modules = path.join(SERVICE_ROOT, "node_modules");
  if (!tools || !(await stat(modules).catch(() => undefined))) return undefined;
  overlays.push("mods");
  return prepareReadOnlyOverlay(run, "mods", modules);
}
