/*
 * Documentation: the README and the doc comments of exported symbols
 * (health/documentation.ts).
 */
import { measureDocumentation } from "../documentation.js";
import { noteTruncation, type HealthMetric } from "./types.js";

export const documentation: HealthMetric<"documentation"> = {
  name: "documentation",
  weight: 10,
  work: "analysis",
  measure: async (ctx) => noteTruncation(ctx.files, await measureDocumentation(ctx.files)),
};
