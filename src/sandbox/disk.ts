/*
 * TASK_DISK_LIMIT_MB: how much disk the files of one task (or health scan) may take while
 * its commands run: the working copy, the run's private /tmp and HOME, and its package cache
 * (sandbox/cache.ts), plus files its processes hold open after deleting them.
 *
 * No kernel enforcement is available to an unprivileged service for a folder on the host's
 * filesystem (project quotas and loop-mounted images need root; a tmpfs with `size=` is
 * memory, not disk), so a watcher measures while the command runs and stops the command's
 * process group past the limit:
 *
 * - `du -s -x -B1` (allocated blocks, hard links once, sparse files as what they use) over
 *   those folders, under `nice` while the command runs: when the command starts (unless an
 *   earlier run's walk of the same working copy is known), then whenever it may have
 *   mattered, and once more (not niced: the result waits for it) when the command has ended
 *   if it may matter, so what the last second wrote is still counted against the command
 *   that wrote it.
 * - Folders that held at most 64 MB at the last walk are walked every second (as the cost
 *   bound below allows) and after the command: milliseconds each.
 * - "Whenever it may have mattered", for larger ones: every second the watcher asks the
 *   filesystems of those folders how much they use (statfs, microseconds). The run cannot
 *   have grown by more than they did, so while their growth since the last walk is under
 *   half the room left, no walk is needed (but every 10 s); past half the room it walks when
 *   the last walk's time allows (20 × that time since, so about 5% busy at most); past all
 *   the room it walks at once. Other processes freeing space on the same filesystems hide
 *   the run's growth: once the filesystems' use went down between two looks, the watcher
 *   walks as the cost bound allows until the next walk, and after the command. A smaller
 *   hidden share can delay a walk up to the 10 s one (working copies on volumes,
 *   workcopy/volume.ts, are bounded by the kernel regardless). A command that writes
 *   little costs two walks (`diskWatch` in the result, and `npm run bench -- sandbox`,
 *   report it).
 * - Files deleted but still open (write, unlink, keep writing) are invisible to `du`: the
 *   open files of the command's processes (/proc/<pid>/fd) that have no name left are added.
 * - The kernel still bounds single files: RLIMIT_FSIZE is the smaller of SANDBOX_MAX_FILE_MB
 *   and the budget (sandbox/run.ts), and the sandbox's /dev/shm is a tmpfs of bwrap's
 *   `--size`.
 *
 * Between two measurements a command can write more (about one second of its write speed);
 * the budget bounds what stays, not the peak.
 */
import { execFile } from "../util/launcher.js";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { readdir, readlink, stat, statfs } from "node:fs/promises";
import { StageError } from "../util/stage-error.js";

const MIB = 1024 * 1024;
/** How often the filesystems' use is looked at, and the shortest time between two walks. */
export const DISK_WATCH_MIN_INTERVAL_MS = 1_000;
/** The longest time between two walks while a command runs. */
export const DISK_WATCH_MAX_INTERVAL_MS = 10_000;
/**
 * Folders that held at most this much at the last walk are walked at every look and after
 * the command: a walk of them costs milliseconds, and the look's figure is only a bound while
 * nothing else frees space on the filesystem.
 */
const SMALL_TREE_BYTES = 64 * MIB;
/** A walk waits this many times the last walk's own time (≤ 5% busy). */
const INTERVAL_FACTOR = 20;
/** The most processes and open files looked at per measurement (a fork bomb's worth). */
const MAX_PROCESSES = 4096;
const MAX_OPEN_FILES = 20_000;

/** What the watcher of one run did: for the result, the bench and the tests. */
export interface DiskWatchStats {
  /** Walks (du and the open files) taken, the one after the command ended included. */
  samples: number;
  /** Filesystem looks (statfs) that made a walk unnecessary. */
  skipped: number;
  /** Wall time spent measuring, summed. */
  busyMs: number;
  /** The largest total measured, in bytes. */
  peakBytes: number;
}

