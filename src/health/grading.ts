/*
 * The overall score and grade of a health report (docs/api.md, "The report"). The weights say
 * how much each metric counts; metrics without a score (null) are left out and the weights of
 * the others are renormalised to sum to 1, so an unavailable metric neither helps nor hurts.
 */
import { HEALTH_METRICS } from "./metrics/index.js";
import { METRIC_NAMES, type MetricName, type Metrics } from "./types.js";

/** Relative weight of each metric in the overall score (they sum to 100): each metric's own. */
export const METRIC_WEIGHTS: Readonly<Record<MetricName, number>> = Object.freeze(
  Object.fromEntries(METRIC_NAMES.map((name) => [name, HEALTH_METRICS[name].weight])) as Record<
    MetricName,
    number
  >,
);

/** The grade table of docs/api.md, "The report": the lowest score of each grade, best first. */
export const GRADE_TABLE: ReadonlyArray<readonly [grade: string, min: number]> = [
  ["A+", 97],
  ["A", 93],
  ["A-", 90],
  ["B+", 87],
  ["B", 83],
  ["B-", 80],
  ["C+", 77],
  ["C", 73],
  ["C-", 70],
  ["D", 60],
];

/** The grade of an overall score (0..100). */
export function gradeFor(score: number): string {
  for (const [grade, min] of GRADE_TABLE) if (score >= min) return grade;
  return "F";
}

/**
 * The weighted mean of the metrics that have a score, rounded to a whole number, or null
 * when none has one.
 */
export function overallScore(metrics: Metrics): number | null {
  let weighted = 0;
  let weights = 0;
  for (const name of METRIC_NAMES) {
    const score = metrics[name].score;
    if (score === null) continue;
    weighted += score * METRIC_WEIGHTS[name];
    weights += METRIC_WEIGHTS[name];
  }
  if (weights === 0) return null;
  return Math.round(weighted / weights);
}
