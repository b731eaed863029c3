import { StageError } from "../errors.js";
import type { StageContext } from "../stage.js";
import { cloneStage } from "./clone.js";
import { exists as existsInside } from "../../util/workcopy-fs.js";

/**
 * Makes sure the working copy exists. A stage resumed by a worker on another machine (or
 * after the data directory was cleaned) clones again instead of failing.
 */
export async function ensureWorkingCopy(ctx: StageContext): Promise<void> {
  const exists = await existsInside(ctx.workdir, ".git");
  if (exists) return;
  await ctx.log("The working copy is not on this worker; cloning it again.");
  const outcome = await cloneStage.run(ctx);
  if (!("next" in outcome)) throw new StageError("Cloning the repository again failed.");
}
