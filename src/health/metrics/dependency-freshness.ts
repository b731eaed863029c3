/*
 * Dependency freshness: the declared dependencies against their registries' latest versions
 * (health/freshness.ts), through the scan's bounded registry client.
 */
import { measureFreshness } from "../freshness.js";
import type { HealthMetric } from "./types.js";

export const dependencyFreshness: HealthMetric<"dependency_freshness"> = {
  name: "dependency_freshness",
  weight: 10,
  work: "lookup",
  measure: (ctx) => measureFreshness(ctx.registry, ctx.manifests),
};
