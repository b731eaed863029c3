/*
 * TASK_DISK_VOLUMES: the kernel's enforcement of TASK_DISK_LIMIT_MB for a working copy.
 *
 * Where the host allows it (the service runs as root, loop devices exist, `mkfs.ext4` and
 * `mount` are installed), each task's (and health scan's) working copy lives on a file
 * system of its own, exactly as large as the budget: a sparse image file formatted ext4
 * (no journal: a working copy is rebuilt from its clone and saved diff after a crash, never
 * repaired) and loop-mounted. A command that writes past it gets ENOSPC from the kernel, at
 * the byte, whatever the watcher (sandbox/disk.ts) has measured so far; the watcher
 * still covers the run's temporary files and package cache and names the limit.
 *
 * Layout, for a working copy `W`:
 *   W.vol/disk.img   the image (sparse: it takes on the host only what is written)
 *   W.vol/mnt        its mount point
 *   W.vol/mnt/wc     the working copy, bind-mounted at W
 * The working copy is a folder of the volume, not its root, so the overlay of a sandboxed run
 * (sandbox/overlays.ts) finds its scratch folders on the same file system (W.vol/mnt) without
 * anything appearing in the working copy, and ext4's `lost+found` stays out of sight.
 *
 * Mounts outlive the process (a restarted worker finds its working copies where it left
 * them); removeWorkdir is the one way a working copy goes, and unmounts first. Where
 * volumes are off or unavailable, a working copy is a plain folder and the watcher alone
 * keeps the budget; `volumeSupport()` says which runs, for the start-up log.
 */
import { execFileAsync } from "../util/launcher.js";
import { existsSync } from "node:fs";
import {
  mkdir,
  open,
  readdir,
  readFile,
  rename,
  rm,
  rmdir,
  statfs,
  writeFile,
} from "node:fs/promises";
import path from "node:path";
import { findExecutable } from "../util/executables.js";

const MIB = 1024 * 1024;
/** ext4 needs a little room of its own; below this a volume is not made. */
const MIN_VOLUME_MB = 16;

export type VolumeMode = "auto" | "off";

let mode: VolumeMode = "auto";
let support: Promise<VolumeSupport> | undefined;

export interface VolumeSupport {
  available: boolean;
  /** Why not, in words an operator can act on. */
  reason?: string;
  tools?: { mkfs: string; mount: string; umount: string };
}

/** Sets TASK_DISK_VOLUMES for every later working copy (service start; tests). */
export function configureWorkdirVolumes(next: VolumeMode): void {
  mode = next;
}

/** Whether working copies get a volume here, and why not (probed once per process). */
export function volumeSupport(): Promise<VolumeSupport> {
  if (mode === "off") return Promise.resolve({ available: false, reason: "TASK_DISK_VOLUMES=off" });
  support ??= probe();
  return support;
}

async function probe(): Promise<VolumeSupport> {
  if (process.platform !== "linux")
    return { available: false, reason: "loop-mounted volumes are Linux only" };
  if (process.getuid?.() !== 0)
    return {
      available: false,
      reason: "the service does not run as root (mounting a loop device needs it)",
    };
  if (!existsSync("/dev/loop-control"))
    return {
      available: false,
      reason: "no /dev/loop-control (in a container: add the loop devices, e.g. --device)",
    };
  const extra = ["/usr/sbin", "/sbin", "/usr/bin", "/bin"];
  const [mkfs, mount, umount] = await Promise.all([
    findExecutable("mkfs.ext4", extra),
    findExecutable("mount", extra),
    findExecutable("umount", extra),
  ]);
  if (!mkfs || !mount || !umount)
    return {
      available: false,
      reason: "mkfs.ext4 or mount is missing (apt-get install e2fsprogs mount)",
    };
  return { available: true, tools: { mkfs, mount, umount } };
}

const volumeOf = (workdir: string) => `${workdir}.vol`;
const mountPointOf = (workdir: string) => path.join(volumeOf(workdir), "mnt");