export interface DiskWatch {
  readonly stats: DiskWatchStats;
  /** The total that went past the limit, in bytes; undefined while within it. */
  readonly exceededBytes: number | undefined;
  /** Stops measuring and measures one last time when it may matter. */
  finish(): Promise<void>;
  /** Stops measuring at once. */
  cancel(): void;
}

/*
 * The last walk of each working copy (and cache), kept across runs: the next run on it starts
 * from that figure plus the filesystems' growth since, instead of walking at its start. A
 * working copy that shrank meanwhile is only overestimated (one walk more, never one less).
 */
const lastKnown = new Map<string, { bytes: number; fsUsed: number }>();
const LAST_KNOWN_MAX = 1000;

function remember(key: string, value: { bytes: number; fsUsed: number }): void {
  lastKnown.delete(key);
  lastKnown.set(key, value);
  if (lastKnown.size > LAST_KNOWN_MAX) lastKnown.delete(lastKnown.keys().next().value!);
}

/** Bytes in use on the filesystems of `paths`, one figure per filesystem. */
async function filesystemsUsed(paths: string[]): Promise<number> {
  // All at once: the look after a command is part of its time, and one after another the
  // stat calls were a round trip each through the thread pool.
  const infos = await Promise.all(paths.map((p) => stat(p).catch(() => undefined)));
  const devices = new Map<number, string>();
  paths.forEach((p, i) => {
    const info = infos[i];
    if (info && !devices.has(info.dev)) devices.set(info.dev, p);
  });
  const found = await Promise.all(
    [...devices.values()].map((p) => statfs(p).catch(() => undefined)),
  );
  let used = 0;
  for (const fs of found) if (fs) used += (fs.blocks - fs.bfree) * fs.bsize;
  return used;
}

/**
 * Starts measuring `paths` (and the open deleted files of `rootPid`'s process tree) against
 * `limitBytes`; `onExceeded` is called once, the first time a measurement is past it.
 * `key` names what persists between runs (the working copy and cache), for lastKnown.
 */
