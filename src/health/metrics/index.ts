import type { MetricName } from "../types.js";
import { ciPassRate } from "./ci-pass-rate.js";
import { dependencyFreshness } from "./dependency-freshness.js";
import { documentation } from "./documentation.js";
import { security } from "./security.js";
import { techDebt } from "./tech-debt.js";
import { testCoverage } from "./test-coverage.js";
import type { HealthMetric } from "./types.js";

/*
 * The registry of health metrics: the scanner (health/scanner.ts) walks it and names none of
 * them. Keyed by the report's metric names (health/types.ts METRIC_NAMES, docs/api.md "The
 * report"), so a name without its metric, or a metric under another's name, does not compile.
 * Adding one is a new file beside these and one line here (docs/architecture.md, "How to add
 * a health metric").
 */
export const HEALTH_METRICS: { readonly [N in MetricName]: HealthMetric<N> } = {
  test_coverage: testCoverage,
  tech_debt: techDebt,
  security,
  documentation,
  dependency_freshness: dependencyFreshness,
  ci_pass_rate: ciPassRate,
};

export type { HealthMetric, ScanContext } from "./types.js";