/**
 * Makes an empty folder for a working copy at `workdir`, on a volume of `limitMb` when
 * volumes are available (anything there before is removed first). Answers how the budget
 * is kept for it: "volume" (the kernel) or "folder" (the watcher alone). A volume that
 * cannot be made falls back to a folder; `onFallback` hears why.
 */
export async function prepareWorkdir(
  workdir: string,
  limitMb: number,
  onFallback?: (reason: string) => void,
): Promise<"volume" | "folder"> {
  await removeWorkdir(workdir);
  await mkdir(path.dirname(workdir), { recursive: true });
  const found = limitMb >= MIN_VOLUME_MB ? await volumeSupport() : { available: false };
  if (found.available && found.tools) {
    try {
      await makeVolume(workdir, limitMb, found.tools);
      return "volume";
    } catch (error) {
      await removeWorkdir(workdir).catch(() => undefined);
      onFallback?.(error instanceof Error ? error.message : String(error));
    }
  }
  await mkdir(workdir, { recursive: true });
  return "folder";
}

async function makeVolume(
  workdir: string,
  limitMb: number,
  tools: NonNullable<VolumeSupport["tools"]>,
): Promise<void> {
  const volume = volumeOf(workdir);
  const image = path.join(volume, "disk.img");
  const mnt = mountPointOf(workdir);
  await mkdir(mnt, { recursive: true, mode: 0o700 });
  const file = await open(image, "w", 0o600);
  try {
    await file.truncate(limitMb * MIB);
  } finally {
    await file.close();
  }
  const run = (cmd: string, args: string[]) =>
    execFileAsync(cmd, args, { timeout: 60_000, env: { PATH: "/usr/sbin:/usr/bin:/sbin:/bin" } });
  // No reserved blocks (the whole budget is the task's), no journal (see above), inode
  // tables initialised lazily by the kernel: formatting takes milliseconds whatever the size.
  await run(tools.mkfs, [
    "-q",
    "-F",
    "-m",
    "0",
    "-O",
    "^has_journal",
    "-E",
    "lazy_itable_init=1,nodiscard",
    image,
  ]);
  await run(tools.mount, ["-o", "loop,nosuid,nodev,noatime", image, mnt]);
  await mkdir(path.join(mnt, "wc"), { mode: 0o755 });
  await rmdir(path.join(mnt, "lost+found")).catch(() => undefined);
  await mkdir(workdir, { recursive: true });
  await run(tools.mount, ["--bind", path.join(mnt, "wc"), workdir]);
}

/** True when `dir` is a mount point (its line in /proc/self/mountinfo). */
async function isMountPoint(dir: string): Promise<boolean> {
  const info = await readFile("/proc/self/mountinfo", "utf8").catch(() => "");
  const escaped = dir.replace(
    /[ \t\n\\]/g,
    (c) => `\\${c.charCodeAt(0).toString(8).padStart(3, "0")}`,
  );
  return info.split("\n").some((line) => line.split(" ")[4] === escaped);
}

/** Mounts stacked on one folder that an unmount takes off, at most (then it gives up). */
const MAX_STACKED_MOUNTS = 8;

/** Unmounts everything mounted at `dir`, a mount stacked on another included. */
async function unmount(dir: string): Promise<void> {
  let umount: string | undefined;
  for (let n = 0; n < MAX_STACKED_MOUNTS && (await isMountPoint(dir)); n++) {
    umount ??= (await findExecutable("umount", ["/usr/bin", "/bin"])) ?? "umount";
    try {
      await execFileAsync(umount, [dir], { timeout: 60_000 });
    } catch {
      // Busy (a process of a stopped run still holds a file): detach it now, the kernel
      // frees it when the last user goes. The loop device is released with it (autoclear).
      await execFileAsync(umount, ["--lazy", dir], { timeout: 60_000 });
    }
  }
}

