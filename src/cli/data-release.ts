#!/usr/bin/env node
import { realpathSync } from "node:fs";
import { fileURLToPath } from "node:url";
import dotenv from "dotenv";
import { ConfigError, loadConfig } from "../config/env.js";
import { releaseDataMounts } from "../pipeline/workdir-mounts.js";
import { detachLoopDevices, isKept, mountsUnder, workdirOfMount } from "../workcopy/volume.js";

/*
 * `npm run data:release` (docs/operations.md, "Mounts under DATA_DIR"): takes every mount
 * under DATA_DIR off, kept working copies' included, and detaches the loop devices of its
 * images, so DATA_DIR can be moved or removed (`rm -rf`). For a stopped service: a running
 * worker's tasks would lose their working copies (they clone again).
 *   npm run data:release           (after npm run build)
 *   npx tsx src/cli/data-release.ts (development)
 * Exit codes: 0 nothing left mounted or attached, 1 something still is, 2 bad configuration.
 */

/** Releases everything under `dataDir`; answers what was done and what is still mounted. */
export async function releaseAll(
  dataDir: string,
): Promise<{ released: string[]; loops: string[]; left: string[] }> {
  const released = await releaseDataMounts(dataDir, new Set(), { spareKept: false });
  const loops = await detachLoopDevices(dataDir);
  return { released, loops, left: await mountsUnder(dataDir) };
}

async function main(): Promise<number> {
  dotenv.config({ path: process.env.ENV_FILE || ".env", quiet: true });
  let dataDir: string;
  try {
    dataDir = loadConfig().dataDir;
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(error.message);
      return 2;
    }
    throw error;
  }
  const kept = (await mountsUnder(dataDir)).filter((m) => isKept(workdirOfMount(m))).length;
  const { released, loops, left } = await releaseAll(dataDir);
  const devices =
    loops.length === 0
      ? "no loop device of its images is attached"
      : `loop device(s) still attached: ${loops.join(", ")}`;
  console.log(
    `${dataDir}: ${released.length} mount(s) taken off (${kept} of kept copies); ${devices}.`,
  );
  if (left.length > 0) console.error(`Still mounted (in use?): ${left.join(", ")}`);
  return left.length + loops.length > 0 ? 1 : 0;
}

const invoked = process.argv[1] ? realpathSync(process.argv[1]) : "";
if (invoked === fileURLToPath(import.meta.url))
  main().then(
    (code) => process.exit(code),
    (error: unknown) => {
      console.error(error instanceof Error ? error.message : String(error));
      process.exit(1);
    },
  );
