import type { BacktestCase, BacktestReport, CaseResult } from "./types.js";

/** The Wilson score interval of `k` successes in `n` trials (95%: z = 1.96). */
export function wilson(k: number, n: number, z = 1.96): { low: number; high: number } {
  if (n === 0) return { low: 0, high: 0 };
  const p = k / n;
  const z2 = z * z;
  const centre = (p + z2 / (2 * n)) / (1 + z2 / n);
  const half = (z * Math.sqrt((p * (1 - p)) / n + z2 / (4 * n * n))) / (1 + z2 / n);
  return { low: Math.max(0, centre - half), high: Math.min(1, centre + half) };
}

export function median(values: number[]): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

const round = (n: number, digits = 4) => Math.round(n * 10 ** digits) / 10 ** digits;

/** report.json (docs/operations.md, "Backtest"): the figures over the cases that ran. */
export function buildReport(input: {
  model: string;
  promptHash: string;
  startedAt: Date;
  repos: string[];
  cases: BacktestCase[];
  results: CaseResult[];
  stopped: string | null;
}): BacktestReport {
  const ran = input.results.filter((r) => r.status !== "not_run");
  const resolved = ran.filter((r) => r.resolved).length;
  const usd = ran.reduce((sum, r) => sum + r.usd, 0);
  const interval = wilson(resolved, ran.length);
  return {
    model: input.model,
    prompt_hash: input.promptHash,
    started_at: input.startedAt.toISOString(),
    finished_at: new Date().toISOString(),
    repos: input.repos,
    total: input.cases.length,
    valid: input.cases.filter((c) => c.validity === "valid").length,
    flaky: input.cases.filter((c) => c.validity === "flaky").length,
    resolved,
    rate: ran.length ? round(resolved / ran.length) : 0,
    wilson_low: round(interval.low),
    wilson_high: round(interval.high),
    usd: round(usd, 6),
    usd_per_resolved: resolved ? round(usd / resolved, 6) : null,
    median_s: round(median(ran.map((r) => r.seconds)), 1),
    stopped: input.stopped,
    cases: input.results,
  };
}

const pct = (x: number) => `${(x * 100).toFixed(1)}%`;

/** report.md: the same figures for people. */
export function reportMarkdown(report: BacktestReport, cases: BacktestCase[]): string {
  const lines = [
    `# Backtest: ${report.repos.join(", ")}`,
    "",
    `Model \`${report.model}\`, prompts \`${report.prompt_hash.slice(0, 12)}\`, ${report.started_at}.`,
    "",
    `**Resolved ${report.resolved} of ${report.cases.filter((c) => c.status !== "not_run").length}: ${pct(report.rate)}** (95% Wilson interval ${pct(report.wilson_low)}–${pct(report.wilson_high)}).`,
    "",
    `| mined | valid | flaky | spent | per resolved | median time |`,
    `| --- | --- | --- | --- | --- | --- |`,
    `| ${report.total} | ${report.valid} | ${report.flaky} | $${report.usd.toFixed(4)} | ${report.usd_per_resolved === null ? "—" : `$${report.usd_per_resolved.toFixed(4)}`} | ${report.median_s} s |`,
    "",
  ];
  if (report.stopped) lines.push(`Stopped early: ${report.stopped}.`, "");
  lines.push(
    "| case | status | resolved | fail→pass | pass→pass | fix rounds | calls | $ | s | gold files | edited tests | leaky | trajectory |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
  );
  for (const r of report.cases) {
    lines.push(
      `| ${r.id} | ${r.status} | ${r.resolved ? "yes" : "no"} | ${r.fail_to_pass.passed}/${r.fail_to_pass.total} | ${r.pass_to_pass.passed}/${r.pass_to_pass.total} | ${r.fix_rounds} | ${r.model_calls} | ${r.usd.toFixed(4)} | ${r.seconds} | ${r.touched_gold ? "yes" : "no"} | ${r.edited_tests ? "yes" : "no"} | ${r.leaky_message ? "yes" : "no"} | ${r.trajectory_url ? `[ndjson](${r.trajectory_url})` : "—"} |`,
    );
  }
  const dropped = cases.filter((c) => c.validity !== "valid");
  if (dropped.length) {
    lines.push("", "## Not used", "", "| commit | why | detail |", "| --- | --- | --- |");
    for (const c of dropped)
      lines.push(
        `| ${c.id} | ${c.validity} | ${(c.reason ?? "").replace(/\|/g, "\\|").slice(0, 200)} |`,
      );
  }
  return `${lines.join("\n")}\n`;
}