/**
 * Removes a working copy, its volume included: unmounts the bind and the volume, then
 * removes what is left. Safe on a folder that is not a volume, or that does not exist.
 *
 * The mounts are looked for whether or not the volume's folder is there: a removal racing the
 * making of the volume (a task cancelled during CLONING) can remove that folder between
 * makeVolume's mounts, which then binds the working copy onto an image already deleted. The
 * racing removal may fail or leave that behind; the next one (the stopped stage's
 * repairEnding, the task sweep) removes it.
 */
export async function removeWorkdir(workdir: string): Promise<void> {
  await rm(keptMarkerOf(workdir), { force: true });
  await rm(`${keptMarkerOf(workdir)}.tmp`, { force: true });
  await unmount(workdir);
  await unmount(mountPointOf(workdir));
  await rm(volumeOf(workdir), { recursive: true, force: true });
  await rm(workdir, { recursive: true, force: true });
  await rm(claimOf(workdir), { force: true });
}

/** The names of the working copies under `root` (a volume's folder counts as its working copy). */
export async function workdirNames(root: string): Promise<string[]> {
  const names = await readdir(root).catch(() => [] as string[]);
  return [
    ...new Set(names.map((name) => name.replace(/\.(vol|kept|kept\.tmp|claim)$/, ""))),
  ].filter((name) => !name.endsWith(".patch"));
}

/*
 * Kept working copies (pipeline/kept-workdirs.ts): a finished task's working copy left in place
 * for a follow-up of it. `W.kept` beside it says until when; whoever takes the copy (a
 * follow-up adopting it, the sweep removing it) first renames that marker to `T.claim` of its
 * own working copy `T`, which only one of them can do: the rename is the lock, across the
 * processes sharing DATA_DIR, with no database round trip.
 */
const keptMarkerOf = (workdir: string) => `${workdir}.kept`;
const claimOf = (workdir: string) => `${workdir}.claim`;

export interface KeptWorkdir {
  /** The working copy's folder. */
  workdir: string;
  /** When it stops being kept (ms since the epoch). */
  until: number;
}

/** Marks `workdir` as kept until `until` (ms since the epoch). */
export async function markKept(workdir: string, until: number): Promise<void> {
  const marker = keptMarkerOf(workdir);
  await writeFile(`${marker}.tmp`, JSON.stringify({ until: new Date(until).toISOString() }));
  await rename(`${marker}.tmp`, marker);
}

/** The kept working copies under `root`; a marker that cannot be read counts as expired. */
export async function keptWorkdirs(root: string): Promise<KeptWorkdir[]> {
  const names = await readdir(root).catch(() => [] as string[]);
  const kept: KeptWorkdir[] = [];
  for (const name of names) {
    if (!name.endsWith(".kept")) continue;
    const workdir = path.join(root, name.slice(0, -".kept".length));
    const text = await readFile(path.join(root, name), "utf8").catch(() => "");
    let until = 0;
    try {
      until = Date.parse(String((JSON.parse(text) as { until?: unknown }).until)) || 0;
    } catch {
      until = 0;
    }
    kept.push({ workdir, until });
  }
  return kept;
}

/** True when `workdir` is kept (its marker is there), whether or not it has expired. */
export function isKept(workdir: string): boolean {
  return existsSync(keptMarkerOf(workdir));
}

/**
 * Takes the kept working copy `from` for `claimant` (its marker renamed to claimant's
 * claim). False when it is not kept or someone else took it first.
 */
async function claimKept(from: string, claimant: string): Promise<boolean> {
  try {
    await rename(keptMarkerOf(from), claimOf(claimant));
    return true;
  } catch {
    return false;
  }
}

/** Removes a kept working copy unless another process takes it first. */
export async function removeKept(workdir: string): Promise<void> {
  if (await claimKept(workdir, workdir)) await removeWorkdir(workdir);
}