export function watchDisk(options: {
  paths: string[];
  key: string;
  rootPid: number | undefined;
  limitBytes: number;
  onExceeded(bytes: number): void;
}): DiskWatch {
  const stats: DiskWatchStats = { samples: 0, skipped: 0, busyMs: 0, peakBytes: 0 };
  let exceededBytes: number | undefined;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  /** The last walk: its total, the filesystems' use just before it, when and how long. */
  let last: { bytes: number; fsUsed: number; at: number; took: number } | undefined;
  /**
   * The filesystems' use at the latest look, and whether it went down at a look since the
   * last walk: then something freed space meanwhile (another task, or this one), and growth
   * since the walk no longer bounds what this run added.
   */
  let lastLook: number | undefined;
  let shrank = false;
  let running: Promise<void> = Promise.resolve();
  /** Whether the last walk found the folders small enough to walk at every look. */
  const small = () => last !== undefined && last.bytes <= SMALL_TREE_BYTES;

  /** `ended`: the walk after the command, which the run's result waits for. */
  async function walk(ended = false): Promise<void> {
    const started = performance.now();
    const fsUsed = await filesystemsUsed(options.paths);
    const bytes = await measureDisk(options.paths, options.rootPid, { ended });
    const took = performance.now() - started;
    stats.samples++;
    stats.busyMs += took;
    stats.peakBytes = Math.max(stats.peakBytes, bytes);
    last = { bytes, fsUsed, at: performance.now(), took };
    lastLook = fsUsed;
    shrank = false;
    remember(options.key, { bytes, fsUsed });
    if (bytes > options.limitBytes && exceededBytes === undefined) {
      exceededBytes = bytes;
      options.onExceeded(bytes);
    }
  }

  /**
   * How the filesystems' growth since the last walk compares with the run's room left: 2 it
   * may be past the limit, 1 past half the room, 0 neither. Once their use went down since
   * the last walk (other tasks deleting files on the same filesystem, say), their growth
   * says nothing about this run's: at least 1, so a walk comes as soon as its cost allows.
   */
  async function growth(): Promise<0 | 1 | 2> {
    if (!last) return 2;
    const started = performance.now();
    const used = await filesystemsUsed(options.paths);
    stats.busyMs += performance.now() - started;
    if (used < (lastLook ?? last.fsUsed)) shrank = true;
    lastLook = used;
    const grown = used - last.fsUsed;
    const room = options.limitBytes - last.bytes;
    return grown >= room ? 2 : grown >= room / 2 || shrank ? 1 : 0;
  }

  async function tick(): Promise<void> {
    if (stopped || exceededBytes !== undefined || !last) return;
    const since = performance.now() - last.at;
    // Small folders: a walk whenever its cost allows. Otherwise, possibly past the limit: walk
    // now (once a second at most); past half the room: walk when the last walk's cost allows;
    // else only every DISK_WATCH_MAX_INTERVAL_MS.
    const cheapEnough = since >= last.took * INTERVAL_FACTOR;
    const level = small() && cheapEnough ? 2 : await growth();
    if (level === 2 || (level === 1 && cheapEnough) || since >= DISK_WATCH_MAX_INTERVAL_MS)
      await walk();
    else stats.skipped++;
    schedule();
  }

  function schedule(): void {
    if (stopped || exceededBytes !== undefined) return;
    timer = setTimeout(() => {
      running = tick();
    }, DISK_WATCH_MIN_INTERVAL_MS);
    timer.unref();
  }

  // A first walk only for a working copy not seen before; otherwise the first look decides,
  // the filesystems' (statfs) for small folders too: they are walked when that look says
  // they may have grown or something freed space meanwhile, else at the next look (a second
  // on) and after the command. A walk as the command starts cost a du process per command
  // beside its own start-up, for the same figure the last command's walk left.
  const known = lastKnown.get(options.key);
  if (known) {
    last = { ...known, at: performance.now(), took: 0 };
    running = growth().then(async (level) => {
      if (level > 0 && !stopped) await walk();
      else stats.skipped++;
      schedule();
    });
  } else running = walk().then(schedule);
  return {
    stats,
    get exceededBytes() {
      return exceededBytes;
    },
    async finish() {
      stopped = true;
      clearTimeout(timer);
      await running;
      if (exceededBytes === undefined && (small() || (await growth()) > 0)) await walk(true);
      else stats.skipped++;
    },
    cancel() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}

/**
 * Bytes used by `paths` on disk plus the deleted files `rootPid`'s processes hold open.
 * `ended`: the command has ended, nothing runs beside the walk for it to slow down, and the
 * result waits for it (see duBytes).
 */
export async function measureDisk(
  paths: string[],
  rootPid?: number,
  options: { ended?: boolean } = {},
): Promise<number> {
  const [used, held] = await Promise.all([
    duBytes(paths, options.ended === true),
    rootPid === undefined ? 0 : heldDeletedBytes(rootPid),
  ]);
  return used + held;
}

/*
 * `du` rather than a walk in JavaScript: one process in C (fts), not a promise per file on
 * the service's thread pool. Its exit status is ignored: a file deleted during the walk, or a
 * folder the command made unreadable, is an error there while the totals still print.
 * Under `nice` while the command runs, so the walks take from its CPU time as little as
 * possible; not the walk after it (`ended`): the result waits for that one, and niced on a
 * busy host it waited for every other process first (several milliseconds per command).
 */
function duBytes(paths: string[], ended: boolean): Promise<number> {
  if (paths.length === 0) return Promise.resolve(0);
  const du = ["du", "-s", "-x", "-B1", "--", ...paths];
  const [file, ...args] = ended ? du : ["nice", "-n", "10", ...du];
  return new Promise((resolve) => {
    execFile(
      file!,
      args,
      { maxBuffer: 1024 * 1024, env: { PATH: process.env.PATH ?? "/usr/bin:/bin", LC_ALL: "C" } },
      (_error, stdout) => {
        let total = 0;
        for (const line of String(stdout ?? "").split("\n")) {
          const match = /^(\d+)\t/.exec(line);
          if (match) total += Number(match[1]);
        }
        resolve(total);
      },
    );
  });
}

/*
 * The pids of `rootPid` and all its descendants, from /proc/<pid>/stat. Read synchronously:
 * a few microseconds a process, where the thread pool takes a hundred times that.
 */
function processTree(rootPid: number): number[] {
  const children = new Map<number, number[]>();
  let entries: string[] = [];
  try {
    entries = readdirSync("/proc");
  } catch {
    return [rootPid];
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    let text: string;
    try {
      text = readFileSync(`/proc/${entry}/stat`, "utf8");
    } catch {
      continue; // ended meanwhile
    }
    // pid (comm) state ppid …; comm may hold spaces and parentheses: split after the last ')'.
    const ppid = Number(text.slice(text.lastIndexOf(")") + 2).split(" ")[1]);
    if (!Number.isInteger(ppid)) continue;
    const list = children.get(ppid) ?? [];
    list.push(Number(entry));
    children.set(ppid, list);
  }
  const tree: number[] = [];
  const queue = [rootPid];
  while (queue.length > 0 && tree.length < MAX_PROCESSES) {
    const pid = queue.pop()!;
    tree.push(pid);
    queue.push(...(children.get(pid) ?? []));
  }
  return tree;
}

/*
 * Bytes of regular files `rootPid`'s processes hold open after deleting them: the kernel
 * frees them only at the last close. The service may read /proc/<pid>/fd of the sandbox's
 * processes (its own uid, in user namespaces it created).
 */
async function heldDeletedBytes(rootPid: number): Promise<number> {
  // Its root gone (the walk after the command), the tree is gone too: its processes were in
  // its PID namespace, or were handed to another parent, where processTree no longer finds
  // them either. Reading all of /proc to learn that cost milliseconds per command.
  if (!existsSync(`/proc/${rootPid}`)) return 0;
  const seen = new Set<string>();
  let total = 0;
  let looked = 0;
  for (const pid of processTree(rootPid)) {
    const fds = await readdir(`/proc/${pid}/fd`).catch(() => [] as string[]);
    for (const fd of fds) {
      if (++looked > MAX_OPEN_FILES) return total;
      const link = `/proc/${pid}/fd/${fd}`;
      const target = await readlink(link).catch(() => "");
      if (!target.endsWith(" (deleted)")) continue;
      const info = await stat(link).catch(() => undefined);
      if (!info?.isFile() || info.nlink > 0) continue;
      const key = `${info.dev}:${info.ino}`;
      if (seen.has(key)) continue;
      seen.add(key);
      total += info.blocks * 512;
    }
  }
  return total;
}

/** Whose files the budget was for, in the failure's sentence. */
export type DiskBudgetSubject = "task" | "scan";

/** Why a run was stopped, for SandboxResult.limit. */
export function diskLimitText(limitMb: number, usedBytes: number): string {
  return `disk budget: the working copy, temporary files and package cache grew to ${formatMb(usedBytes)}, past TASK_DISK_LIMIT_MB=${limitMb}`;
}

function formatMb(bytes: number): string {
  return `${Math.ceil(bytes / MIB).toLocaleString("en-US")} MB`;
}

/**
 * A command stopped by TASK_DISK_LIMIT_MB: the task (or scan) fails with this sentence; it is
 * never handed to the model as a check failure to fix.
 */
export class DiskBudgetError extends StageError {
  constructor(
    readonly subject: DiskBudgetSubject,
    readonly command: string,
    readonly limitMb: number,
    readonly usedBytes: number,
  ) {
    const whose = subject === "task" ? "The task's" : "The scan's";
    super(
      `${whose} working copy grew past TASK_DISK_LIMIT_MB=${limitMb} MB while running \`${oneLine(command)}\` (${formatMb(usedBytes)} with its temporary files and package cache), so the command was stopped. Raise TASK_DISK_LIMIT_MB, or make the repository's commands write less (build output, test fixtures, caches).`,
    );
    this.name = "DiskBudgetError";
  }
}

function oneLine(command: string): string {
  const line = command.replace(/\s+/g, " ").trim();
  return line.length > 100 ? `${line.slice(0, 99)}…` : line;
}
