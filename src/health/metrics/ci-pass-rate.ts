/*
 * CI pass rate: the latest completed workflow (or check) runs of the default branch on
 * GitHub (health/ci.ts); unavailable for other repositories.
 */
import { measureCiPassRate } from "../ci.js";
import type { HealthMetric } from "./types.js";

export const ciPassRate: HealthMetric<"ci_pass_rate"> = {
  name: "ci_pass_rate",
  weight: 15,
  work: "lookup",
  measure: (ctx) => measureCiPassRate(ctx.ci),
};
