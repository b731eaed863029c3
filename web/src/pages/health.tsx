import { useEffect, useMemo, useState } from "preact/hooks";
import { ApiError, api, type HealthReport } from "../api.js";
import { LineChart } from "../chart.js";
import { Empty, ErrorBox, Field, Loaded, Time, useAction, useResource } from "../components.js";
import { loadRepositories, RepoSelect } from "./tasks.js";

const METRICS = [
  ["test_coverage", "Test coverage"],
  ["tech_debt", "Tech debt"],
  ["security", "Security"],
  ["documentation", "Documentation"],
  ["dependency_freshness", "Dependency freshness"],
  ["ci_pass_rate", "CI pass rate"],
] as const;

function Report({ report }: { report: HealthReport }) {
  return (
    <div class="card" data-testid="health-report">
      <p class="grade">
        <span class="grade-letter" aria-label={`Grade ${report.grade}`}>
          {report.grade}
        </span>{" "}
        <span>{report.score} / 100</span>
      </p>
      <p class="muted">
        Commit <code>{report.commit_sha?.slice(0, 10) ?? "—"}</code> · scanned{" "}
        <Time iso={report.finished_at ?? report.created_at} />
      </p>
      <div class="table-wrap">
        <table>
          <caption class="sr-only">Metrics</caption>
          <thead>
            <tr>
              <th scope="col">Metric</th>
              <th scope="col">Score</th>
              <th scope="col">Measured</th>
              <th scope="col">Summary</th>
            </tr>
          </thead>
          <tbody>
            {METRICS.map(([k, label]) => {
              const m = report.metrics?.[k];
              return (
                <tr key={k}>
                  <th scope="row">{label}</th>
                  <td>{m?.score ?? "—"}</td>
                  <td>{m ? (m.measured ? "measured" : "estimated") : "—"}</td>
                  <td>
                    {m?.summary}
                    {m && !m.measured && typeof m.details.reason === "string" && (
                      <span class="muted"> ({m.details.reason})</span>
                    )}
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      </div>
    </div>
  );
}

function History({ reports }: { reports: HealthReport[] }) {
  const done = useMemo(() => reports.filter((r) => r.score !== null).reverse(), [reports]);
  const x = useMemo(
    () => done.map((r) => Date.parse(r.finished_at ?? r.created_at) / 1000),
    [done],
  );
  const series = useMemo(
    () => [{ label: "score", values: done.map((r) => r.score), color: "#2563eb" }],
    [done],
  );
  if (done.length === 0) return <Empty>No finished scans yet.</Empty>;
  return (
    <div class="card">
      <h2>Score over time</h2>
      <LineChart title="health score history" x={x} series={series} yLabel="score" yMax={100} />
      <ol class="plain history">
        {done
          .slice()
          .reverse()
          .map((r) => (
            <li key={r.id}>
              <Time iso={r.finished_at ?? r.created_at} />: <strong>{r.grade}</strong> ({r.score})
            </li>
          ))}
      </ol>
    </div>
  );
}

/** Per repository: the latest grade and metrics, a scan with progress, the history chart. */
export function HealthPage() {
  const [target, setTarget] = useState("");
  // The first repository is shown at once; the picker changes it.
  useEffect(() => {
    void loadRepositories().then(
      (all) => setTarget((t) => t || (all[0] ? `${all[0].workspace.id}|${all[0].repo.id}` : "")),
      () => undefined,
    );
  }, []);
  const [workspaceId, repoId] = target ? (target.split("|") as [string, string]) : ["", ""];
  const base = repoId ? `/health-reports/${encodeURIComponent(repoId)}` : "";
  const wsq = `?workspace_id=${encodeURIComponent(workspaceId)}`;
  const latest = useResource(
    () =>
      base
        ? api<HealthReport>("GET", base + wsq).catch((err: unknown) => {
            if (err instanceof ApiError && err.status === 404) return null;
            throw err;
          })
        : Promise.resolve(null),
    [base],
  );
  const history = useResource(
    () => (base ? api<HealthReport[]>("GET", `${base}/history${wsq}`) : Promise.resolve([])),
    [base],
  );
  const [scan, setScan] = useState<HealthReport | null>(null);
  const start = useAction();

  // Follow a running scan until it finishes, then show the new report.
  useEffect(() => {
    if (!scan || scan.status === "completed" || scan.status === "failed") return;
    const timer = setTimeout(async () => {
      try {
        const next = await api<HealthReport>(
          "GET",
          `${base}/scans/${encodeURIComponent(scan.id)}${wsq}`,
        );
        setScan(next);
        if (next.status === "completed" || next.status === "failed") {
          latest.reload();
          history.reload();
        }
      } catch {
        setScan({ ...scan });
      }
    }, 1000);
    return () => clearTimeout(timer);
  }, [scan]);

  return (
    <section>
      <h1>Codebase health</h1>
      <div class="filters">
        <Field id="health-repo" label="Repository">
          <RepoSelect
            id="health-repo"
            value={target}
            onChange={(v) => (setTarget(v), setScan(null))}
          />
        </Field>
        {repoId && (
          <button
            type="button"
            class="primary"
            disabled={
              start.busy ||
              (scan !== null && scan.status !== "completed" && scan.status !== "failed")
            }
            onClick={() =>
              void start.run(async () =>
                setScan(await api<HealthReport>("POST", `${base}/scan${wsq}`)),
              )
            }
          >
            Scan now
          </button>
        )}
      </div>
      <ErrorBox error={start.error} />
      {scan && (
        <p role="status" data-testid="scan-status">
          Scan{" "}
          {scan.status === "completed"
            ? "finished"
            : scan.status === "failed"
              ? `failed: ${scan.error ?? ""}`
              : `${scan.status}…`}
        </p>
      )}
      {!repoId ? (
        <Empty>Choose a repository to see its health.</Empty>
      ) : (
        <>
          <Loaded res={latest} what="the latest report">
            {(r) => (r ? <Report report={r} /> : <Empty>No report yet: run a scan.</Empty>)}
          </Loaded>
          <Loaded res={history} what="the history">
            {(list) => <History reports={list} />}
          </Loaded>
        </>
      )}
    </section>
  );
}