/**
 * Moves the kept working copy `from` to `to` (which is removed first), volume and all: the
 * volume's folder is renamed (its loop mount inside goes along) and the bind mount moved from
 * `from` to `to` (or, where mounts cannot move, taken off and made again). False, with nothing
 * taken, when `from` is not kept or was taken first; when the move itself fails both are
 * removed and it throws.
 */
export async function adoptWorkdir(from: string, to: string): Promise<boolean> {
  await removeWorkdir(to);
  if (!(await claimKept(from, to))) return false;
  try {
    if (existsSync(path.join(mountPointOf(from), "wc"))) {
      const found = await volumeSupport();
      if (!found.tools)
        throw new Error("the kept working copy is on a volume, and volumes are off");
      const tools = found.tools;
      const mount = (args: string[]) =>
        execFileAsync(tools.mount, args, {
          timeout: 60_000,
          env: { PATH: "/usr/sbin:/usr/bin:/sbin:/bin" },
        });
      // The volume's folder first: its loop mount goes along, the bind at `from` still holds.
      await rename(volumeOf(from), volumeOf(to));
      await mkdir(to, { recursive: true });
      try {
        // One call where the mount tree allows it (not under a shared mount)…
        await mount(["--move", from, to]);
      } catch {
        // …else the bind is taken off `from` and made again at `to`.
        await unmount(from);
        await mount(["--bind", path.join(mountPointOf(to), "wc"), to]);
      }
      await rm(from, { recursive: true, force: true });
    } else {
      await rename(from, to);
    }
    await rm(claimOf(to), { force: true });
    return true;
  } catch (error) {
    await removeWorkdir(from).catch(() => undefined);
    await removeWorkdir(to).catch(() => undefined);
    throw error;
  }
}

/**
 * True when `workdir` is a working copy on a volume. Its bind mount shows inside a sandbox
 * as the volume's own folder (`/wc` of a loop device), no host path: it needs no overlay to
 * be neutral at /workspace.
 */
export function onVolume(workdir: string): boolean {
  return existsSync(path.join(mountPointOf(workdir), "wc"));
}

/**
 * Where a sandboxed run's overlay over `upper` takes its upper folder and puts its scratch
 * folders: on the same mount (overlayfs needs it: the same file system is not enough, a bind
 * mount is another mount) and outside the working copy. For a working copy on a volume, its
 * folder on the volume's own mount and the volume's root; otherwise `upper` itself and the
 * folder beside it.
 */
export function overlayPlace(upper: string): { upper: string; scratchParent: string } {
  const mnt = mountPointOf(upper);
  const onVolume = path.join(mnt, "wc");
  return existsSync(onVolume)
    ? { upper: onVolume, scratchParent: mnt }
    : { upper, scratchParent: path.dirname(upper) };
}

/**
 * True when `workdir` is on a volume that is full (less than 1% or 1 MiB left): a command
 * that failed then failed because it hit TASK_DISK_LIMIT_MB.
 */
export async function volumeFull(workdir: string): Promise<boolean> {
  if (!existsSync(path.join(mountPointOf(workdir), "wc"))) return false;
  try {
    const fs = await statfs(workdir);
    const free = fs.bavail * fs.bsize;
    return free < Math.max(MIB, fs.blocks * fs.bsize * 0.01);
  } catch {
    return false;
  }
}

/*
 * Releasing DATA_DIR's mounts (pipeline/workdir-mounts.ts, cli/data-release.ts): a graceful
 * stop takes off every mount but the kept copies', the next start takes back what is still
 * wanted and removes the rest, and an operator can take everything off before moving or
 * removing DATA_DIR.
 */

/** mountinfo's octal escapes (`\040` for a space) decoded. */
function decodeMountPath(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_, octal: string) =>
    String.fromCharCode(parseInt(octal, 8)),
  );
}

/** The mount points at or under `root` in this process's namespace, deepest first. */
export async function mountsUnder(root: string): Promise<string[]> {
  const base = path.resolve(root);
  const info = await readFile("/proc/self/mountinfo", "utf8").catch(() => "");
  const found = new Set<string>();
  for (const line of info.split("\n")) {
    const target = line.split(" ")[4];
    if (!target) continue;
    const dir = decodeMountPath(target);
    if (dir === base || dir.startsWith(`${base}/`)) found.add(dir);
  }
  return [...found].sort((a, b) => b.length - a.length);
}

