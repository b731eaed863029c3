import { html as diffHtml } from "diff2html";
import "diff2html/bundles/css/diff2html.min.css";
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import { TASK_PHASES } from "../../../src/db/task-states.js";
import type { TaskEvent } from "../../../src/domain/task-events.js";
import { ApiError, api, storedKey, taskSocketUrl, type Task } from "../api.js";
import { ErrorBox, Loaded, StatusBadge, Time, useAction, useResource } from "../components.js";
import { Trajectory } from "./trajectory.js";

/** The phases a task goes through, in order; FAILED is shown apart, when reached. */
const PHASES = TASK_PHASES.filter((p) => p !== "FAILED");
const TERMINAL = new Set(["completed", "failed", "cancelled"]);

type Live = {
  /** Phase events, for the timeline. */
  phases: Extract<TaskEvent, { event_type: "phase" }>[];
  /** Log and error lines, for the log. */
  lines: TaskEvent[];
  connected: boolean;
  ended: boolean;
};

/**
 * The task's event stream: replayed from the start on connect (so a reload loses nothing),
 * then live. Events of one burst are applied together, so a replay of thousands of events
 * renders once, not once per event. Reconnects after an abnormal close with `?since=`.
 */
function useTaskEvents(id: string, onChange: () => void): Live {
  const [live, setLive] = useState<Live>({ phases: [], lines: [], connected: false, ended: false });
  const change = useRef(onChange);
  change.current = onChange;
  useEffect(() => {
    let socket: WebSocket | undefined;
    let lastSeq = 0;
    let stopped = false;
    let pending: TaskEvent[] = [];
    let frame = 0;
    let retry: ReturnType<typeof setTimeout> | undefined;
    let failures = 0; // consecutive connections that never opened (refused key, server down)
    const flush = () => {
      frame = 0;
      const batch = pending;
      pending = [];
      const significant = batch.some((e) => e.event_type !== "log");
      const ended = batch.some((e) => e.event_type === "done" || e.event_type === "error");
      const phases = batch.filter((e) => e.event_type === "phase");
      const lines = batch.filter((e) => e.event_type === "log" || e.event_type === "error");
      setLive((s) => ({
        ...s,
        phases: phases.length ? s.phases.concat(phases) : s.phases,
        lines: lines.length ? s.lines.concat(lines) : s.lines,
        ended: s.ended || ended,
      }));
      if (significant) change.current();
    };
    const connect = () => {
      const key = storedKey();
      if (!key || stopped) return;
      socket = new WebSocket(taskSocketUrl(id, lastSeq), ["api-key." + key]);
      socket.onopen = () => {
        failures = 0;
        setLive((s) => ({ ...s, connected: true }));
      };
      socket.onmessage = (m) => {
        const event = JSON.parse(String(m.data)) as TaskEvent;
        if (event.seq <= lastSeq) return;
        lastSeq = event.seq;
        pending.push(event);
        frame ||= requestAnimationFrame(flush);
      };
      socket.onclose = (c) => {
        setLive((s) => ({ ...s, connected: false }));
        if (!c.wasClean) failures++;
        // 1000: the task ended and the server closed the stream; 1008/4xxx: refused.
        if (!stopped && c.code !== 1000 && c.code !== 1008 && c.code < 4000 && failures < 5)
          retry = setTimeout(connect, 1000 * 2 ** failures);
      };
    };
    connect();
    return () => {
      stopped = true;
      clearTimeout(retry);
      if (frame) cancelAnimationFrame(frame);
      socket?.close();
    };
  }, [id]);
  return live;
}

