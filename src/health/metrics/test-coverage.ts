/*
 * Test coverage: the repository's own tests under a coverage tool, in the sandbox, within the
 * scan's coverage budget (health/coverage.ts); estimated from test lines where not measured.
 */
import { measureCoverage } from "../coverage.js";
import type { HealthMetric } from "./types.js";

export const testCoverage: HealthMetric<"test_coverage"> = {
  name: "test_coverage",
  weight: 25,
  work: "commands",
  measure: (ctx) =>
    measureCoverage(ctx.files, {
      root: ctx.root,
      timeoutMs: ctx.sandbox.timeoutMs,
      ...(ctx.signal ? { signal: ctx.signal } : {}),
      goproxy: ctx.sandbox.goproxy,
      ...(ctx.sandbox.cache ? { cache: ctx.sandbox.cache } : {}),
      ...(ctx.sandbox.setupFailure ? { setupFailure: ctx.sandbox.setupFailure } : {}),
    }),
};