/** The working copy a mount point under DATA_DIR belongs to (its bind, or its volume's). */
export function workdirOfMount(mountPoint: string): string {
  const volumeMount = /^(.*)\.vol\/mnt$/.exec(mountPoint);
  return volumeMount ? volumeMount[1]! : mountPoint;
}

/** Takes every mount at `dir` off (lazily when busy: the kernel frees it when its users go). */
export async function releaseMount(dir: string): Promise<void> {
  await unmount(dir);
}

/** True when `workdir` has a volume image whose mounts are not in place (a stop took them off). */
export async function unmountedVolume(workdir: string): Promise<boolean> {
  if (!existsSync(path.join(volumeOf(workdir), "disk.img"))) return false;
  return !(await isMountPoint(workdir)) || !(await isMountPoint(mountPointOf(workdir)));
}

/**
 * Mounts a working copy's volume again where a stop (or a reboot) took it off: the image at
 * its mount point, its `wc` folder at the working copy. False when there is no image.
 */
export async function remountWorkdir(workdir: string): Promise<boolean> {
  const image = path.join(volumeOf(workdir), "disk.img");
  if (!existsSync(image)) return false;
  const found = await volumeSupport();
  if (!found.tools) return false;
  const tools = found.tools;
  const run = (args: string[]) =>
    execFileAsync(tools.mount, args, {
      timeout: 60_000,
      env: { PATH: "/usr/sbin:/usr/bin:/sbin:/bin" },
    });
  const mnt = mountPointOf(workdir);
  if (!(await isMountPoint(mnt))) await run(["-o", "loop,nosuid,nodev,noatime", image, mnt]);
  if (!existsSync(path.join(mnt, "wc"))) return false;
  await mkdir(workdir, { recursive: true });
  if (!(await isMountPoint(workdir))) await run(["--bind", path.join(mnt, "wc"), workdir]);
  return true;
}

/** The loop devices whose backing file is under `root` (a removed file included). */
async function loopDevicesUnder(losetup: string, root: string): Promise<string[]> {
  const base = path.resolve(root);
  try {
    const { stdout } = await execFileAsync(losetup, ["--json", "--list"], { timeout: 30_000 });
    const devices =
      (JSON.parse(stdout || "{}") as { loopdevices?: { name: string; "back-file"?: string }[] })
        .loopdevices ?? [];
    return devices
      .filter((device) => {
        const file = (device["back-file"] ?? "").replace(/ \(deleted\)$/, "");
        return file === base || file.startsWith(`${base}/`);
      })
      .map((device) => device.name);
  } catch {
    return [];
  }
}

/** How long detachLoopDevices waits for the kernel to let go of devices. */
const DETACH_WAIT_MS = 10_000;

/**
 * Detaches the loop devices whose backing file is under `root` (an image still attached with
 * nothing mounted, or one removed while attached) and waits until the kernel has let go of
 * them: a device whose last mount just went is freed asynchronously (autoclear). Answers the
 * devices still attached after that (empty: none left). None found without losetup.
 */
export async function detachLoopDevices(root: string): Promise<string[]> {
  const losetup = await findExecutable("losetup", ["/usr/sbin", "/sbin", "/usr/bin", "/bin"]);
  if (!losetup) return [];
  const deadline = Date.now() + DETACH_WAIT_MS;
  for (;;) {
    const left = await loopDevicesUnder(losetup, root);
    if (left.length === 0 || Date.now() > deadline) return left;
    for (const device of left)
      await execFileAsync(losetup, ["--detach", device], { timeout: 30_000 }).catch(
        // Still mounted somewhere (another namespace), or being freed: looked at again.
        () => undefined,
      );
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
