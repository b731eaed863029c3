import { useMemo, useState } from "preact/hooks";
import { api, type TimelineRow, type Velocity } from "../api.js";
import { LineChart } from "../chart.js";
import { Field, Loaded, useResource } from "../components.js";

const pct = (v: number | null) => (v === null ? "—" : `${Math.round(v * 100)}%`);
const secs = (v: number | null) =>
  v === null ? "—" : v < 120 ? `${Math.round(v)} s` : `${(v / 60).toFixed(1)} min`;

function Charts({ rows }: { rows: TimelineRow[] }) {
  const x = useMemo(() => rows.map((r) => Date.parse(r.date + "T00:00:00Z") / 1000), [rows]);
  const tasks = useMemo(
    () => [
      { label: "created", values: rows.map((r) => r.tasks_created), color: "#2563eb" },
      { label: "completed", values: rows.map((r) => r.completed), color: "#15803d" },
      { label: "failed", values: rows.map((r) => r.failed), color: "#b91c1c" },
    ],
    [rows],
  );
  const cost = useMemo(
    () => [{ label: "cost (USD)", values: rows.map((r) => r.cost_usd), color: "#7c3aed" }],
    [rows],
  );
  return (
    <div class="grid2">
      <div class="card">
        <h2>Tasks per day</h2>
        <LineChart title="tasks per day" x={x} series={tasks} yLabel="tasks" />
      </div>
      <div class="card">
        <h2>Cost per day</h2>
        <LineChart title="cost per day" x={x} series={cost} yLabel="USD" />
      </div>
    </div>
  );
}

/** Velocity over 7, 30 or 90 days: totals, and per-day charts of tasks and cost. */
export function AnalyticsPage() {
  const [period, setPeriod] = useState("30");
  const velocity = useResource(
    () => api<Velocity>("GET", `/analytics/velocity?period=${period}`),
    [period],
  );
  const timeline = useResource(
    () => api<TimelineRow[]>("GET", `/analytics/velocity/timeline?period=${period}`),
    [period],
  );
  return (
    <section>
      <h1>Analytics</h1>
      <div class="filters">
        <Field id="period" label="Period">
          <select id="period" value={period} onChange={(e) => setPeriod(e.currentTarget.value)}>
            <option value="7">Last 7 days</option>
            <option value="30">Last 30 days</option>
            <option value="90">Last 90 days</option>
          </select>
        </Field>
      </div>
      <Loaded res={velocity} what="velocity">
        {(v) => (
          <dl class="stats" data-testid="velocity">
            <div>
              <dt>Tasks</dt>
              <dd>{v.tasks.total}</dd>
            </div>
            <div>
              <dt>Completed</dt>
              <dd>{v.tasks.completed}</dd>
            </div>
            <div>
              <dt>Failed</dt>
              <dd>{v.tasks.failed}</dd>
            </div>
            <div>
              <dt>Success rate</dt>
              <dd>{pct(v.success_rate)}</dd>
            </div>
            <div>
              <dt>Median duration</dt>
              <dd>{secs(v.duration_seconds.median)}</dd>
            </div>
            <div>
              <dt>p90 duration</dt>
              <dd>{secs(v.duration_seconds.p90)}</dd>
            </div>
            <div>
              <dt>Pull requests</dt>
              <dd>
                {v.pull_requests.opened} opened / {v.pull_requests.merged} merged
              </dd>
            </div>
            <div>
              <dt>Cost</dt>
              <dd>
                ${v.cost_usd.total.toFixed(2)}
                {v.cost_usd.per_successful_task !== null &&
                  ` ($${v.cost_usd.per_successful_task.toFixed(2)} per success)`}
              </dd>
            </div>
          </dl>
        )}
      </Loaded>
      <Loaded res={timeline} what="the timeline">
        {(rows) => <Charts rows={rows} />}
      </Loaded>
    </section>
  );
}
