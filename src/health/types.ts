/*
 * The shapes of a health report's metrics (docs/api.md, "The report"). Every metric says
 * whether its figure was measured (`measured: true`) or only estimated / unavailable
 * (`measured: false`, with the reason in `details.reason`).
 */

export const METRIC_NAMES = [
  "test_coverage",
  "tech_debt",
  "security",
  "documentation",
  "dependency_freshness",
  "ci_pass_rate",
] as const;
export type MetricName = (typeof METRIC_NAMES)[number];

export interface MetricResult {
  /** 0..100, or null when nothing could be scored. */
  score: number | null;
  summary: string;
  details: Record<string, unknown>;
  measured: boolean;
}

export type Metrics = Record<MetricName, MetricResult>;

/** A metric that could not be measured at all: no score, and the reason. */
export function unavailable(
  summary: string,
  reason: string,
  details: Record<string, unknown> = {},
): MetricResult {
  return { score: null, summary, details: { ...details, reason }, measured: false };
}

/** Rounds a score to one decimal and keeps it within 0..100. */
export function clampScore(value: number): number {
  if (!Number.isFinite(value)) return 0;
  return Math.round(Math.min(100, Math.max(0, value)) * 10) / 10;
}
