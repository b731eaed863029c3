/*
 * Tech debt: markers, long files and functions, duplication in the source files
 * (health/tech-debt.ts).
 */
import { measureTechDebt } from "../tech-debt.js";
import { noteTruncation, type HealthMetric } from "./types.js";

export const techDebt: HealthMetric<"tech_debt"> = {
  name: "tech_debt",
  weight: 15,
  work: "analysis",
  measure: async (ctx) => noteTruncation(ctx.files, await measureTechDebt(ctx.files)),
};