function Timeline({ task, phases }: { task: Task; phases: Live["phases"] }) {
  const reached = new Map<string, string>();
  for (const e of phases) if (!reached.has(e.phase)) reached.set(e.phase, e.ts);
  const failed = task.phase === "FAILED";
  return (
    <ol class="timeline" aria-label="Phases">
      {PHASES.map((p) => {
        const current = task.phase === p;
        const state = current ? "current" : reached.has(p) ? "done" : "todo";
        return (
          <li key={p} class={`phase-${state}`} aria-current={current ? "step" : undefined}>
            <span class="dot" aria-hidden="true" />
            <span>{p.replace(/_/g, " ")}</span>
            {reached.has(p) && (
              <time dateTime={reached.get(p)}>
                {new Date(reached.get(p)!).toLocaleTimeString()}
              </time>
            )}
          </li>
        );
      })}
      {failed && (
        <li class="phase-failed" aria-current="step">
          <span class="dot" aria-hidden="true" />
          <span>FAILED</span>
        </li>
      )}
    </ol>
  );
}

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** The diff file by file (diff2html), with the review's comments under the lines they concern. */
function Diff({
  diff,
  comments,
}: {
  diff: string;
  comments: NonNullable<Task["review"]>["comments"];
}) {
  const ref = useRef<HTMLDivElement>(null);
  useLayoutEffect(() => {
    const el = ref.current;
    if (!el) return;
    el.innerHTML = diffHtml(diff, {
      drawFileList: true,
      outputFormat: "line-by-line",
      matching: "lines",
    });
    for (const wrapper of el.querySelectorAll<HTMLElement>(".d2h-file-wrapper")) {
      const name = wrapper.querySelector(".d2h-file-name")?.textContent?.trim() ?? "";
      const mine = comments.filter((c) => name === c.path || name.endsWith(" → " + c.path));
      const rows = [...wrapper.querySelectorAll<HTMLTableRowElement>("tr")];
      for (const c of mine) {
        const row =
          rows.find((r) => r.querySelector(".line-num2")?.textContent?.trim() === String(c.line)) ??
          rows[rows.length - 1];
        if (!row) continue;
        const note = document.createElement("tr");
        note.className = `review-comment severity-${c.severity}`;
        note.innerHTML = `<td colspan="2"><strong>${escapeHtml(c.severity)}</strong> (line ${c.line}): ${escapeHtml(c.body)}</td>`;
        row.after(note);
      }
    }
  }, [diff, comments]);
  return <div ref={ref} class="diff" data-testid="diff" />;
}

/** One gate's pair of buttons; a 409 (someone else decided first) is a plain message. */
function Gate({
  task,
  approve,
  reject,
  labels,
  onDone,
}: {
  task: Task;
  approve: string;
  reject: string;
  labels: [string, string];
  onDone: () => void;
}) {
  const action = useAction();
  const [note, setNote] = useState<string>();
  const decide = (path: string) =>
    void action.run(async () => {
      try {
        await api("POST", `/tasks/${encodeURIComponent(task.id)}/${path}`);
      } catch (err) {
        if (err instanceof ApiError && err.status === 409) {
          setNote(
            `This task is no longer waiting for that decision (${err.message}). The page shows its current state.`,
          );
          onDone();
          return;
        }
        throw err;
      }
      onDone();
    });
  return (
    <div class="gate" role="group" aria-label="Decision">
      <button type="button" class="primary" disabled={action.busy} onClick={() => decide(approve)}>
        {labels[0]}
      </button>
      <button type="button" class="danger" disabled={action.busy} onClick={() => decide(reject)}>
        {labels[1]}
      </button>
      <ErrorBox error={action.error} />
      {note && <p role="status">{note}</p>}
    </div>
  );
}

