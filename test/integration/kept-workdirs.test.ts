import { existsSync, readFileSync } from "node:fs";
import { mkdir, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { keepWorkdir, removeExpiredWorkdirs } from "../../src/pipeline/kept-workdirs.js";
import {
  adoptWorkdir,
  configureWorkdirVolumes,
  isKept,
  markKept,
  prepareWorkdir,
  removeWorkdir,
  volumeSupport,
  workdirNames,
} from "../../src/workcopy/volume.js";
import { mountsUnder } from "../helpers/mounts.js";

/*
 * Kept working copies (issue 29's follow-ups; src/pipeline/kept-workdirs.ts): a finished
 * task's working copy is left for a follow-up, which takes it over (moved to its own folder,
 * volume and mounts included) instead of cloning; only one taker ever gets a copy; at most
 * FOLLOW_UP_KEEP_MAX are kept; the expired ones go. On a plain folder (a 0 MB budget makes
 * no volume) and, where the host allows it, on a loop-mounted volume.
 */

configureWorkdirVolumes("auto");
const support = await volumeSupport();

const modes = [
  { name: "a plain folder", limitMb: 0, volume: false },
  ...(support.available ? [{ name: "a volume", limitMb: 24, volume: true }] : []),
];

describe.each(modes)("kept working copies on $name", ({ limitMb, volume }) => {
  let root: string;

  beforeEach(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), "foreman-kept-"));
  });

  afterEach(async () => {
    for (const name of await workdirNames(root)) await removeWorkdir(path.join(root, name));
    expect(mountsUnder(root)).toEqual([]);
    await rm(root, { recursive: true, force: true });
  });

  /** A working copy with one file, as a finished task leaves it. */
  async function finished(name: string): Promise<string> {
    const workdir = path.join(root, name);
    expect(await prepareWorkdir(workdir, limitMb)).toBe(volume ? "volume" : "folder");
    await mkdir(path.join(workdir, "node_modules", "dep"), { recursive: true });
    await writeFile(path.join(workdir, "node_modules", "dep", "index.js"), `// ${name}\n`);
    return workdir;
  }

  it("moves a kept copy to its taker, files and mounts along, and gives it to one taker only", async () => {
    const parent = await finished("task_parent");
    expect(await keepWorkdir(parent, { ms: 60_000, max: 4 })).toBeInstanceOf(Date);
    expect(isKept(parent)).toBe(true);

    const takers = ["task_a", "task_b", "task_c"].map((n) => path.join(root, n));
    const taken = await Promise.all(takers.map((to) => adoptWorkdir(parent, to)));
    expect(taken.filter(Boolean)).toHaveLength(1);
    const winner = takers[taken.indexOf(true)]!;

    expect(readFileSync(path.join(winner, "node_modules", "dep", "index.js"), "utf8")).toBe(
      "// task_parent\n",
    );
    expect(existsSync(parent)).toBe(false);
    expect(existsSync(`${parent}.vol`)).toBe(false);
    expect(isKept(parent)).toBe(false);
    expect(isKept(winner)).toBe(false);
    // Nothing but the winner's working copy (and its volume) is left.
    expect((await readdir(root)).sort()).toEqual(
      volume ? [path.basename(winner), `${path.basename(winner)}.vol`] : [path.basename(winner)],
    );
    if (volume) {
      expect(mountsUnder(parent)).toEqual([]);
      expect(mountsUnder(`${parent}.vol`)).toEqual([]);
      expect(mountsUnder(winner)).toEqual([winner]);
      expect(mountsUnder(`${winner}.vol`)).toEqual([path.join(`${winner}.vol`, "mnt")]);
      // Still the volume's file system: what is written there counts against its budget.
      await writeFile(path.join(winner, "more.txt"), "more\n");
      expect(existsSync(path.join(`${winner}.vol`, "mnt", "wc", "more.txt"))).toBe(true);
    }
    await removeWorkdir(winner);
    expect(existsSync(winner)).toBe(false);
    expect(mountsUnder(root)).toEqual([]);
  });

  it("takes nothing that is not kept, and leaves the taker's folder free", async () => {
    const parent = await finished("task_unkept");
    const to = path.join(root, "task_taker");
    expect(await adoptWorkdir(parent, to)).toBe(false);
    expect(existsSync(path.join(parent, "node_modules"))).toBe(true);
    expect(existsSync(to)).toBe(false);
    expect(await adoptWorkdir(path.join(root, "task_missing"), to)).toBe(false);
  });

  it("keeps at most FOLLOW_UP_KEEP_MAX, the oldest going first, and removes the expired", async () => {
    const now = Date.now();
    const copies = [];
    for (let i = 0; i < 4; i++) {
      const workdir = await finished(`task_${i}`);
      await keepWorkdir(workdir, { ms: 60_000, max: 3 }, now + i * 1000);
      copies.push(workdir);
    }
    // The fourth made room: the first (the oldest) went.
    expect(copies.map((c) => existsSync(c))).toEqual([false, true, true, true]);
    expect(copies.map((c) => isKept(c))).toEqual([false, true, true, true]);

    // Nothing kept at all when the policy keeps nothing: the caller removes the copy.
    const unkept = await finished("task_off");
    expect(await keepWorkdir(unkept, { ms: 0, max: 3 })).toBeNull();
    expect(isKept(unkept)).toBe(false);

    // A minute after the third was kept, the two kept ones before it are past their time.
    expect(await removeExpiredWorkdirs(root, now + 62_500)).toBe(2);
    expect(copies.map((c) => existsSync(c))).toEqual([false, false, false, true]);
    // An unreadable marker counts as expired.
    await markKept(unkept, now);
    await writeFile(`${unkept}.kept`, "not json");
    expect(await removeExpiredWorkdirs(root, now)).toBe(1);
    expect(existsSync(unkept)).toBe(false);
    expect(isKept(copies[3]!)).toBe(true);
    // What a crash between writing a marker and putting it in place leaves is one working
    // copy's, removed with it.
    await writeFile(`${copies[3]!}.kept.tmp`, "{}");
    expect(await workdirNames(root)).toEqual([path.basename(copies[3]!)]);
    await removeWorkdir(copies[3]!);
    expect(await readdir(root)).toEqual([]);
  });

  it("keeps nothing, and lets go of every kept copy, while the disk is below DATA_DIR_MIN_FREE_MB", async () => {
    const kept = await finished("task_kept");
    await keepWorkdir(kept, { ms: 60_000, max: 4 });
    const low = { ms: 60_000, max: 4, minFreeBytes: Number.MAX_SAFE_INTEGER };
    const late = await finished("task_late");
    expect(await keepWorkdir(late, low)).toBeNull();
    expect(isKept(late)).toBe(false);
    // Not expired, but the disk is short of room: it goes.
    expect(await removeExpiredWorkdirs(root, Date.now(), 1)).toBe(0);
    expect(await removeExpiredWorkdirs(root, Date.now(), Number.MAX_SAFE_INTEGER)).toBe(1);
    expect(existsSync(kept)).toBe(false);
  });
});
