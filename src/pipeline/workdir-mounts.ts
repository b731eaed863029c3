/*
 * DATA_DIR's mounts across a stop and a start (docs/operations.md, "Mounts under DATA_DIR").
 *
 * A working copy on a volume (workcopy/volume.ts) is two mounts: the image's loop mount
 * at `W.vol/mnt` and its `wc` folder bound at `W`. Mounts outlive the process, so a stop that
 * left them there kept DATA_DIR busy (`rm -rf` failed with EBUSY) and its loop devices taken.
 *
 * - A graceful stop (service.ts), once the database is closed (no stage still running in
 *   this process can record anything then), takes off every mount under DATA_DIR except the
 *   kept copies' (pipeline/kept-workdirs.ts) and those of work another live process of this
 *   DATA_DIR holds a lease on (a sibling worker's). The images stay: nothing is lost.
 * - The next start (a worker) takes back what is still wanted: a kept copy still valid, a
 *   working copy of a task still running (its stage goes on where it was); it removes the
 *   rest (expired kept copies, tasks that ended or are gone, health scans' copies).
 * - `npm run data:release` (cli/data-release.ts) takes everything off, for an operator.
 */
import path from "node:path";
import type { Models } from "../db/models.js";
import { liveLeaseIds } from "../durable/markers.js";
import { unfinishedTasksAmong } from "../domain/tasks/store.js";
import { processIdentity } from "../queue/identity.js";
import {
  isKept,
  keptWorkdirs,
  mountsUnder,
  releaseMount,
  remountWorkdir,
  removeWorkdir,
  unmountedVolume,
  workdirNames,
  workdirOfMount,
} from "../workcopy/volume.js";
import { removeExpiredWorkdirs } from "./kept-workdirs.js";

/**
 * The working copies (paths under `dataDir`) another live process holds a lease on: a stage
 * of a task (`work/<task>`) or a health scan (`health/<report>-<attempt>`). Read before a
 * stop closes the database.
 */
export async function heldElsewhere(
  models: Models,
  dataDir: string,
  ttlMs: number,
): Promise<Set<string>> {
  const leases = await liveLeaseIds(
    models,
    ["lease", "health-lease"],
    new Date(Date.now() - ttlMs),
    processIdentity(),
  );
  const held = new Set<string>();
  for (const leaseId of leases) {
    const [kind, id, ...rest] = leaseId.split(":");
    if (kind === "lease") held.add(path.join(dataDir, "work", id!));
    else held.add(path.join(dataDir, "health", `${id}-${rest.at(-1)}`));
  }
  return held;
}

/**
 * Takes off every mount under `dataDir` but those of working copies in `keep` and (unless
 * `spareKept` is false: the operator's data:release) of kept copies; answers the mount points
 * taken off, deepest first. A volume's loop device is freed (autoclear) once both its loop
 * mount and the working copy's bind are off.
 */
export async function releaseDataMounts(
  dataDir: string,
  keep: ReadonlySet<string> = new Set(),
  options: { spareKept?: boolean } = {},
): Promise<string[]> {
  const spareKept = options.spareKept ?? true;
  const released: string[] = [];
  for (const mountPoint of await mountsUnder(dataDir)) {
    const workdir = workdirOfMount(mountPoint);
    if (keep.has(workdir) || (spareKept && isKept(workdir))) continue;
    await releaseMount(mountPoint);
    released.push(mountPoint);
  }
  return released;
}

/** What a start did with the working copies a stop left unmounted. */
export interface Reclaimed {
  /** Mounted again (kept copies still valid, tasks still running). */
  taken: string[];
  /** Removed (expired kept copies, ended or unknown tasks, health scans). */
  removed: string[];
}

/**
 * At a worker's start: the working copies under `dataDir` whose volume a stop took off are
 * mounted again when still wanted (a kept copy still valid, a task not ended) and removed
 * otherwise; expired kept copies go too.
 */
export async function reclaimWorkdirs(
  models: Models,
  dataDir: string,
  minFreeBytes = 0,
): Promise<Reclaimed> {
  const done: Reclaimed = { taken: [], removed: [] };
  const work = path.join(dataDir, "work");
  await removeExpiredWorkdirs(work, Date.now(), minFreeBytes);
  const valid = new Set((await keptWorkdirs(work)).map((kept) => kept.workdir));
  const names = await workdirNames(work);
  const running = new Set(await unfinishedTasksAmong(models, names));
  const candidates = [
    ...names.map((name) => ({ workdir: path.join(work, name), wanted: running.has(name) })),
    ...(await workdirNames(path.join(dataDir, "health"))).map((name) => ({
      workdir: path.join(dataDir, "health", name),
      wanted: false,
    })),
  ];
  for (const { workdir, wanted } of candidates) {
    if (!(await unmountedVolume(workdir))) continue;
    if ((wanted || valid.has(workdir)) && (await remountWorkdir(workdir).catch(() => false)))
      done.taken.push(workdir);
    else {
      await removeWorkdir(workdir);
      done.removed.push(workdir);
    }
  }
  return done;
}