/** The task page: live phases and log, plan and diff with their gates, review, checks, cost. */
export function TaskPage({ id }: { id: string }) {
  const task = useResource(() => api<Task>("GET", `/tasks/${encodeURIComponent(id)}`), [id]);
  const live = useTaskEvents(id, task.reload);
  const cancel = useAction();
  const logEnd = useRef<HTMLLIElement>(null);
  const logs = live.lines;

  return (
    <Loaded res={task} what="the task">
      {(t) => (
        <article class="task">
          <header class="task-head">
            <h1>
              {t.description.length > 120 ? t.description.slice(0, 117) + "…" : t.description}
            </h1>
            <p>
              <StatusBadge status={t.status} /> <span data-testid="phase">{t.phase}</span>{" "}
              <span class="muted">
                · {t.repo_id} · created <Time iso={t.created_at} />
              </span>
              <span class="muted" aria-live="polite">
                {" "}
                · {live.connected ? "live" : live.ended ? "finished" : "connecting…"}
              </span>
            </p>
            <dl class="facts">
              <div>
                <dt>Branch</dt>
                <dd data-testid="branch">{t.branch ?? "—"}</dd>
              </div>
              <div>
                <dt>Pull request</dt>
                <dd>
                  {t.pr_url ? (
                    <a href={t.pr_url} target="_blank" rel="noopener noreferrer">
                      {t.pr_url}
                    </a>
                  ) : (
                    "—"
                  )}
                </dd>
              </div>
              <div>
                <dt>Tokens</dt>
                <dd>
                  {t.cost.input_tokens.toLocaleString()} in /{" "}
                  {t.cost.output_tokens.toLocaleString()} out
                </dd>
              </div>
              <div>
                <dt>Cost</dt>
                <dd>${t.cost.usd.toFixed(4)}</dd>
              </div>
            </dl>
            {!TERMINAL.has(t.status) && (
              <button
                type="button"
                class="danger"
                disabled={cancel.busy}
                onClick={() => {
                  if (window.confirm("Cancel this task? Nothing more will be done or pushed."))
                    void cancel.run(async () => {
                      await api("POST", `/tasks/${encodeURIComponent(t.id)}/cancel`);
                      task.reload();
                    });
                }}
              >
                Cancel task
              </button>
            )}
            <ErrorBox error={cancel.error} />
            {t.error && (
              <p class="error" role="alert" data-testid="task-error">
                {t.error}
              </p>
            )}
          </header>

          <section aria-labelledby="phases-title">
            <h2 id="phases-title">Progress</h2>
            <Timeline task={t} phases={live.phases} />
          </section>

          {t.plan && (
            <section aria-labelledby="plan-title">
              <h2 id="plan-title">Plan</h2>
              {t.plan_summary && <p>{t.plan_summary}</p>}
              <ol class="plan">
                {t.plan.map((s) => (
                  <li key={s.step}>
                    <strong>{s.title}</strong>
                    <p>{s.description}</p>
                    {s.files.length > 0 && (
                      <p class="muted">
                        Files:{" "}
                        {s.files.map((f) => (
                          <code key={f}>{f} </code>
                        ))}
                      </p>
                    )}
                  </li>
                ))}
              </ol>
              {t.status === "awaiting_approval" && (
                <Gate
                  task={t}
                  approve="approve"
                  reject="reject"
                  labels={["Approve plan", "Reject plan"]}
                  onDone={task.reload}
                />
              )}
            </section>
          )}

          {t.review && (
            <section aria-labelledby="review-title">
              <h2 id="review-title">Review</h2>
              <p>
                <span class={`badge verdict-${t.review.verdict}`}>
                  {t.review.verdict.replace(/_/g, " ")}
                </span>{" "}
                {t.review.summary}
              </p>
            </section>
          )}

          {t.diff !== null && (
            <section aria-labelledby="diff-title">
              <h2 id="diff-title">Changes</h2>
              {t.status === "awaiting_diff_approval" && (
                <Gate
                  task={t}
                  approve="approve-diff"
                  reject="reject-diff"
                  labels={["Approve diff", "Reject diff"]}
                  onDone={task.reload}
                />
              )}
              {t.diff ? (
                <Diff diff={t.diff} comments={t.review?.comments ?? []} />
              ) : (
                <p class="muted">No changes.</p>
              )}
            </section>
          )}

          {t.checks && (
            <section aria-labelledby="checks-title">
              <h2 id="checks-title">Checks</h2>
              <p class="muted">
                From {t.checks.source ?? "—"} · fix attempts used: {t.checks.fix_attempts}
              </p>
              <ul class="plain">
                {t.checks.results.map((c) => (
                  <li key={c.name}>
                    <span class={c.ok ? "ok" : "bad"}>{c.ok ? "passed" : "failed"}</span>{" "}
                    <strong>{c.name}</strong> <code>{c.command}</code>{" "}
                    <span class="muted">{(c.duration_ms / 1000).toFixed(1)} s</span>
                  </li>
                ))}
              </ul>
              <p class="muted">Each check's output is in the log below.</p>
            </section>
          )}

          <Trajectory taskId={t.id} />
          <section aria-labelledby="log-title">
            <h2 id="log-title">Log</h2>
            {logs.length === 0 ? (
              <p class="muted">No log lines yet.</p>
            ) : (
              <ol class="log" data-testid="log" aria-live="polite">
                {logs.map((e) => (
                  <li key={e.seq} class={e.event_type === "error" ? "bad" : ""}>
                    <time dateTime={e.ts}>{e.ts.slice(11, 19)}</time>{" "}
                    <span>
                      {e.event_type === "log" ? e.message : e.event_type === "error" ? e.error : ""}
                    </span>
                  </li>
                ))}
                <li ref={logEnd} class="sr-only">
                  {logs.length} lines
                </li>
              </ol>
            )}
          </section>
        </article>
      )}
    </Loaded>
  );
}
